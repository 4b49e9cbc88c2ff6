package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/launch"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

func SetConfig(k, v string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v}
}

// AlterErr returns the error of an alter call for one resource: the
// request's or the resource's.
func AlterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	if len(rs) != 1 {
		return fmt.Errorf("%d responses, want 1", len(rs))
	}
	return rs[0].Err
}

// GrepLines returns the last max lines of log that contain s.
func GrepLines(log, s string, max int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out[len(out)-min(max, len(out)):], "\n")
}

// RunRinglogCode runs the ringlog binary with args and returns its combined
// output and exit status.
func RunRinglogCode(t *testing.T, ctx context.Context, args ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, RinglogBin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("ringlog %v: %v\n%s", args, err, out)
	return "", -1
}

func NeedTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skipf("%s missing and RINGLOG_SKIP_EXTERNAL_CLIENTS=1", path)
		}
		t.Fatalf("%s not installed (apt-get install kcat python3-confluent-kafka)", path)
	}
}

// NeedConfluentKafka skips or fails t, as needTool does, unless python3
// can import confluent_kafka.
func NeedConfluentKafka(t *testing.T) {
	t.Helper()
	NeedTool(t, "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skip("confluent_kafka missing")
		}
		t.Fatal("python3-confluent-kafka not installed")
	}
}

func RunCmd(t *testing.T, stdin string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx := Context(t, timeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, out.String(), errb.String())
	}
	return out.String()
}

// FreePortRun finds n consecutive free loopback ports (dev cluster takes a
// base port per listener kind and counts up from it).
func FreePortRun(t *testing.T, n int) int {
	t.Helper()
	base, err := launch.FreePortRun(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// ConsumeAll reads topic from the start until want records arrived or ctx
// ends.
func ConsumeAll(ctx context.Context, t *testing.T, addr, topic string, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(out), want)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch error %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

// Member is one franz-go group consumer that records its assignment, the
// first offset it received per partition and every offset it received.
type Member struct {
	cl    *kgo.Client
	Mu    sync.Mutex
	Owned map[int32]bool
	First map[int32]int64
	Seen  map[int32]map[int64]bool
	Count int
	Done  chan struct{}
}

// StartMember starts a member; opts come last, so they override the
// defaults (a shorter session timeout, say).
func StartMember(t *testing.T, addr, group, topic string, balancer kgo.GroupBalancer, opts ...kgo.Opt) *Member {
	t.Helper()
	m := &Member{Owned: map[int32]bool{}, First: map[int32]int64{}, Seen: map[int32]map[int64]bool{}, Done: make(chan struct{})}
	drop := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
		m.Mu.Lock()
		for _, p := range ps[topic] {
			delete(m.Owned, p)
		}
		m.Mu.Unlock()
	}
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer), kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(10 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.Mu.Lock()
			for _, p := range ps[topic] {
				m.Owned[p] = true
			}
			m.Mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.Done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				m.Mu.Lock()
				if _, ok := m.First[r.Partition]; !ok {
					m.First[r.Partition] = r.Offset
				}
				if m.Seen[r.Partition] == nil {
					m.Seen[r.Partition] = map[int64]bool{}
				}
				m.Seen[r.Partition][r.Offset] = true
				m.Count++
				m.Mu.Unlock()
			})
		}
	}()
	return m
}

// Close leaves the group (committing what was consumed, franz-go's
// autocommit on revoke) and stops polling.
func (m *Member) Close() {
	m.cl.Close()
	<-m.Done
}

func (m *Member) Assigned() []int32 {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	var ps []int32
	for p := range m.Owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func CommittedOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx := Context(t, 20*time.Second)
	fo, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := fo.Error(); err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range fo[topic] {
		out[p] = o.At
	}
	return out
}

func ProduceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := Context(t, 30*time.Second)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// EndOffsets is listedEnds by partition.
func EndOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	ListedEnds(t, adm, topic).Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// ListedEnds lists topic's end offsets through kadm, which does not retry
// a partition's retriable error (OFFSET_NOT_AVAILABLE from a leader just
// elected, NOT_LEADER_OR_FOLLOWER) but returns it with offset -1; a reader
// taking that as the end would stop short. It asks again, for up to 30 s,
// until every partition answers.
func ListedEnds(t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	var ends kadm.ListedOffsets
	EventuallyEvery(t, 100*time.Millisecond, 30*time.Second, "end offsets of "+topic, func() (bool, string) {
		var err error
		ends, err = adm.ListEndOffsets(Context(t, 10*time.Second), topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil && !kerr.IsRetriable(err) {
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		return err == nil, fmt.Sprint(err)
	})
	return ends
}

func TxnClient(t *testing.T, seeds []string, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.TransactionTimeout(20 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func NewClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
