package replication

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestClusterPlacementRedirectDelete(t *testing.T) {
	t.Parallel()
	harness.NeedTool(t, "/usr/bin/kcat")
	c := harness.StartCluster(t, 3)

	// Every node lists all three brokers (polled: a node is ready once it
	// is unfenced itself, and may apply the others' unfencing a moment
	// later).
	brokers := regexp.MustCompile(`(?m)^ 3 brokers:`)
	for _, b := range c.Nodes {
		harness.EventuallyEvery(t, 100*time.Millisecond, 10*time.Second, "kcat -L against "+b.Addr+" lists 3 brokers", func() (bool, string) {
			out := harness.RunCmd(t, "", 20*time.Second, "/usr/bin/kcat", "-L", "-b", b.Addr)
			return brokers.MatchString(out), out
		})
	}

	cl := c.Node(2).Client(t)
	adm := kadm.NewClient(cl)
	ctx := harness.Context(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 4, nil, "rf4"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 4 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	harness.CreateTopic(t, adm, "placed", 6, 3)
	m := harness.WaitMetadata(t, adm, 10*time.Second, "placed has leaders", func(m kadm.Metadata) bool {
		td, ok := m.Topics["placed"]
		return ok && td.Err == nil && len(td.Partitions) == 6
	})
	leaders := map[int32]int{}
	for _, p := range m.Topics["placed"].Partitions {
		reps := slices.Clone(p.Replicas)
		slices.Sort(reps)
		if !slices.Equal(reps, []int32{1, 2, 3}) || p.Leader != p.Replicas[0] || len(p.ISR) != 3 {
			t.Fatalf("partition %d: replicas %v leader %d isr %v", p.Partition, p.Replicas, p.Leader, p.ISR)
		}
		leaders[p.Leader]++
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("leaders not balanced: %v", leaders)
	}
	// Every replica holds a (for now empty, on followers) local log.
	for _, b := range c.Nodes {
		for p := range 6 {
			harness.WaitPath(t, filepath.Join(b.DataDir, fmt.Sprintf("placed-%d", p)), true)
		}
	}

	// DescribeCluster names the controller the nodes report.
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ctrl := c.Controller(10 * time.Second); dc.ErrorCode != 0 || dc.ControllerID != ctrl || len(dc.Brokers) != 3 {
		t.Fatalf("describe cluster: error %d controller %d (healthz %d), brokers %+v", dc.ErrorCode, dc.ControllerID, ctrl, dc.Brokers)
	}

	// A produce or fetch sent to a replica that does not lead is refused
	// with NOT_LEADER_OR_FOLLOWER; Fetch names the leader.
	p0 := m.Topics["placed"].Partitions[0]
	follower := p0.Replicas[1]
	raw := c.Node(follower).Client(t)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "placed"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, harness.EncodeBatch(1, []byte("x"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp, err := req.RequestWith(ctx, raw.Broker(int(follower)))
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to follower %d: error %d, want NOT_LEADER_OR_FOLLOWER", follower, code)
	}
	// v10 (KIP-951) names the leader and its endpoint, so clients move
	// the partition without a metadata request; v9 cannot carry them.
	cur := presp.Topics[0].Partitions[0].CurrentLeader
	if presp.Version != 10 || cur.LeaderID != p0.Leader || cur.LeaderEpoch != p0.LeaderEpoch {
		t.Fatalf("produce v%d to follower: current leader %+v, want v10 naming %d@%d", presp.Version, cur, p0.Leader, p0.LeaderEpoch)
	}
	var lb kadm.BrokerDetail
	for _, b := range m.Brokers {
		if b.NodeID == p0.Leader {
			lb = b
		}
	}
	if len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != p0.Leader || presp.Brokers[0].Port != lb.Port || presp.Brokers[0].Host != lb.Host {
		t.Fatalf("produce v10 node endpoints %+v, want only the leader's %+v", presp.Brokers, lb)
	}
	old := c.Node(follower).Client(t, kgo.MaxVersions(kversion.V3_6_0())) // Produce v9
	if presp, err = req.RequestWith(ctx, old.Broker(int(follower))); err != nil {
		t.Fatal(err)
	}
	if cur := presp.Topics[0].Partitions[0].CurrentLeader; presp.Version != 9 || cur.LeaderID != -1 || len(presp.Brokers) != 0 {
		t.Fatalf("produce v9 to follower carried KIP-951 fields: %+v %+v", cur, presp.Brokers)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.Version = 12
	freq.MaxWaitMillis, freq.MaxBytes, freq.ReplicaID = 10, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "placed"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, raw.Broker(int(follower)))
	if err != nil {
		t.Fatal(err)
	}
	fpr := fresp.Topics[0].Partitions[0]
	if fpr.ErrorCode != kerr.NotLeaderForPartition.Code || fpr.CurrentLeader.LeaderID != p0.Leader || fpr.CurrentLeader.LeaderEpoch != p0.LeaderEpoch {
		t.Fatalf("fetch from follower: error %d current leader %+v, want NOT_LEADER_OR_FOLLOWER and %d@%d", fpr.ErrorCode, fpr.CurrentLeader, p0.Leader, p0.LeaderEpoch)
	}

	// franz-go seeded with one node finds every partition's leader.
	prod := c.Node(3).Client(t, kgo.DefaultProduceTopic("placed"))
	const n = 60
	for i := range n {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("v%d", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons := c.Node(1).Client(t, kgo.ConsumeTopics("placed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		got += fs.NumRecords()
	}

	// DeleteTopics through one node removes the logs on every node.
	if _, err := kadm.NewClient(c.Node(1).Client(t)).DeleteTopics(ctx, "placed"); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Nodes {
		for p := range 6 {
			harness.WaitPath(t, filepath.Join(b.DataDir, fmt.Sprintf("placed-%d", p)), false)
		}
	}

	// A data dir of another cluster is refused when it tries to join.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, layout.MetaFile), []byte("node.id=4\ncluster.id=some-other-cluster\n"), 0o644)
	b4 := &harness.BrokerProc{T: t, DataDir: other, Addr: harness.FreePort(t), Admin: harness.FreePort(t)}
	b4.Args = []string{"serve", "--node-id", "4", "--listen", b4.Addr, "--admin-listen", b4.Admin,
		"--controller-listen", harness.FreePort(t), "--controller-voters", c.Voters, "--data-dir", other, "--io", harness.IOMode()}
	b4.Launch()
	select {
	case <-b4.Exited():
		if b4.ExitErr() == nil || !strings.Contains(b4.Out.String(), "cluster id mismatch") {
			t.Fatalf("node of another cluster: exit %v\n%s", b4.ExitErr(), b4.Out.String())
		}
	case <-time.After(30 * time.Second):
		b4.Kill9()
		t.Fatalf("node of another cluster still running after 30s\n%s", b4.Out.String())
	}
}

func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, 3)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	harness.CreateTopic(t, adm, "fo", 6, 3)
	harness.CreateTopic(t, adm, "solo", 3, 1)

	// kill -9 the active controller: a new one is elected and admin writes
	// through a surviving broker work again.
	victim := c.Controller(10 * time.Second)
	c.Node(victim).Kill9()
	killed := time.Now()
	next := c.Controller(15*time.Second, victim)
	elected := time.Since(killed)
	t.Logf("controller %d killed; node %d elected within %v", victim, next, elected.Round(10*time.Millisecond))
	sadm := kadm.NewClient(c.Node(next).Client(t, kgo.SeedBrokers(c.Addrs(victim)...)))
	harness.CreateTopic(t, sadm, "after-failover", 2, 2)

	// Its partition leaderships move (the victim is also a broker): the
	// controller fences it after the session timeout, so Metadata as
	// franz-go sees it drops the victim within the timeout plus a bound.
	// A new controller gives every broker a full session from its election,
	// so a killed controller's leaderships move after election (measured
	// 1.6-2.7 s) + session timeout + a fence tick and commit: measured 6.9-7.8 s.
	const bound = harness.SessionTimeout + 5*time.Second
	harness.WaitMetadata(t, sadm, harness.SessionTimeout+bound, "leaderships moved off the killed node", func(m kadm.Metadata) bool {
		if slices.Contains(m.Brokers.NodeIDs(), victim) {
			return false
		}
		td, ok := m.Topics["fo"]
		if !ok || len(td.Partitions) != 6 {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader == victim || p.Leader < 0 || slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})
	t.Logf("leaderships moved off node %d %v after the kill (session timeout %v)", victim, time.Since(killed).Round(10*time.Millisecond), harness.SessionTimeout)

	// The victim's RF=1 partition has no other replica: offline until it
	// returns, then led by it again.
	m, err := sadm.Metadata(harness.Context(t, 10*time.Second), "solo")
	if err != nil {
		t.Fatal(err)
	}
	var soloOnVictim int32 = -1
	for _, p := range m.Topics["solo"].Partitions {
		if p.Replicas[0] == victim {
			soloOnVictim = p.Partition
			if p.Leader != -1 {
				t.Fatalf("solo-%d on the killed node has leader %d", p.Partition, p.Leader)
			}
		}
	}
	if soloOnVictim < 0 {
		t.Fatalf("no solo partition placed on node %d: %+v", victim, m.Topics["solo"].Partitions)
	}

	// The restarted node rejoins unfenced.
	restarted := time.Now()
	c.Node(victim).Restart()
	harness.WaitMetadata(t, sadm, 15*time.Second, "restarted node listed and leading its solo partition", func(m kadm.Metadata) bool {
		td := m.Topics["solo"]
		return len(m.Brokers) == 3 && len(td.Partitions) == 3 && td.Partitions[soloOnVictim].Leader == victim
	})
	// The node learns of its own unfencing from its copy of the metadata
	// log, which may apply the record a moment after the survivor did.
	c.Node(victim).WaitHealth(10*time.Second, "restarted node active", harness.Active)
	t.Logf("node %d rejoined unfenced %v after its restart", victim, time.Since(restarted).Round(10*time.Millisecond))

	// kill -9 a broker that is not the controller: same story.
	ctrl := c.Controller(10 * time.Second)
	var broker int32 = 1
	for broker == ctrl {
		broker++
	}
	c.Node(broker).Kill9()
	killed = time.Now()
	// Here the controller keeps running: session timeout + fence tick and
	// commit (measured ~5 s from the kill, the last heartbeat being up to
	// 1 s older).
	harness.WaitMetadata(t, sadm, harness.SessionTimeout+6*time.Second, "leaderships moved off the killed broker", func(m kadm.Metadata) bool {
		td, ok := m.Topics["fo"]
		if !ok || slices.Contains(m.Brokers.NodeIDs(), broker) {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader == broker || p.Leader < 0 {
				return false
			}
		}
		return true
	})
	t.Logf("broker %d killed; leaderships moved %v later", broker, time.Since(killed).Round(10*time.Millisecond))
}

// TestClusterStaleLeaderRedirect pauses a partition leader until it is
// fenced and its leadership moves, resumes it, and produces with a client
// whose metadata still names it: the old leader answers
// NOT_LEADER_OR_FOLLOWER and franz-go recovers by itself.
func TestClusterStaleLeaderRedirect(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, 3)
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(time.Second))
	adm := kadm.NewClient(cl)
	harness.CreateTopic(t, adm, "redir", 3, 3)
	ctx := harness.Context(t, 60*time.Second)
	for p := range int32(3) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "redir", Partition: p, Value: []byte("before")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctrl := c.Controller(10 * time.Second)
	m, err := adm.Metadata(ctx, "redir")
	if err != nil {
		t.Fatal(err)
	}
	var part int32 = -1
	var victim int32
	for _, p := range m.Topics["redir"].Partitions {
		if p.Leader != ctrl {
			part, victim = p.Partition, p.Leader
			break
		}
	}
	if part < 0 {
		t.Fatalf("every partition led by the controller: %+v", m.Topics["redir"].Partitions)
	}
	vb := c.Node(victim)
	vb.Signal(syscall.SIGSTOP)
	paused := time.Now()
	// Watch through a separate client so cl keeps its old metadata, and
	// ask the controller node itself: kadm would pick any broker, and the
	// paused one would hang the request.
	other := c.Node(ctrl).Client(t)
	harness.EventuallyEvery(t, 100*time.Millisecond, harness.SessionTimeout+6*time.Second, fmt.Sprintf("leadership of redir-%d moved off paused node %d", part, victim), func() (bool, string) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("redir")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(harness.Context(t, 2*time.Second), other.Broker(int(ctrl)))
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 3 {
			if l := resp.Topics[0].Partitions[part].Leader; l != victim && l >= 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v %v", resp, err)
	})
	t.Logf("node %d paused; redir-%d moved %v later", victim, part, time.Since(paused).Round(10*time.Millisecond))
	vb.Signal(syscall.SIGCONT)
	before := vb.WaitHealth(15*time.Second, "resumed node active", harness.Active)["stats"].(map[string]any)["not_leader"].(float64)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "redir", Partition: part, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce with stale metadata: %v", err)
	}
	h, err := vb.Health()
	if err != nil {
		t.Fatal(err)
	}
	if after := h["stats"].(map[string]any)["not_leader"].(float64); after <= before {
		t.Fatalf("the old leader answered no NOT_LEADER_OR_FOLLOWER (counter %v -> %v): the client did not use stale metadata\n%s", before, after, vb.Out.String())
	}
}
