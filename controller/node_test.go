package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/testwait"
)

// checkFor polls f until it returns nil or total passes.
func checkFor(t *testing.T, total time.Duration, f func() error) {
	t.Helper()
	var err error
	if !testwait.Until(total, func() bool { err = f(); return err == nil }) {
		t.Fatalf("after %v: %v", total, err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testConfig is a fast-timing config on the in-memory network.
func testConfig(t *testing.T, id int32, mn *memNet, voters []Voter) Config {
	c := DefaultConfig()
	c.NodeID = id
	c.net = mn
	c.ControllerListen = fmt.Sprintf("n%d", id)
	c.Voters = voters
	c.BrokerSessionTimeout = time.Second
	c.HeartbeatInterval = 100 * time.Millisecond
	c.Endpoints = []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}}
	c.Logger = testLogger(t)
	c.raftTune = func(rc *raft.Config) {
		rc.HeartbeatTimeout = 300 * time.Millisecond
		rc.ElectionTimeout = 300 * time.Millisecond
		rc.LeaderLeaseTimeout = 150 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
	}
	return c
}

func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func waitReady(t *testing.T, nodes ...*Node) {
	t.Helper()
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := n.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatalf("node %d: %v", n.NodeID(), err)
		}
	}
}

func memVoters(n int) []Voter {
	var vs []Voter
	for i := 1; i <= n; i++ {
		vs = append(vs, Voter{ID: int32(i), Addr: fmt.Sprintf("n%d", i)})
	}
	return vs
}

// memCluster starts n voters on a fresh in-memory network.
func memCluster(t *testing.T, n int, tweak func(*Config)) (*memNet, []*Node) {
	mn := newMemNet()
	vs := memVoters(n)
	var nodes []*Node
	for i := 1; i <= n; i++ {
		cfg := testConfig(t, int32(i), mn, vs)
		if tweak != nil {
			tweak(&cfg)
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	waitReady(t, nodes...)
	return mn, nodes
}

func leaderOf(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var l *Node
	checkFor(t, 10*time.Second, func() error {
		for _, n := range nodes {
			if n.ctx.Err() == nil && n.isController() {
				l = n
				return nil
			}
		}
		return errors.New("no leader")
	})
	return l
}

// otherThan returns the last of nodes that is not n.
func otherThan(nodes []*Node, n *Node) *Node {
	var o *Node
	for _, x := range nodes {
		if x != n {
			o = x
		}
	}
	return o
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := c
	bad.BrokerSessionTimeout = time.Second
	bad.HeartbeatInterval = time.Second
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "heartbeat interval") {
		t.Fatalf("got %v", err)
	}
	bad = c
	bad.Voters = []Voter{{1, "a:1"}}
	if err := bad.Validate(); err == nil {
		t.Fatal("voters without a listen address accepted")
	}
	vs, err := ParseVoters("1@h1:9093, 2@h2:9093")
	if err != nil || len(vs) != 2 || vs[1] != (Voter{2, "h2:9093"}) {
		t.Fatalf("%v %v", vs, err)
	}
	for _, s := range []string{"1h:1", "x@h:1", "1@h"} {
		if _, err := ParseVoters(s); err == nil {
			t.Fatalf("%q accepted", s)
		}
	}
}

// Single-node mode: no flags, persistent across restarts.
func TestSingleNodeRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Logger = testLogger(t)
	cfg.HeartbeatInterval = 100 * time.Millisecond
	n := startNode(t, cfg)
	waitReady(t, n)
	if _, err := n.CreateTopic(ctxT(t), CreateTopicRequest{Name: "t", Partitions: 2, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if err := n.Fresh(); err != nil {
		t.Fatal(err)
	}
	cid := n.MetadataImage().ClusterID()
	if cid == "" {
		t.Fatal("no cluster id")
	}
	n.Close()

	n2 := startNode(t, cfg)
	waitReady(t, n2)
	img := n2.MetadataImage()
	p, ok := img.Partition("t", 1)
	if !ok || p.Leader != 0 || img.ClusterID() != cid {
		t.Fatalf("after restart: %+v %v cluster %q", p, ok, img.ClusterID())
	}
	if _, err := n2.CreateTopic(ctxT(t), CreateTopicRequest{Name: "t", Partitions: 1}); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("got %v", err)
	}
	n2.Close()
	// Another configured cluster id is refused by the data dir.
	cfg.ClusterID = "other"
	n3, _ := New(cfg)
	if err := n3.Start(context.Background()); !errors.Is(err, metadata.ErrClusterIDMismatch) {
		t.Fatalf("got %v", err)
	}
}

func TestFailover(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	old := leaderOf(t, nodes)
	follower := otherThan(nodes, old)
	// Forwarded from a follower; the caller sees its own write at once.
	if _, err := follower.CreateTopic(ctxT(t), CreateTopicRequest{Name: "a", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	if _, ok := follower.MetadataImage().Topic("a"); !ok {
		t.Fatal("topic missing on the caller after CreateTopic returned")
	}
	old.Close()
	var rest []*Node
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	l := leaderOf(t, rest)
	if l == old {
		t.Fatal("closed node still leads")
	}
	top, err := rest[0].CreateTopic(ctxT(t), CreateTopicRequest{Name: "b", Partitions: 2, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Partitions) != 2 {
		t.Fatalf("%+v", top)
	}
	checkFor(t, 5*time.Second, func() error {
		if _, ok := rest[1].MetadataImage().Topic("b"); !ok {
			return errors.New("topic b not replicated")
		}
		return nil
	})
	if err := rest[1].DeleteTopic(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := rest[1].CreatePartitions(ctxT(t), "b", 1, nil); !errors.Is(err, metadata.ErrInvalidPartitions) {
		t.Fatalf("got %v", err)
	}
	if _, err := rest[1].CreatePartitions(ctxT(t), "b", 4, nil); err != nil {
		t.Fatal(err)
	}
	// Alone, the last node loses its leader (or its lease) and reports its
	// metadata stale instead of serving it.
	if err := rest[1].Fresh(); err != nil {
		t.Fatalf("fresh before the quorum is lost: %v", err)
	}
	rest[0].Close()
	checkFor(t, rest[1].cfg.MaxStaleness+5*time.Second, func() error {
		if err := rest[1].Fresh(); !errors.Is(err, ErrStale) {
			return fmt.Errorf("Fresh: %v", err)
		}
		return nil
	})
}

func TestFencingMovesLeaders(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	victim := nodes[1]
	// Broker 2 leads every partition; the others are in sync.
	top, err := nodes[0].CreateTopic(ctxT(t), CreateTopicRequest{Name: "f", Assignment: [][]int32{{2, 1, 3}, {2, 3, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	before := top.Partitions
	victim.pauseHeartbeats.Store(true)
	cfg := victim.cfg
	// Timeout, plus a heartbeat-check tick and a commit, with slack for -race.
	checkFor(t, cfg.BrokerSessionTimeout+5*time.Second, func() error {
		img := nodes[0].MetadataImage()
		if b, _ := img.Broker(2); !b.Fenced {
			return errors.New("broker 2 not fenced")
		}
		for i, want := range []int32{1, 3} {
			p, _ := img.Partition("f", int32(i))
			if p.Leader != want || contains(p.ISR, 2) || p.LeaderEpoch != before[i].LeaderEpoch+1 || p.PartitionEpoch <= before[i].PartitionEpoch {
				return fmt.Errorf("partition %d: %+v", i, p)
			}
		}
		return nil
	})
	checkFor(t, 5*time.Second, func() error {
		if err := victim.Fresh(); !errors.Is(err, metadata.ErrBrokerFenced) {
			return fmt.Errorf("victim Fresh: %v", err)
		}
		return nil
	})
	// The old leader's ISR change is rejected with a fenced epoch.
	_, err = victim.AlterPartition(ctxT(t), top.ID, 0, before[0].LeaderEpoch, before[0].PartitionEpoch, []int32{2, 1})
	if !errors.Is(err, metadata.ErrFencedLeaderEpoch) {
		t.Fatalf("got %v", err)
	}
	// Heartbeats resume: unfenced again.
	victim.pauseHeartbeats.Store(false)
	checkFor(t, 10*time.Second, func() error { return victim.Fresh() })
}

func contains(s []int32, v int32) bool { return slices.Contains(s, v) }

func TestNonVoterFollowsAndClusterIDChecked(t *testing.T) {
	mn, nodes := memCluster(t, 3, func(c *Config) { c.ClusterID = "cluster-a" })
	vs := nodes[0].cfg.Voters

	// A broker from another cluster is refused, and never joins raft.
	nv := startNode(t, testConfig(t, 5, mn, vs))
	badCfg := testConfig(t, 6, mn, vs)
	badCfg.ClusterID = "cluster-b"
	refused := startNode(t, badCfg)
	ctx := ctxT(t)
	if err := refused.WaitReady(ctx); !errors.Is(err, metadata.ErrClusterIDMismatch) {
		t.Fatalf("got %v", err)
	}
	if err := refused.Fresh(); !errors.Is(err, metadata.ErrClusterIDMismatch) {
		t.Fatalf("Fresh: %v", err)
	}

	// A broker with no cluster id adopts the cluster's and follows.
	waitReady(t, nv)
	members, err := nodes[0].Members()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(members, "5@n5 (nonvoter)") || slices.ContainsFunc(members, func(s string) bool { return strings.HasPrefix(s, "6@") }) {
		t.Fatalf("members %v", members)
	}
	if _, err := nodes[2].CreateTopic(ctxT(t), CreateTopicRequest{Name: "x", Partitions: 4, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		img := nv.MetadataImage()
		if _, ok := img.Topic("x"); !ok || img.ClusterID() != "cluster-a" {
			return errors.New("non-voter has not applied the topic")
		}
		return nv.Fresh()
	})
	// The non-voter can use the controller too.
	start, err := nv.AllocateProducerIDs(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	next, err := nodes[0].AllocateProducerIDs(ctxT(t))
	if err != nil || next != start+metadata.ProducerIDBlockSize {
		t.Fatalf("blocks %d %d %v", start, next, err)
	}
}

// Three nodes over real TCP on loopback: raft and the RPC share one port.
func TestTCPCluster(t *testing.T) {
	var lns []net.Listener
	var vs []Voter
	for i := 1; i <= 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		vs = append(vs, Voter{ID: int32(i), Addr: ln.Addr().String()})
	}
	var nodes []*Node
	for i := range 3 {
		cfg := testConfig(t, int32(i+1), nil, vs)
		cfg.net = nil
		cfg.ControllerListen = vs[i].Addr
		cfg.listener = lns[i]
		cfg.DataDir = t.TempDir()
		nodes = append(nodes, startNode(t, cfg))
	}
	waitReady(t, nodes...)
	l := leaderOf(t, nodes)
	var f *Node
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	top, err := f.CreateTopic(ctxT(t), CreateTopicRequest{Name: "tcp", Partitions: 3, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		for _, n := range nodes {
			if tp, ok := n.MetadataImage().Topic("tcp"); !ok || tp.Configs["retention.ms"] != "1000" {
				return fmt.Errorf("node %d lacks the topic", n.NodeID())
			}
		}
		return nil
	})
	// The leader of partition 0 shrinks its ISR through the controller.
	p := top.Partitions[0]
	leader := nodes[p.Leader-1]
	np, err := leader.AlterPartition(ctxT(t), top.ID, 0, p.LeaderEpoch, p.PartitionEpoch, []int32{p.Leader})
	if err != nil {
		t.Fatal(err)
	}
	if np.PartitionEpoch != p.PartitionEpoch+1 || len(np.ISR) != 1 {
		t.Fatalf("%+v", np)
	}
	// Same epochs again: stale.
	if _, err := leader.AlterPartition(ctxT(t), top.ID, 0, p.LeaderEpoch, p.PartitionEpoch, []int32{p.Leader}); !errors.Is(err, metadata.ErrInvalidUpdateVersion) {
		t.Fatalf("got %v", err)
	}
	// A raw connection with an unknown protocol byte is dropped.
	c, err := net.Dial("tcp", vs[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte{'X'})
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("unknown protocol byte got an answer")
	}
}

// ReportOfflineReplicas through the RPC from a non-controller broker: the
// replica leaves the ISR, its leadership moves, and every node's image
// shows it offline once the call returns.
func TestReportOfflineReplicas(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	victim := otherThan(nodes, leaderOf(t, nodes))
	id := victim.NodeID()
	var others []int32
	for _, n := range nodes {
		if n != victim {
			others = append(others, n.NodeID())
		}
	}
	top, err := nodes[0].CreateTopic(ctxT(t), CreateTopicRequest{Name: "d", Assignment: [][]int32{{id, others[0], others[1]}, {others[0], id, others[1]}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.ReportOfflineReplicas(ctxT(t), top.ID, []int32{0}); err != nil {
		t.Fatal(err)
	}
	p, _ := victim.MetadataImage().Partition("d", 0)
	if p.Leader != others[0] || contains(p.ISR, id) || !slices.Equal(p.Offline, []int32{id}) {
		t.Fatalf("after the report %+v", p)
	}
	if q, _ := victim.MetadataImage().Partition("d", 1); contains(q.Offline, id) || !contains(q.ISR, id) {
		t.Fatalf("unreported partition changed: %+v", q)
	}
	if err := victim.ReportOfflineReplicas(ctxT(t), metadata.NewUUID(), []int32{0}); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
}
