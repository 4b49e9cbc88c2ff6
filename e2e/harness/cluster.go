package harness

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const SessionTimeout = 3 * time.Second

type Cluster struct {
	T      *testing.T
	Nodes  []*BrokerProc // nodes[i] has node id i+1
	Voters string
}

// StartCluster starts n nodes, each a controller voter and a broker.
func StartCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	return StartClusterAt(t, FreshNodeSpecs(t, n), n, nil)
}

// NodeSpec is where one cluster node listens, and the command prefix it
// runs under (none: directly).
type NodeSpec struct {
	Addr, Ctrl, admin string
	prefix            []string
}

// FreshNodeSpecs returns n node specs on free loopback ports.
func FreshNodeSpecs(t *testing.T, n int) []NodeSpec {
	t.Helper()
	specs := make([]NodeSpec, n)
	for i := range specs {
		specs[i] = NodeSpec{Addr: FreePort(t), Ctrl: FreePort(t), admin: FreePort(t)}
	}
	return specs
}

// StartClusterAt starts one node per spec, node i+1 listening where
// specs[i] says: the first voters of them controller voters and the rest
// brokers that follow the metadata log as raft non-voters. nodeFlags, when
// not nil, gives the flags added to node i+1's after the common ones. It
// returns once every node is ready.
func StartClusterAt(t *testing.T, specs []NodeSpec, voters int, nodeFlags func(i int) []string) *Cluster {
	t.Helper()
	c := &Cluster{T: t}
	var vs []string
	for i, s := range specs[:voters] {
		vs = append(vs, fmt.Sprintf("%d@%s", i+1, s.Ctrl))
	}
	c.Voters = strings.Join(vs, ",")
	for i, s := range specs {
		var extra []string
		if nodeFlags != nil {
			extra = nodeFlags(i)
		}
		c.Nodes = append(c.Nodes, c.NewNode(int32(i+1), s, extra))
	}
	// All processes first: none becomes ready before a quorum runs.
	for _, b := range c.Nodes {
		b.Launch()
		t.Cleanup(func() { b.Stop() })
	}
	for _, b := range c.Nodes {
		b.WaitReady(60 * time.Second)
	}
	return c
}

// NewNode prepares (does not start) node id listening where s says, over
// a fresh data directory, in the cluster's quorum: a controller voter if
// c.voters names it, otherwise a broker following the metadata log as a
// raft non-voter. extra flags go after the common ones.
func (c *Cluster) NewNode(id int32, s NodeSpec, extra []string) *BrokerProc {
	b := &BrokerProc{T: c.T, DataDir: c.T.TempDir(), Addr: s.Addr, Admin: s.admin, Prefix: s.prefix}
	b.Args = []string{"serve",
		"--node-id", fmt.Sprint(id),
		"--listen", b.Addr,
		"--admin-listen", b.Admin,
		"--controller-listen", s.Ctrl,
		"--controller-voters", c.Voters,
		"--broker-session-timeout", SessionTimeout.String(),
		"--data-dir", b.DataDir,
		"--io", IOMode(),
		"--log-level", "debug",
	}
	b.Args = append(b.Args, extra...)
	return b
}

func (c *Cluster) Node(id int32) *BrokerProc { return c.Nodes[id-1] }

func (c *Cluster) Addrs(except ...int32) []string {
	var out []string
	for i, b := range c.Nodes {
		if !slices.Contains(except, int32(i+1)) {
			out = append(out, b.Addr)
		}
	}
	return out
}

// Controller polls the given nodes' /healthz until they agree on an active
// Controller that is not in exclude, and returns it.
func (c *Cluster) Controller(limit time.Duration, exclude ...int32) int32 {
	c.T.Helper()
	deadline := time.Now().Add(limit)
	for {
		ids := map[int32]bool{}
		ok := true
		for i, b := range c.Nodes {
			if slices.Contains(exclude, int32(i+1)) {
				continue
			}
			h, err := b.Health()
			if err != nil {
				ok = false
				break
			}
			id := int32(h["controller_id"].(float64))
			ids[id] = true
		}
		if ok && len(ids) == 1 {
			for id := range ids {
				if id >= 0 && !slices.Contains(exclude, id) {
					return id
				}
			}
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("nodes do not agree on a controller after %v: %v", limit, ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitMetadata polls kadm metadata through cl until ok accepts it.
func WaitMetadata(t *testing.T, adm *kadm.Client, limit time.Duration, what string, ok func(kadm.Metadata) bool) kadm.Metadata {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last kadm.Metadata
	for {
		ctx := Context(t, 5*time.Second)
		m, err := adm.Metadata(ctx)
		if err == nil {
			last = m
			if ok(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within %v; last metadata brokers %v topics %+v (err %v)", what, limit, last.Brokers.NodeIDs(), last.Topics, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func CreateTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, rf int16) {
	t.Helper()
	resp, err := adm.CreateTopic(Context(t, 30*time.Second), partitions, rf, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s (p=%d rf=%d): %v", name, partitions, rf, err)
	}
}

// WaitPath polls until path exists (or, with want false, is gone).
func WaitPath(t *testing.T, path string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(path)
		if (err == nil) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: exists=%v after 10s, want %v", path, err == nil, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
