package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Failover under load with a checker (Jepsen-style, see shared NOTES):
// franz-go producers write unique values with acks=all to an RF=3 topic
// (min.insync.replicas=2) on a 5-node cluster while the leader of
// partition 0 is killed with SIGKILL and restarted, and a follower is
// SIGSTOPped past replica.lag.time.max and resumed. Afterwards everything
// is read back and checkFailover checks: no acknowledged record lost, no
// acknowledged record twice, each producer's acknowledged records in
// order, and every replica's log byte-identical.
//
// RINGLOG_CHAOS_ROUNDS (default 1) repeats the fault schedule; `make
// chaos` sets it and prints the counts line.

const failoverLag = 2 * time.Second

// ackedRecord is one acknowledged produce.
type ackedRecord struct {
	producer  int
	seq       int
	partition int32
}

type failoverLoad struct {
	mu      sync.Mutex
	acked   map[string]ackedRecord // value -> who
	lats    []ackLatency           // every acknowledged produce's latency
	failed  atomic.Int64
	stopped atomic.Bool
	wg      sync.WaitGroup
}

func failoverValue(producer, seq int) string { return fmt.Sprintf("p%02d-%08d", producer, seq) }

func parseFailoverValue(v string) (producer, seq int, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(v, "p"), "-")
	if !found {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(a)
	s, err2 := strconv.Atoi(b)
	return p, s, err1 == nil && err2 == nil
}

// run starts one producer per (partition, k): each sends one record at a
// time, so its acknowledged records must appear in the log in seq order.
func (l *failoverLoad) run(t *testing.T, seeds []string, topic string, partitions, perPartition int) {
	for p := range partitions {
		for k := range perPartition {
			id := p*perPartition + k
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				// Bounded: a failed record is abandoned, never retried
				// after the producer moved on.
				kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(4*time.Second),
				kgo.ProduceRequestTimeout(3*time.Second),
				kgo.MetadataMinAge(100*time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
			if err != nil {
				t.Fatal(err)
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer cl.Close()
				for seq := 0; !l.stopped.Load() && seq < 1_000_000; seq++ {
					v := failoverValue(id, seq)
					ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
					t0 := time.Now()
					err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}).FirstErr()
					cancel()
					if err != nil {
						l.failed.Add(1)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					now := time.Now()
					l.mu.Lock()
					l.acked[v] = ackedRecord{producer: id, seq: seq, partition: int32(p)}
					l.lats = append(l.lats, ackLatency{at: now, d: now.Sub(t0)})
					l.mu.Unlock()
				}
			}()
		}
	}
}

// ackLatency is when a produce was acknowledged and how long it took.
type ackLatency struct {
	at time.Time
	d  time.Duration
}

// failoverResult are the checker's counts.
type failoverResult struct {
	Acked, Lost, Duplicated, Reordered, Unacked int
}

// checkFailover compares what was acknowledged with the logs read back
// (values in log order per partition).
func checkFailover(acked map[string]ackedRecord, logs map[int32][]string) (failoverResult, []string) {
	var res failoverResult
	var problems []string
	note := func(f string, a ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(f, a...))
		}
	}
	res.Acked = len(acked)
	seen := map[string]int{}
	for p, vals := range logs {
		lastSeq := map[int]int{}
		for i, v := range vals {
			seen[v]++
			a, ok := acked[v]
			if !ok {
				res.Unacked++ // failed or timed out, yet written: allowed
				continue
			}
			if a.partition != p {
				note("%s acknowledged on partition %d found on %d", v, a.partition, p)
			}
			if seen[v] > 1 {
				continue
			}
			if last, ok := lastSeq[a.producer]; ok && a.seq < last {
				res.Reordered++
				note("partition %d offset-order %d: %s after seq %d", p, i, v, last)
			}
			lastSeq[a.producer] = a.seq
		}
	}
	for v := range acked {
		switch n := seen[v]; {
		case n == 0:
			res.Lost++
			note("acknowledged %s (partition %d) lost", v, acked[v].partition)
		case n > 1:
			res.Duplicated++
			note("acknowledged %s appears %d times", v, n)
		}
	}
	return res, problems
}

func TestCheckFailoverDetects(t *testing.T) {
	acked := map[string]ackedRecord{
		"a": {0, 0, 0}, "b": {0, 1, 0}, "c": {0, 2, 0}, "d": {1, 0, 1},
	}
	res, _ := checkFailover(acked, map[int32][]string{0: {"b", "a", "c", "c", "x"}, 1: {}})
	want := failoverResult{Acked: 4, Lost: 1, Duplicated: 1, Reordered: 1, Unacked: 1}
	if res != want {
		t.Fatalf("got %+v want %+v", res, want)
	}
	if res, p := checkFailover(acked, map[int32][]string{0: {"a", "b", "c"}, 1: {"d"}}); res.Lost+res.Duplicated+res.Reordered != 0 || len(p) != 0 {
		t.Fatalf("clean history flagged: %+v %v", res, p)
	}
}

func TestFailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	rounds := envRepeats(t, "RINGLOG_CHAOS_ROUNDS")
	c := startReplCluster(t, 5, "--replica-lag-time-max", failoverLag.String())
	adm := kadm.NewClient(c.node(1).client(t, kgo.SeedBrokers(c.addrs()...)))
	const topic, partitions = "chaos", 3
	createRF3Topic(t, adm, topic, partitions)
	allISR := fullISR(topic, partitions)

	load := &failoverLoad{acked: map[string]ackedRecord{}}
	load.run(t, c.addrs(), topic, partitions, 2)
	stopLoad := sync.OnceFunc(func() { load.stopped.Store(true); load.wg.Wait() })
	t.Cleanup(stopLoad)

	faults := 0
	time.Sleep(time.Second)
	for round := range rounds {
		for k := range 2 {
			victim := partitionLeader(t, adm, topic, partitions, 0)
			t.Logf("round %d: kill -9 node %d (leader of %s-0)", round, victim, topic)
			c.node(victim).kill9()
			faults++
			time.Sleep(time.Duration(1500+500*k) * time.Millisecond)
			c.node(victim).restart()
			waitMetadata(t, adm, 30*time.Second, "full ISRs after restart", allISR)
		}
		// A follower paused past the lag window leaves the ISR; resumed,
		// it catches up and rejoins.
		m := waitMetadata(t, adm, 30*time.Second, "full ISRs", allISR)
		p1 := m.Topics[topic].Partitions[1]
		var follower int32 = -1
		for _, r := range p1.Replicas {
			if r != p1.Leader {
				follower = r
			}
		}
		t.Logf("round %d: SIGSTOP node %d (follower of %s-1) for %v", round, follower, topic, 2*failoverLag)
		c.node(follower).cmd.Process.Signal(syscall.SIGSTOP)
		faults++
		time.Sleep(2 * failoverLag)
		c.node(follower).cmd.Process.Signal(syscall.SIGCONT)
		waitMetadata(t, adm, 30*time.Second, "full ISRs after SIGCONT", allISR)
	}
	time.Sleep(time.Second)
	stopLoad()
	if len(load.acked) == 0 {
		t.Fatal("nothing acknowledged")
	}

	// Every replica converges on the same bytes (the committed prefix is
	// the whole log once producers stop and the ISR is full).
	m := waitMetadata(t, adm, 30*time.Second, "full ISRs at the end", allISR)
	for _, p := range m.Topics[topic].Partitions {
		deadline := time.Now().Add(20 * time.Second)
		for {
			ref := segmentBytes(c.node(p.Leader), topic, p.Partition)
			same := len(ref) > 0
			for _, r := range p.Replicas {
				if !bytes.Equal(segmentBytes(c.node(r), topic, p.Partition), ref) {
					same = false
				}
			}
			if same {
				break
			}
			if time.Now().After(deadline) {
				for _, r := range p.Replicas {
					t.Logf("node %d: %d bytes", r, len(segmentBytes(c.node(r), topic, p.Partition)))
				}
				t.Fatalf("%s-%d: replicas differ 20s after the load stopped", topic, p.Partition)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	logs := readBackValues(t, c, adm, topic, partitions)
	load.mu.Lock()
	res, problems := checkFailover(load.acked, logs)
	load.mu.Unlock()
	total := 0
	for _, v := range logs {
		total += len(v)
	}
	fmt.Printf("chaos: rounds=%d faults=%d acknowledged=%d failed=%d in_log=%d lost=%d duplicated=%d reordered=%d\n",
		rounds, faults, res.Acked, load.failed.Load(), total, res.Lost, res.Duplicated, res.Reordered)
	for _, p := range problems {
		t.Error(p)
	}
	if res.Lost+res.Duplicated+res.Reordered > 0 {
		t.Fatal(errors.New("checker found anomalies"))
	}
}

// readBackValues reads every partition of topic from the start up to its
// end offset now and returns the values in log order per partition.
func readBackValues(t *testing.T, c *testCluster, adm *kadm.Client, topic string, partitions int) map[int32][]string {
	t.Helper()
	ends := listedEnds(t, adm, topic)
	cons := c.node(1).client(t, kgo.SeedBrokers(c.addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	logs := map[int32][]string{}
	next := map[int32]int64{}
	ctx := testContext(t, 60*time.Second)
	done := func() bool {
		for p := range int32(partitions) {
			e, _ := ends.Lookup(topic, p)
			if next[p] < e.Offset {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: stuck at %v of %v", next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			logs[r.Partition] = append(logs[r.Partition], string(r.Value))
			next[r.Partition] = r.Offset + 1
		})
	}
	return logs
}
