package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// askMetadata sends one Metadata request for topic to exactly the broker
// cl was seeded with (not a random broker of the cluster).
func askMetadata(ctx context.Context, cl *kgo.Client, topic string) ([]kmsg.MetadataResponseTopicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("client has %d seeds, want 1", len(seeds))
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 {
		return nil, fmt.Errorf("metadata for %d topics", len(mr.Topics))
	}
	if err := kerr.ErrorForCode(mr.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	return mr.Topics[0].Partitions, nil
}

// TestControlledShutdown sends SIGTERM to a broker that leads partitions
// of an RF=3 topic while acks=all producers run, and checks that another
// broker's metadata shows every one of those partitions led by a member of
// its ISR other than the victim no later than the victim's exit, and that
// no produce failed for good.
func TestControlledShutdown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test")
	}
	// The active controller's own shutdown must hand the quorum over
	// before it asks for its fence, or the others see the moves only after
	// a new controller is elected.
	t.Run("broker", func(t *testing.T) { controlledShutdown(t, false) })
	t.Run("controller", func(t *testing.T) {
		controlledShutdown(t, true)
	})
}

func controlledShutdown(t *testing.T, ofController bool) {
	c := harness.StartReplCluster(t, 3)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	const topic, partitions = "cshut", 6
	m := harness.CreateRF3Topic(t, adm, topic, partitions)
	// The victim: a broker that leads partitions, the active controller
	// or not.
	ctrl := c.Controller(20 * time.Second)
	var victim int32 = -1
	var led []int32
	for id := int32(1); id <= 3 && victim < 0; id++ {
		if (id == ctrl) != ofController {
			continue
		}
		for _, p := range m.Topics[topic].Partitions {
			if p.Leader == id {
				victim = id
				led = append(led, p.Partition)
			}
		}
	}
	if victim < 0 {
		t.Fatalf("no broker (controller: %v) leads a partition: %+v", ofController, m.Topics[topic].Partitions)
	}
	var observer int32 = 1
	for observer == victim {
		observer++
	}
	obs := c.Node(observer).Client(t, kgo.SeedBrokers(c.Node(observer).Addr))
	t0 := time.Now() // reset at SIGTERM

	// One acks=all producer per partition, one record at a time, with
	// bounded retries; every final failure is kept with its error.
	var (
		mu       sync.Mutex
		acked    int
		failures []string
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for p := range int32(partitions) {
		pcl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(4*time.Second),
			kgo.ProduceRequestTimeout(3*time.Second),
			kgo.MetadataMinAge(100*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
				err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr()
				cancel()
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("partition %d at +%v: %v", p, time.Since(t0).Round(time.Millisecond), err))
				} else {
					acked++
				}
				mu.Unlock()
			}
		}()
	}
	stopLoad := sync.OnceFunc(func() { stop.Store(true); wg.Wait() })
	t.Cleanup(stopLoad)
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return acked
	}
	// ackedGrows waits for n more acknowledgements than now.
	ackedGrows := func(n int, what string) {
		t.Helper()
		from := ackedNow()
		harness.Eventually(t, 30*time.Second, what, func() (bool, string) {
			a := ackedNow()
			return a >= from+n, fmt.Sprintf("%d acknowledged, %d before", a, from)
		})
	}
	ackedGrows(10*partitions, "load running")
	before := ackedNow()

	moved := func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ps, err := askMetadata(ctx, obs, topic)
		if err != nil {
			return false, err.Error()
		}
		var state []string
		ok := len(ps) == partitions
		for _, p := range ps {
			if !slices.Contains(led, p.Partition) {
				continue
			}
			state = append(state, fmt.Sprintf("%d:leader=%d,isr=%v", p.Partition, p.Leader, p.ISR))
			if p.Leader < 0 || p.Leader == victim || !slices.Contains(p.ISR, p.Leader) {
				ok = false
			}
		}
		return ok, strings.Join(state, " ")
	}

	vp := c.Node(victim)
	t0 = time.Now()
	t.Logf("SIGTERM node %d (leads %s partitions %v, controller %d, observer %d)", victim, topic, led, ctrl, observer)
	t0 = time.Now()
	if err := vp.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var movedAt, exitedAt time.Duration
	var last string
	// Every 5 ms: the two moments are measured.
	harness.EventuallyEvery(t, 5*time.Millisecond, 30*time.Second-time.Since(t0), "leaderships moved and node exited after SIGTERM", func() (bool, string) {
		exitedNow := false
		if exitedAt == 0 {
			select {
			case <-vp.Exited():
				exitedAt, exitedNow = time.Since(t0), true
			default:
			}
		}
		if movedAt == 0 {
			var ok bool
			if ok, last = moved(); ok {
				movedAt = time.Since(t0)
			} else if exitedNow {
				t.Fatalf("node %d exited %v after SIGTERM with its leaderships not moved: %s\n%s", victim, exitedAt, last, vp.Out.String())
			}
		}
		return movedAt != 0 && exitedAt != 0, fmt.Sprintf("moved at %v, exited at %v; partitions %s", movedAt, exitedAt, last)
	})
	if vp.ExitErr() != nil {
		t.Fatalf("node %d exit: %v\n%s", victim, vp.ExitErr(), vp.Out.String())
	}
	if !strings.Contains(vp.Out.String(), "controlled shutdown: leaderships moved") {
		t.Fatalf("node %d did not report a controlled shutdown:\n%s", victim, vp.Out.String())
	}
	t.Logf("SIGTERM -> leaderships moved (seen on node %d): %v; SIGTERM -> exit: %v; %s", observer, movedAt.Round(time.Millisecond), exitedAt.Round(time.Millisecond), last)

	// The producers keep going on the new leaders.
	ackedGrows(10*partitions, "acks after the exit")
	stopLoad()
	after := acked
	t.Logf("acks=all producers: %d acknowledged before SIGTERM, %d in all, %d failed", before, after, len(failures))
	fmt.Printf("controlled-shutdown: controller=%v moved_ms=%d exit_ms=%d acked=%d failed=%d\n", ofController, movedAt.Milliseconds(), exitedAt.Milliseconds(), after, len(failures))
	for _, f := range failures {
		t.Error("produce failed after retries:", f)
	}
	if after <= before {
		t.Fatalf("no produce acknowledged after SIGTERM (%d before, %d after)", before, after)
	}
}

// TestUncleanLeaderElection leaves two RF=2 topics (replicas [A, B],
// min.insync.replicas=1) with A as the only ISR member, kills A and
// restarts B, the out-of-sync replica. The topic without
// unclean.leader.election.enable stays leaderless; the one with it set
// gets B as leader, and the controller logs the election at ERROR.
func TestUncleanLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	// Five voters: the quorum survives A and B both down.
	c := harness.StartReplCluster(t, 5, "--replica-lag-time-max", "1s")
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...))
	adm := kadm.NewClient(cl)
	ctrl := c.Controller(20 * time.Second)
	var ab []int32
	for id := int32(1); id <= 5 && len(ab) < 2; id++ {
		if id != ctrl {
			ab = append(ab, id)
		}
	}
	a, b := ab[0], ab[1]
	const clean, dirty = "uncl-off", "uncl-on"
	ctx := harness.Context(t, 60*time.Second)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	for _, name := range []string{clean, dirty} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = 0, []int32{a, b}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("1")
		rt.Configs = append(rt.Configs, cfg)
		if name == dirty {
			u := kmsg.NewCreateTopicsRequestTopicConfig()
			u.Name, u.Value = "unclean.leader.election.enable", kmsg.StringPtr("true")
			rt.Configs = append(rt.Configs, u)
		}
		req.Topics = append(req.Topics, rt)
	}
	cresp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range cresp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("create %s: %v", rt.Topic, err)
		}
	}
	part := func(m kadm.Metadata, topic string) (kadm.PartitionDetail, bool) {
		td, ok := m.Topics[topic]
		if !ok || len(td.Partitions) != 1 {
			return kadm.PartitionDetail{}, false
		}
		p, ok := td.Partitions[0]
		return p, ok
	}
	both := func(f func(p kadm.PartitionDetail) bool) func(kadm.Metadata) bool {
		return func(m kadm.Metadata) bool {
			for _, topic := range []string{clean, dirty} {
				if p, ok := part(m, topic); !ok || !f(p) {
					return false
				}
			}
			return true
		}
	}
	harness.WaitMetadata(t, adm, 30*time.Second, "leader A, ISR [A B]", both(func(p kadm.PartitionDetail) bool {
		return p.Leader == a && len(p.ISR) == 2
	}))

	pcl := c.Node(a).Client(t, kgo.SeedBrokers(c.Addrs(b)...),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	produce := func(topic string, n int, tag string) {
		t.Helper()
		for i := range n {
			r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
			if err := pcl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s to %s: %v", tag, topic, err)
			}
		}
	}
	const inSync, onlyA = 10, 15
	produce(clean, inSync, "both")
	produce(dirty, inSync, "both")

	// B dies; A is left as the only ISR member and keeps acknowledging.
	t.Logf("kill -9 node %d (follower), leader is %d, controller %d", b, a, ctrl)
	c.Node(b).Kill9()
	harness.WaitMetadata(t, adm, 20*time.Second, "ISR [A]", both(func(p kadm.PartitionDetail) bool {
		return p.Leader == a && slices.Equal(p.ISR, []int32{a})
	}))
	produce(clean, onlyA, "onlyA")
	produce(dirty, onlyA, "onlyA")

	// A dies: no live ISR member, no live replica at all.
	t.Logf("kill -9 node %d (leader, sole ISR member)", a)
	tA := time.Now()
	c.Node(a).Kill9()
	// Metadata from one live broker (the controller node), not a random
	// one: a client picking a dead broker first would add its retries to
	// the times measured here.
	ccl := c.Node(ctrl).Client(t, kgo.SeedBrokers(c.Node(ctrl).Addr))
	leaderOf := func(topic string) (int32, []int32, error) {
		mctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ps, err := askMetadata(mctx, ccl, topic)
		if err == nil && len(ps) != 1 {
			err = fmt.Errorf("%s has %d partitions", topic, len(ps))
		}
		if err != nil {
			return 0, nil, err
		}
		return ps[0].Leader, ps[0].ISR, nil
	}
	harness.EventuallyEvery(t, 20*time.Millisecond, 20*time.Second, fmt.Sprintf("leaderless after killing node %d", a), func() (bool, string) {
		l1, _, err1 := leaderOf(clean)
		l2, _, err2 := leaderOf(dirty)
		return err1 == nil && err2 == nil && l1 == -1 && l2 == -1, fmt.Sprintf("%d %d (%v %v)", l1, l2, err1, err2)
	})
	t.Logf("leaderless %v after killing the leader", time.Since(tA).Round(time.Millisecond))

	// B comes back, out of sync.
	tB := time.Now()
	c.Node(b).Restart()
	readyIn := time.Since(tB)
	cleanLeaderless := func() (bool, string) {
		l, isr, err := leaderOf(clean)
		return err != nil || l == -1, fmt.Sprintf("%s (unclean election off) got leader %d, ISR %v, after the out-of-sync replica %d came back", clean, l, isr, b)
	}
	var electedAt time.Duration
	harness.EventuallyEvery(t, 20*time.Millisecond, 20*time.Second, fmt.Sprintf("%s: an unclean election after restarting node %d", dirty, b), func() (bool, string) {
		if ok, state := cleanLeaderless(); !ok {
			t.Fatal(state)
		}
		l, isr, err := leaderOf(dirty)
		if err != nil || l == -1 {
			return false, fmt.Sprintf("leader %d (err %v)", l, err)
		}
		if l != b || !slices.Equal(isr, []int32{b}) {
			t.Fatalf("%s: leader %d ISR %v, want %d [%d]", dirty, l, isr, b, b)
		}
		electedAt = time.Since(tB)
		return true, ""
	})
	// After the election, the clean topic must stay leaderless through
	// many controller ticks: 3 s is 20 of them (one per SessionTimeout/20).
	harness.Holds(t, 3*time.Second, clean+" leaderless", cleanLeaderless)
	t.Logf("node %d restarted (ready in %v): unclean election of %s after %v (%v after ready); %s still leaderless 3s later",
		b, readyIn.Round(time.Millisecond), dirty, electedAt.Round(time.Millisecond), (electedAt - readyIn).Round(time.Millisecond), clean)

	// The controller ticks every HeartbeatInterval/2: once B is back and
	// unfenced (ready), the election is a tick and one raft commit away.
	if d := electedAt - readyIn; d > 5*time.Second {
		t.Fatalf("unclean election took %v after node %d was ready", d, b)
	}

	// The controller (whichever node it is now) said so loudly.
	var line string
	for _, n := range c.Nodes {
		for _, ln := range strings.Split(n.Out.String(), "\n") {
			if strings.Contains(ln, "level=ERROR") && strings.Contains(ln, "UNCLEAN LEADER ELECTION") && strings.Contains(ln, "topic="+dirty) {
				line = ln
			}
			if strings.Contains(ln, "UNCLEAN LEADER ELECTION") && strings.Contains(ln, "topic="+clean) {
				t.Fatalf("unclean election logged for %s: %s", clean, ln)
			}
		}
	}
	if line == "" {
		t.Fatal("no ERROR line for the unclean election in any broker log")
	}
	t.Log(line)
	// The new leader takes writes, and its log holds only what B had: the
	// records acknowledged by A alone are gone (the price of unclean).
	produce(dirty, 1, "after")
	var end int64 = -1
	harness.EventuallyEvery(t, 100*time.Millisecond, 10*time.Second, fmt.Sprintf("%s end offset %d on the unclean leader (%d in-sync records + 1)", dirty, inSync+1, inSync), func() (bool, string) {
		if ends, err := adm.ListEndOffsets(ctx, dirty); err == nil {
			if e, ok := ends.Lookup(dirty, 0); ok && e.Err == nil {
				end = e.Offset
			}
		}
		return end == inSync+1, fmt.Sprintf("end offset %d", end)
	})
	fmt.Printf("unclean-election: elected_after_restart_ms=%d elected_after_ready_ms=%d acked_lost=%d\n",
		electedAt.Milliseconds(), (electedAt - readyIn).Milliseconds(), onlyA)
}

// TestShutdownDrainsConnections checks the graceful part of SIGTERM on the
// Kafka listener: new connections are refused, while connections already
// open keep getting answers (including one whose first request arrives
// after the drain began, which franz-go would otherwise treat as a missing
// SASL setup and not retry) and are closed cleanly once quiet.
func TestShutdownDrainsConnections(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test")
	}
	b := harness.StartBroker(t, t.TempDir())
	busy, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fresh, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	busy.SetDeadline(time.Now().Add(20 * time.Second))
	fresh.SetDeadline(time.Now().Add(20 * time.Second))

	// The busy connection asks every 10 ms (well inside the 100 ms quiet
	// period) until the listener refuses new dials, then a few more times.
	var corr int32
	roundTrip := func(c net.Conn) {
		t.Helper()
		corr++
		if _, err := c.Write(harness.APIVersionsV0(corr)); err != nil {
			t.Fatalf("request %d: %v", corr, err)
		}
		got, err := harness.ReadCorrelation(c)
		if err != nil || got != corr {
			t.Fatalf("request %d: response %d, %v\n%s", corr, got, err, b.Out.String())
		}
	}
	roundTrip(busy)
	if err := b.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	refusedAt := time.Time{}
	for deadline := time.Now().Add(10 * time.Second); refusedAt.IsZero(); {
		if time.Now().After(deadline) {
			t.Fatalf("new connections still accepted 10s after SIGTERM\n%s", b.Out.String())
		}
		if c, err := net.DialTimeout("tcp", b.Addr, time.Second); err != nil {
			refusedAt = time.Now()
		} else {
			c.Close()
		}
		if refusedAt.IsZero() {
			roundTrip(busy)
			<-pace.C
		}
	}
	// The connection that had sent nothing yet: its first request, sent
	// after the drain began, is answered.
	roundTrip(fresh)
	for range 3 {
		roundTrip(busy)
		<-pace.C
	}
	// Once quiet, both are closed with a clean EOF (nothing half sent).
	for name, c := range map[string]net.Conn{"busy": busy, "fresh": fresh} {
		if _, err := harness.ReadCorrelation(c); !errors.Is(err, io.EOF) {
			t.Fatalf("%s connection after the drain: %v, want EOF", name, err)
		}
	}
	t.Logf("SIGTERM: %d requests answered on a busy connection; dials refused, connections closed once quiet", corr)
	<-b.Exited()
	if b.ExitErr() != nil {
		t.Fatalf("exit: %v\n%s", b.ExitErr(), b.Out.String())
	}
}
