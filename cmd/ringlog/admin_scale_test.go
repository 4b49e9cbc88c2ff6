package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The scale-out scenario with real processes: a 3-broker cluster
// under acks=all load (RF=3, min.insync.replicas=2, 64 partitions) gets a
// 4th broker; `ringlog admin rebalance` moves replicas onto it and
// balances leadership; then broker 1 is decommissioned under the same
// load and unregistered once stopped. The producers must see no error and
// the checker (checkFailover) no lost, duplicated or reordered record.
// Acknowledgement latency before and during each move is logged; the
// ratio is a benchmark (BENCHMARKS.md), not asserted here.

// scaleLoad writes unique values with acks=all from producers that each
// own a set of partitions and send one record at a time, paced, so every
// producer's acknowledged records must appear in seq order per partition,
// each exactly once (the producer is idempotent).
type scaleLoad struct {
	failoverLoad
	errs []error
}

func (l *scaleLoad) run(t *testing.T, seeds []string, topic string, partitions, producers int, every time.Duration) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		// Idempotent: a write whose acknowledgement was lost to a
		// leadership move is retried without a duplicate in the log.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// A leadership move answers NOT_LEADER_OR_FOLLOWER; the client
		// refreshes metadata and retries. Only a record that still
		// fails after this long counts as a producer error.
		kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	for id := range producers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for seq := 0; !l.stopped.Load() && seq < 1_000_000; seq++ {
				p := int32(id + (seq%(partitions/producers))*producers)
				v := failoverValue(id, seq)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr()
				cancel()
				now := time.Now()
				l.mu.Lock()
				if err != nil {
					l.failed.Add(1)
					if len(l.errs) < 10 {
						l.errs = append(l.errs, fmt.Errorf("producer %d seq %d partition %d: %w", id, seq, p, err))
					}
				} else {
					l.acked[v] = ackedRecord{producer: id, seq: seq, partition: p}
					l.lats = append(l.lats, ackLatency{at: now, d: now.Sub(t0)})
				}
				l.mu.Unlock()
				<-tick.C
			}
		}()
	}
}

// p99Between is the 99th percentile of the acknowledgement latencies of
// records acknowledged in [from, to), and how many there were.
func (l *scaleLoad) p99Between(from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	var ds []time.Duration
	for _, a := range l.lats {
		if !a.at.Before(from) && a.at.Before(to) {
			ds = append(ds, a.d)
		}
	}
	l.mu.Unlock()
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[(len(ds)*99)/100], len(ds)
}

// leaderCounts counts the partitions of topic each broker leads.
func leaderCounts(m kadm.Metadata, topic string) map[int32]int {
	out := map[int32]int{}
	for _, p := range m.Topics[topic].Partitions {
		out[p.Leader]++
	}
	return out
}

func replicaCounts(m kadm.Metadata, topic string) map[int32]int {
	out := map[int32]int{}
	for _, p := range m.Topics[topic].Partitions {
		for _, r := range p.Replicas {
			out[r]++
		}
	}
	return out
}

// balanced reports whether each of brokers leads partitions/len(brokers)
// (±tol) of topic and holds its share of replicas (±tol), with full ISRs
// and no reassignment left.
func balanced(topic string, partitions, rf int, brokers []int32, tol int) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool {
		lc, rc := leaderCounts(m, topic), replicaCounts(m, topic)
		for id := range rc {
			if !slices.Contains(brokers, id) {
				return false
			}
		}
		for _, p := range m.Topics[topic].Partitions {
			if len(p.Replicas) != rf || len(p.ISR) != rf {
				return false
			}
		}
		n := len(brokers)
		for _, b := range brokers {
			if abs(lc[b]-partitions/n) > tol || abs(rc[b]-partitions*rf/n) > tol {
				return false
			}
		}
		return true
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestAdminScaleOutUnderLoad(t *testing.T) {
	const topic, partitions, producers = "scale", 64, 16
	c := startCluster(t, 3)
	adm := kadm.NewClient(c.node(2).client(t, kgo.SeedBrokers(c.addrs()...)))
	createRF3Topic(t, adm, topic, partitions)
	every := 20 * time.Millisecond
	if s := os.Getenv("RINGLOG_SCALE_PRODUCER_EVERY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		every = d
	}
	load := &scaleLoad{failoverLoad: failoverLoad{acked: map[string]ackedRecord{}}}
	load.run(t, c.addrs(), topic, partitions, producers, every)
	stopLoad := sync.OnceFunc(func() { load.stopped.Store(true); load.wg.Wait() })
	t.Cleanup(stopLoad)
	waitAcks(t, &load.failoverLoad, 30*time.Second, "load running on every partition", func(a map[int32]int) bool {
		for p := range int32(partitions) {
			if a[p] < 3 {
				return false
			}
		}
		return true
	})
	preStart := time.Now()
	time.Sleep(4 * time.Second)
	boot := c.node(2).addr

	// A 4th broker joins and the rebalance moves about a quarter of the
	// replicas onto it, then balances the preferred leaders.
	addBroker(t, c, 4)
	moveStart := time.Now()
	out := mustAdmin(t, "rebalance", "--bootstrap", boot, "--throttle", "20000000", "--wait", "--timeout", "2m")
	moveEnd := time.Now()
	t.Logf("rebalance (%v):\n%s", moveEnd.Sub(moveStart).Round(time.Millisecond), out)
	m := waitMetadata(t, adm, 30*time.Second, "every broker leading and holding about a quarter", balanced(topic, partitions, 3, []int32{1, 2, 3, 4}, 2))
	t.Logf("after rebalance: leaders %v replicas %v", leaderCounts(m, topic), replicaCounts(m, topic))

	// Broker 1 leaves under the same load.
	time.Sleep(2 * time.Second)
	decStart := time.Now()
	out = mustAdmin(t, "decommission", "--bootstrap", boot, "--broker", "1", "--throttle", "20000000", "--wait", "--timeout", "2m")
	decEnd := time.Now()
	t.Logf("decommission (%v):\n%s", decEnd.Sub(decStart).Round(time.Millisecond), out)
	m = waitMetadata(t, adm, 30*time.Second, "broker 1 empty, the rest balanced", balanced(topic, partitions, 3, []int32{2, 3, 4}, 2))
	t.Logf("after decommission: leaders %v replicas %v", leaderCounts(m, topic), replicaCounts(m, topic))
	time.Sleep(2 * time.Second)
	stopLoad()

	if n := load.failed.Load(); n != 0 {
		t.Errorf("producers saw %d errors: %v", n, load.errs)
	}
	res := checkNoLoss(t, c, adm, &load.failoverLoad, topic, partitions)
	if res.Duplicated != 0 {
		t.Errorf("checker: %+v", res)
	}
	pre, npre := load.p99Between(preStart, moveStart)
	mv, nmv := load.p99Between(moveStart, moveEnd)
	dc, ndc := load.p99Between(decStart, decEnd)
	t.Logf("checker %+v; ack p99: before %v (%d acks), rebalance %v (%d), decommission %v (%d)", res, pre, npre, mv, nmv, dc, ndc)

	// Stopped, broker 1 can be unregistered and leaves Metadata.
	c.node(1).stop()
	mustAdmin(t, "unregister", "--bootstrap", boot, "--broker", "1")
	waitMetadata(t, adm, 20*time.Second, "broker 1 gone from Metadata", func(m kadm.Metadata) bool {
		for _, b := range m.Brokers {
			if b.NodeID == 1 {
				return false
			}
		}
		return true
	})
}
