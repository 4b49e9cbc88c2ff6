package harness

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// RunAdmin runs `ringlog admin args...` and returns its combined output
// and exit error.
func RunAdmin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(Context(t, 90*time.Second), RinglogBin, append([]string{"admin"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func MustAdmin(t *testing.T, args ...string) string {
	t.Helper()
	out, err := RunAdmin(t, args...)
	if err != nil {
		t.Fatalf("ringlog admin %v: %v\n%s", args, err, out)
	}
	return out
}

func MustFailAdmin(t *testing.T, want string, args ...string) string {
	t.Helper()
	out, err := RunAdmin(t, args...)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("ringlog admin %v: err %v, want a failure saying %q; output:\n%s", args, err, want, out)
	}
	return out
}

// Assignment returns topic's replica lists by partition.
func Assignment(m kadm.Metadata, topic string) map[int32][]int32 {
	out := map[int32][]int32{}
	for _, p := range m.Topics[topic].Partitions {
		out[p.Partition] = p.Replicas
	}
	return out
}

func HasBroker(id int32) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool { return slices.Contains(m.Brokers.NodeIDs(), id) }
}

func LacksBroker(id int32) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool { return !slices.Contains(m.Brokers.NodeIDs(), id) }
}

// StartJoinedCluster starts 3 voters and broker 4 (a raft non-voter),
// creates topic (partitions x RF 3) while broker 4 is stopped, then starts
// broker 4 again: it joined after the topic was placed and holds nothing.
func StartJoinedCluster(t *testing.T, topic string, partitions int32) (*Cluster, *kadm.Client) {
	t.Helper()
	c := StartClusterAt(t, FreshNodeSpecs(t, 4), 3, nil)
	adm := kadm.NewClient(c.Node(1).Client(t))
	c.Node(4).Stop()
	WaitMetadata(t, adm, 20*time.Second, "broker 4 fenced", LacksBroker(4))
	CreateTopic(t, adm, topic, partitions, 3)
	c.Node(4).Restart()
	WaitMetadata(t, adm, 20*time.Second, "broker 4 back", HasBroker(4))
	return c, adm
}

// SkipWithoutReassign skips t when the broker does not serve
// AlterPartitionReassignments and ListPartitionReassignments (45/46). It
// asks one broker: a skip should not cost a cluster start.
func SkipWithoutReassign(t *testing.T) {
	t.Helper()
	probe := StartBroker(t, t.TempDir())
	vs, err := kadm.NewClient(probe.Client(t)).ApiVersions(Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Sorted() {
		for _, key := range []int16{45, 46} {
			if _, ok := v.KeyMaxVersion(key); !ok {
				t.Skipf("the broker answers UNSUPPORTED_VERSION for API %d (partition reassignment not built in this binary)", key)
			}
		}
	}
	probe.Stop()
}
