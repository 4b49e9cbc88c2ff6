package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	hwSessionTimeout = 10 * time.Second
	hwReplicaLag     = 20 * time.Second
)

// TestRestartedLeaderHW restarts leaders that hold records nobody else
// has, with real processes (engine/replica.go has the engine-level test of
// the high-watermark checkpoint).
//
// Phase A (KIP-101): the leader of an RF=3 partition appends records while
// both followers are paused (acks=1 writes, and an acks=all write that must
// not be acknowledged), then is killed with SIGKILL. The high-watermark
// checkpoint it wrote with those records on disk must hold the
// acknowledged end, not its log end. A follower takes over and
// acknowledges more writes; the old leader restarts and must come back as a
// follower, truncate its suffix by leader epoch (exactly where the new
// leader's OffsetForLeaderEpoch says the old epoch ends, never below the
// acknowledged end) and end byte-identical with the others.
//
// Phase B (a whole-cluster crash): the same kind of suffix is made on the
// new leader, then all three brokers are killed. The old leader and one
// follower restart first, the other follower last: registering anew takes
// a broker out of the ISR, so the last one, the only in-sync replica left,
// leads, and the suffix must vanish. From before the first restart, probes
// fetch (read_uncommitted) at the acknowledged end from every broker as
// soon as it listens: no broker may serve a record or report a high
// watermark beyond what was acknowledged, in particular not the restarted
// old leader, whose log holds the suffix above its checkpointed HW.
// (ringlog's controller already keeps it from leading; were it to lead,
// the checkpointed HW is what would keep the suffix hidden until a
// follower holds it.)
//
// Every acknowledged record survives both phases (checkFailover).
func TestRestartedLeaderHW(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	// A long session: a leader whose followers are paused (and with them
	// the controller quorum) keeps serving for a while, long enough to
	// append its suffix even on a loaded machine. A long lag window: a
	// leader that sees its paused followers lag asks to shrink the ISR to
	// itself, and the paused controller would apply that on resuming,
	// after the leader was killed, leaving the partition without an
	// electable replica (as Kafka before KIP-966 would).
	c := harness.StartReplCluster(t, 3, "--broker-session-timeout", hwSessionTimeout.String(),
		"--replica-lag-time-max", hwReplicaLag.String())
	harness.LogTailsOnFailure(t, c)
	const topic, part = "hwr", int32(0)
	harness.CreateAssigned(t, c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)), topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequestTimeoutOverhead(time.Second)))
	partition := func(m kadm.Metadata) (kadm.PartitionDetail, bool) {
		td, ok := m.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != 1 {
			return kadm.PartitionDetail{}, false
		}
		return td.Partitions[part], true
	}
	// fullISR waits for every replica in sync under a live leader.
	fullISR := func(what string) kadm.PartitionDetail {
		t.Helper()
		m := harness.WaitMetadata(t, adm, 60*time.Second, what, func(m kadm.Metadata) bool {
			p, ok := partition(m)
			return ok && p.Leader >= 0 && len(p.ISR) == 3
		})
		p, _ := partition(m)
		return p
	}
	fullISR("full ISR")

	acked := map[string]harness.AckedRecord{}
	producer := 0
	// produceAcked gets n more acks=all writes acknowledged by whichever
	// broker leads, one at a time; a failed attempt moves on to the next
	// value (it may still be in the log, unacknowledged, which the checker
	// allows), so no value is ever sent twice.
	produceAcked := func(n int) {
		t.Helper()
		cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0),
			kgo.RequestTimeoutOverhead(time.Second), kgo.ProduceRequestTimeout(3*time.Second),
			kgo.RecordDeliveryTimeout(5*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
		defer cl.Close()
		deadline := time.Now().Add(60 * time.Second)
		got := 0
		for seq := 0; got < n; seq++ {
			if time.Now().After(deadline) {
				t.Fatalf("producer %d: %d of %d writes acknowledged in 60s", producer, got, n)
			}
			v := harness.FailoverValue(producer, seq)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				t.Logf("producer %d seq %d: %v", producer, seq, err)
				// Backs off from a leader that fails at once (moving,
				// fenced) instead of spinning on it.
				time.Sleep(100 * time.Millisecond)
				continue
			}
			acked[v] = harness.AckedRecord{Producer: producer, Seq: seq, Partition: part}
			got++
		}
		producer++
	}
	// endOffset is the partition's end as its leader reports it to
	// consumers (the high watermark).
	endOffset := func() int64 {
		t.Helper()
		e, ok := harness.ListedEnds(t, adm, topic).Lookup(topic, part)
		if !ok || e.Err != nil {
			t.Fatalf("end offset of %s-%d: %+v", topic, part, e)
		}
		return e.Offset
	}
	// suffix pauses both followers of leader and has it append records
	// nobody else gets: acks=1 writes (acknowledged by the leader alone)
	// and one acks=all write, which must not be acknowledged. What was
	// appended is read from the log afterwards. It returns the identity
	// of the checkpoint file as it is then, so that its next rewrite can
	// be waited for.
	suffix := func(leader int32, tag string) (checkpoint uint64) {
		t.Helper()
		// One client per acks setting (franz-go sets a raw Produce's acks
		// from its client), both connected before the pause.
		one := c.Node(leader).Client(t, kgo.SeedBrokers(c.Node(leader).Addr),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()).SeedBrokers()[0]
		all := c.Node(leader).Client(t, kgo.SeedBrokers(c.Node(leader).Addr)).SeedBrokers()[0]
		for _, b := range []*kgo.Broker{one, all} {
			if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(harness.Context(t, 10*time.Second), b); err != nil {
				t.Fatalf("phase %s: node %d: %v", tag, leader, err)
			}
		}
		for _, b := range c.Nodes {
			if b != c.Node(leader) {
				b.Pause()
			}
		}
		answers := map[string]int{}
		for i := range 3 {
			code, err := harness.RawProduceN(one, topic, part, 1, 5*time.Second, 5, fmt.Sprintf("s-%s-%d", tag, i))
			answers[harness.AnswerName(code, err)]++
		}
		code, err := harness.RawProduce(all, topic, part, -1, 1500*time.Millisecond, "x-"+tag)
		if err == nil && code == 0 {
			t.Errorf("phase %s: node %d acknowledged an acks=all write with both followers paused", tag, leader)
		}
		t.Logf("phase %s: node %d with its followers paused: 3 acks=1 writes of 5 records answered %v, the acks=all write %s", tag, leader, answers, harness.AnswerName(code, err))
		return checkpointInode(c.Node(leader))
	}

	// Phase A.
	produceAcked(100)
	committedA := endOffset()
	oldLeader := leaderNotController(t, c, fullISR)
	paused := time.Now()
	ino := suffix(oldLeader, "a")
	waitCheckpointWrite(t, c.Node(oldLeader), ino)
	c.Node(oldLeader).Kill9()
	preLog := harness.SegmentBytes(c.Node(oldLeader), topic, part)
	preBatches := parseBatches(preLog)
	if len(preBatches) == 0 || preBatches[len(preBatches)-1].last+1 <= committedA {
		t.Fatalf("phase a: killed leader's log ends at %v, no suffix above the acknowledged end %d", preBatches, committedA)
	}
	preEnd := preBatches[len(preBatches)-1].last + 1
	appendedA := preEnd - committedA
	if hw, ok := readHWCheckpoint(c.Node(oldLeader).DataDir, topic, part); !ok || hw != committedA {
		t.Fatalf("phase a: killed leader checkpointed high watermark %d (found %v), want the acknowledged end %d (log end %d)", hw, ok, committedA, preEnd)
	}
	for _, b := range c.Nodes {
		if b != c.Node(oldLeader) {
			b.Resume()
		}
	}
	// Paused longer than the session timeout, the controller (one of the
	// followers) would fence every broker on resuming, the live ones too.
	t.Logf("phase a: followers paused for %v (session timeout %v)", time.Since(paused).Round(time.Millisecond), hwSessionTimeout)
	// A follower takes over (the controller fences the killed leader) and
	// acknowledges more writes.
	m := harness.WaitMetadata(t, adm, 60*time.Second, "a new leader with an ISR of two", func(m kadm.Metadata) bool {
		p, ok := partition(m)
		return ok && p.Leader >= 0 && p.Leader != oldLeader && len(p.ISR) == 2 && !slices.Contains(p.ISR, oldLeader)
	})
	newp, _ := partition(m)
	newLeader := newp.Leader
	produceAcked(100)
	restarted := time.Now()
	c.Node(oldLeader).Restart()
	ready := time.Since(restarted)
	p := fullISR("restarted old leader back in the ISR")
	rejoinA := time.Since(restarted)
	if p.Leader == oldLeader {
		t.Errorf("phase a: restarted node %d leads again (epoch %d); it should have come back as a follower of %d", oldLeader, p.LeaderEpoch, newLeader)
	}
	harness.WaitIdentical(t, c, topic, 1, 20*time.Second)
	final := harness.SegmentBytes(c.Node(oldLeader), topic, part)
	// Where the old leader's log and the final one part ways: at a batch
	// boundary at or above the acknowledged end, and exactly where the
	// new leader says the old leader's last epoch ends.
	div := 0
	for _, b := range preBatches {
		if b.end > len(final) || !bytes.Equal(preLog[b.pos:b.end], final[b.pos:b.end]) {
			break
		}
		div++
	}
	if div == len(preBatches) {
		t.Fatalf("phase a: the old leader's log (%d batches, end %d) is a prefix of the final log: no suffix was truncated", len(preBatches), preEnd)
	}
	divOffset := preBatches[div].base
	oldEpoch := preBatches[len(preBatches)-1].epoch
	if divOffset < committedA {
		t.Errorf("phase a: the old leader's log was cut at offset %d, below the acknowledged end %d", divOffset, committedA)
	}
	epochEnd := harness.OffsetForLeaderEpoch(t, c.Node(p.Leader), topic, part, oldEpoch)
	if epochEnd != divOffset {
		t.Errorf("phase a: the leader says epoch %d ends at %d, the old leader's log diverged at %d", oldEpoch, epochEnd, divOffset)
	}
	for _, b := range parseBatches(final) {
		if b.base >= divOffset && b.epoch <= oldEpoch {
			t.Errorf("phase a: final log batch at %d has epoch %d, not above the old leader's %d", b.base, b.epoch, oldEpoch)
		}
	}
	t.Logf("phase a: node %d killed with log end %d, checkpointed HW %d = acknowledged end; node %d led; restarted, node %d truncated at %d (= end of epoch %d) and rejoined the ISR %v after its restart (ready after %v)",
		oldLeader, preEnd, committedA, newLeader, oldLeader, divOffset, oldEpoch, rejoinA.Round(time.Millisecond), ready.Round(time.Millisecond))

	// Phase B.
	produceAcked(100)
	committedB := endOffset()
	leaderB := leaderNotController(t, c, fullISR)
	pausedB := time.Now()
	ino = suffix(leaderB, "b")
	waitCheckpointWrite(t, c.Node(leaderB), ino)
	c.Node(leaderB).Kill9()
	for _, b := range c.Nodes {
		if b != c.Node(leaderB) {
			b.Kill9()
		}
	}
	t.Logf("phase b: followers paused for %v before the kill", time.Since(pausedB).Round(time.Millisecond))
	preLogB := harness.SegmentBytes(c.Node(leaderB), topic, part)
	preEndB := int64(0)
	if bs := parseBatches(preLogB); len(bs) > 0 {
		preEndB = bs[len(bs)-1].last + 1
	}
	appendedB := preEndB - committedB
	if preEndB <= committedB {
		t.Fatalf("phase b: killed leader's log ends at %d, no suffix above the acknowledged end %d", preEndB, committedB)
	}
	if hw, ok := readHWCheckpoint(c.Node(leaderB).DataDir, topic, part); !ok || hw != committedB {
		t.Fatalf("phase b: killed leader checkpointed high watermark %d (found %v), want the acknowledged end %d (log end %d)", hw, ok, committedB, preEndB)
	}
	var last int32 // restarted last: a follower, the ISR's last member
	for id := int32(1); id <= 3; id++ {
		if id != leaderB {
			last = id
		}
	}
	probes := startHWProbes(t, c, topic, part, committedB)
	var first []*harness.BrokerProc
	var firstIDs []int32
	for id := int32(1); id <= 3; id++ {
		if id != last {
			first = append(first, c.Node(id))
			firstIDs = append(firstIDs, id)
		}
	}
	for _, b := range first {
		b.Launch()
	}
	for _, b := range first {
		b.WaitReady(60 * time.Second)
	}
	// Both restarted brokers registered anew, which took them out of the
	// ISR: the partition waits for its last in-sync replica.
	harness.WaitMetadata(t, adm, 30*time.Second, "ISR down to the broker still down", func(m kadm.Metadata) bool {
		p, ok := partition(m)
		return ok && slices.Equal(p.ISR, []int32{last}) && (p.Leader == last || p.Leader < 0)
	})
	// The probes keep asking the restarted brokers, the old leader with
	// its unacknowledged suffix among them, before the last one is back.
	probes.waitAnswers(t, 100, firstIDs...)
	c.Node(last).Restart()
	p = fullISR("every replica back in the ISR after the cluster restart")
	if p.Leader != last {
		t.Errorf("phase b: node %d leads after the restart, want node %d (the only in-sync replica left)", p.Leader, last)
	}
	probes.stop()
	harness.WaitIdentical(t, c, topic, 1, 20*time.Second)
	if end := endOffset(); end != committedB {
		t.Errorf("phase b: end offset %d after the restart, want the acknowledged end %d (the suffix up to %d was never acknowledged)", end, committedB, preEndB)
	}
	for _, ph := range probes.phantoms() {
		t.Error(ph)
	}
	t.Logf("phase b: node %d killed with log end %d, checkpointed HW %d = acknowledged end; all killed, restarted; node %d leads; probes: %s",
		leaderB, preEndB, committedB, last, probes.summary())

	logs := harness.ReadBack(t, c, topic, 1)
	res, problems := harness.CheckFailover(acked, harness.RecordValues(logs))
	fmt.Printf("hwrestart: acknowledged=%d in_log=%d lost=%d duplicated=%d reordered=%d suffix_a=%d truncated_at=%d (acked end %d, log end %d) suffix_b=%d probes=%d phantom=%d rejoin_ms=%d\n",
		res.Acked, len(logs[part]), res.Lost, res.Duplicated, res.Reordered, appendedA, divOffset, committedA, preEnd,
		appendedB, probes.answered(), len(probes.phantoms()), rejoinA.Milliseconds())
	for _, p := range problems {
		t.Error(p)
	}
	if res.Lost+res.Duplicated+res.Reordered > 0 {
		t.Fatal("checker found anomalies")
	}
}

// leaderNotController returns the partition's leader after making sure it
// is not the active controller: with its followers paused the controller
// quorum is gone, and a controller that loses its quorum stops serving at
// once, while any other broker keeps serving for its session. The
// controller is moved by pausing it for less than the session timeout
// (so it keeps its partitions) until another node takes over.
func leaderNotController(t *testing.T, c *harness.Cluster, fullISR func(string) kadm.PartitionDetail) int32 {
	t.Helper()
	for range 3 {
		leader := fullISR("full ISR").Leader
		ctrl := c.Controller(30 * time.Second)
		if ctrl != leader {
			return leader
		}
		b := c.Node(leader)
		b.Pause()
		next := c.Controller(20*time.Second, leader)
		b.Resume()
		b.WaitHealth(20*time.Second, fmt.Sprintf("node %d active under controller %d after a pause to move the controller", leader, next), func(h map[string]any) bool {
			return harness.Active(h) && h["controller_id"] == float64(next)
		})
		t.Logf("controller moved off node %d (leader of the partition) to node %d", leader, next)
	}
	t.Fatal("the partition leader stays the controller")
	return -1
}

// logBatch is one record batch in a segment file.
type logBatch struct {
	base, last int64
	epoch      int32
	pos, end   int // byte range in the file
}

// parseBatches splits a segment file (record batches back to back, as on
// the wire) into batches; a torn tail is ignored.
func parseBatches(b []byte) []logBatch {
	var out []logBatch
	for pos := 0; pos+27 <= len(b); {
		size := int(binary.BigEndian.Uint32(b[pos+8:])) + 12
		if size < 27 || pos+size > len(b) {
			break
		}
		base := int64(binary.BigEndian.Uint64(b[pos:]))
		out = append(out, logBatch{
			base:  base,
			last:  base + int64(int32(binary.BigEndian.Uint32(b[pos+23:]))),
			epoch: int32(binary.BigEndian.Uint32(b[pos+12:])),
			pos:   pos, end: pos + size,
		})
		pos += size
	}
	return out
}

// readHWCheckpoint reads topic-p's high watermark from a data dir's
// replication-offset-checkpoint (Kafka's format: version, count, then
// "topic partition offset" lines).
func readHWCheckpoint(dataDir, topic string, p int32) (int64, bool) {
	f, err := os.Open(filepath.Join(dataDir, "replication-offset-checkpoint"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 3 && fs[0] == topic && fs[1] == strconv.Itoa(int(p)) {
			hw, err := strconv.ParseInt(fs[2], 10, 64)
			return hw, err == nil
		}
	}
	return 0, false
}

// checkpointInode identifies the current high-watermark checkpoint file
// of b (each write replaces it: written aside, then renamed).
func checkpointInode(b *harness.BrokerProc) uint64 {
	st, err := os.Stat(filepath.Join(b.DataDir, "replication-offset-checkpoint"))
	if err != nil {
		return 0
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// waitCheckpointWrite waits until b has replaced its high-watermark
// checkpoint file since it was the one with inode ino (it writes it every
// few seconds), so the file read after a kill was written with the suffix
// on disk.
func waitCheckpointWrite(t *testing.T, b *harness.BrokerProc, ino uint64) {
	t.Helper()
	harness.EventuallyEvery(t, 20*time.Millisecond, 20*time.Second, b.DataDir+": high watermark checkpoint rewritten", func() (bool, string) {
		return checkpointInode(b) != ino, fmt.Sprintf("inode still %d", ino)
	})
}

// hwProbes fetch topic-p at the acknowledged end from every broker in a
// loop, the way a read_uncommitted consumer would, and note any record or
// high watermark above it.
type hwProbes struct {
	stopped  atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	answers  map[int32]map[string]int
	bad      []string
	reported atomic.Bool
	start    time.Time
}

func startHWProbes(t *testing.T, c *harness.Cluster, topic string, p int32, acked int64) *hwProbes {
	pr := &hwProbes{answers: map[int32]map[string]int{}, start: time.Now()}
	for i, b := range c.Nodes {
		id := int32(i + 1)
		pr.answers[id] = map[string]int{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		pr.wg.Add(1)
		go func() {
			defer pr.wg.Done()
			defer cl.Close()
			tick := time.NewTicker(10 * time.Millisecond) // a probe every 10 ms
			defer tick.Stop()
			for n := 0; !pr.stopped.Load() && n < 100_000; n++ {
				pr.probe(cl.SeedBrokers()[0], id, topic, p, acked)
				<-tick.C
			}
		}()
	}
	// Whatever else fails first, what the probes saw is reported.
	t.Cleanup(func() {
		pr.stop()
		if !pr.reported.Load() {
			for _, ph := range pr.phantoms() {
				t.Error(ph)
			}
		}
	})
	return pr
}

func (pr *hwProbes) probe(b *kgo.Broker, id int32, topic string, p int32, acked int64) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 0, 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, acked, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	resp, err := req.RequestWith(ctx, b)
	cancel()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err != nil {
		pr.answers[id]["no answer"]++
		return
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		pr.answers[id]["malformed"]++
		return
	}
	rpr := resp.Topics[0].Partitions[0]
	pr.answers[id][harness.ErrName(rpr.ErrorCode)]++
	if rpr.ErrorCode != 0 {
		return
	}
	if rpr.HighWatermark > acked && len(pr.bad) < 20 {
		pr.bad = append(pr.bad, fmt.Sprintf("node %d reported high watermark %d, above the acknowledged end %d (%v into the restarts)", id, rpr.HighWatermark, acked, time.Since(pr.start).Round(time.Millisecond)))
	}
	for _, bt := range parseBatches(rpr.RecordBatches) {
		if bt.last >= acked && len(pr.bad) < 20 {
			pr.bad = append(pr.bad, fmt.Sprintf("node %d served offsets %d-%d (epoch %d), at or above the acknowledged end %d (%v into the restarts)", id, bt.base, bt.last, bt.epoch, acked, time.Since(pr.start).Round(time.Millisecond)))
		}
	}
}

func (pr *hwProbes) stop() {
	pr.stopped.Store(true)
	pr.wg.Wait()
}

// phantoms lists what the probes saw beyond the acknowledged end.
func (pr *hwProbes) phantoms() []string {
	pr.reported.Store(true)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.bad)
}

// answered counts the probes some broker answered.
func (pr *hwProbes) answered() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	n := 0
	for id := range pr.answers {
		n += pr.answeredByLocked(id)
	}
	return n
}

// answeredByLocked counts the probes broker id answered; pr.mu is held.
func (pr *hwProbes) answeredByLocked(id int32) int {
	n := 0
	for k, v := range pr.answers[id] {
		if k != "no answer" && k != "malformed" {
			n += v
		}
	}
	return n
}

// waitAnswers waits until each broker of ids has answered n more probes.
func (pr *hwProbes) waitAnswers(t *testing.T, n int, ids ...int32) {
	t.Helper()
	count := func() map[int32]int {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		out := map[int32]int{}
		for _, id := range ids {
			out[id] = pr.answeredByLocked(id)
		}
		return out
	}
	from := count()
	harness.Eventually(t, 20*time.Second, fmt.Sprintf("%d more probes answered by nodes %v", n, ids), func() (bool, string) {
		now := count()
		for _, id := range ids {
			if now[id] < from[id]+n {
				return false, fmt.Sprintf("answered %v, %v before", now, from)
			}
		}
		return true, ""
	})
}

func (pr *hwProbes) summary() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var b strings.Builder
	for id := int32(1); id <= int32(len(pr.answers)); id++ {
		fmt.Fprintf(&b, "node %d %v; ", id, pr.answers[id])
	}
	return b.String()
}
