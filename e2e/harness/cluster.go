package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

func CreateTopicWith(t *testing.T, adm *kadm.Client, name string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(Context(t, 30*time.Second), partitions, rf, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

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
	b := &BrokerProc{T: c.T, DataDir: c.T.TempDir(), Addr: s.Addr, Admin: s.admin, Prefix: s.prefix, InProcess: inProcessFor(c.T)}
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
	var ctrl int32
	Eventually(c.T, limit, "nodes agree on a controller", func() (bool, string) {
		ids := map[int32]bool{}
		for i, b := range c.Nodes {
			if slices.Contains(exclude, int32(i+1)) {
				continue
			}
			h, err := b.Health()
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i+1, err)
			}
			ids[int32(h["controller_id"].(float64))] = true
		}
		if len(ids) == 1 {
			for id := range ids {
				if id >= 0 && !slices.Contains(exclude, id) {
					ctrl = id
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("controllers seen %v", ids)
	})
	return ctrl
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

// PartitionLeader waits until partition p of topic has a leader and
// returns it.
func PartitionLeader(t *testing.T, adm *kadm.Client, topic string, partitions int, p int32) int32 {
	t.Helper()
	m := WaitMetadata(t, adm, 30*time.Second, "a leader", func(m kadm.Metadata) bool {
		return len(m.Topics[topic].Partitions) == partitions && m.Topics[topic].Partitions[p].Leader >= 0
	})
	return m.Topics[topic].Partitions[p].Leader
}

// StartVoterCluster starts len(racks) nodes, the first voters of them
// controller voters and the rest brokers that follow the metadata log as
// raft non-voters; racks[i] is node i+1's --rack ("" for none). extra is
// added to every node's flags.
func StartVoterCluster(t *testing.T, voters int, racks []string, extra ...string) *Cluster {
	t.Helper()
	return StartClusterAt(t, FreshNodeSpecs(t, len(racks)), voters, func(i int) []string {
		flags := slices.Clone(extra)
		if racks[i] != "" {
			flags = append(flags, "--rack", racks[i])
		}
		return flags
	})
}

// FreshMetadata keeps kgo from answering kadm's Metadata from its cache
// (MetadataMinAge, 5 s by default), which would delay every poll below.
var FreshMetadata = kgo.MetadataMinAge(100 * time.Millisecond)

// CreateAssigned creates topic with an explicit replica assignment
// (partition i on assign[i], the first replica leading).
func CreateAssigned(t *testing.T, cl *kgo.Client, topic string, assign [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, reps := range assign {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t, 30*time.Second), cl)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s with assignment %v: %v", topic, assign, err)
	}
}

const ReplicaLag = 3 * time.Second

// StartReplCluster starts n voter+broker nodes like startCluster, with a
// short replica.lag.time.max and extra flags.
func StartReplCluster(t *testing.T, n int, extra ...string) *Cluster {
	t.Helper()
	return StartReplClusterAt(t, FreshNodeSpecs(t, n), extra...)
}

// StartReplClusterAt is startReplCluster on explicit addresses: node i+1
// listens where specs[i] says.
func StartReplClusterAt(t *testing.T, specs []NodeSpec, extra ...string) *Cluster {
	t.Helper()
	flags := append([]string{"--replica-lag-time-max", ReplicaLag.String()}, extra...)
	return StartClusterAt(t, specs, len(specs), func(int) []string { return flags })
}

// CreateRF3Topic creates topic with partitions partitions, RF=3 and
// min.insync.replicas=2, and waits until every partition has a leader and
// a full ISR.
func CreateRF3Topic(t *testing.T, adm *kadm.Client, topic string, partitions int) kadm.Metadata {
	t.Helper()
	resp, err := adm.CreateTopic(Context(t, 30*time.Second), int32(partitions), 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return WaitMetadata(t, adm, 30*time.Second, "full ISRs", FullISR(topic, partitions))
}

// FullISR is a waitMetadata condition: every partition of topic has a
// leader and all three replicas in its ISR.
func FullISR(topic string, partitions int) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool {
		td := m.Topics[topic]
		if len(td.Partitions) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	}
}

// SegmentBytes reads a partition's first segment file on one node.
func SegmentBytes(b *BrokerProc, topic string, p int32) []byte {
	data, _ := os.ReadFile(filepath.Join(b.DataDir, fmt.Sprintf("%s-%d", topic, p), "00000000000000000000.log"))
	return data
}

// TxnBrokerArgs keep the internal topics small and groups quick.
var TxnBrokerArgs = []string{
	"--transaction-state-partitions", "5",
	"--offsets-topic-partitions", "5",
	"--group-initial-rebalance-delay", "100ms",
}
