package admin

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scaleLoad writes unique values with acks=all from producers that each
// own a set of partitions and send one record at a time, paced, so every
// producer's acknowledged records must appear in seq order per partition,
// each exactly once (the producer is idempotent).
type scaleLoad struct {
	harness.FailoverLoad
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
		l.Wg.Add(1)
		go func() {
			defer l.Wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for seq := 0; !l.Stopped.Load() && seq < 1_000_000; seq++ {
				p := int32(id + (seq%(partitions/producers))*producers)
				v := harness.FailoverValue(id, seq)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr()
				cancel()
				now := time.Now()
				l.Mu.Lock()
				if err != nil {
					l.Failed.Add(1)
					if len(l.errs) < 10 {
						l.errs = append(l.errs, fmt.Errorf("producer %d seq %d partition %d: %w", id, seq, p, err))
					}
				} else {
					l.Acked[v] = harness.AckedRecord{Producer: id, Seq: seq, Partition: p}
					l.Lats = append(l.Lats, harness.AckLatency{At: now, D: now.Sub(t0)})
				}
				l.Mu.Unlock()
				<-tick.C
			}
		}()
	}
}

// waitLoad waits until every partition has d's worth of acknowledged
// records more than now at the load's pace (one record per partition
// every perPartition): at least d of load everywhere, longer where
// acknowledgements fall behind.
func (l *scaleLoad) waitLoad(t *testing.T, partitions int, perPartition, d time.Duration, what string) {
	t.Helper()
	n := int((d + perPartition - 1) / perPartition)
	base := l.AckedByPartition()
	harness.WaitAcks(t, &l.FailoverLoad, d+30*time.Second, what, func(a map[int32]int) bool {
		for p := range int32(partitions) {
			if a[p] < base[p]+n {
				return false
			}
		}
		return true
	})
}

// p99Between is the 99th percentile of the acknowledgement latencies of
// records acknowledged in [from, to), and how many there were.
func (l *scaleLoad) p99Between(from, to time.Time) (time.Duration, int) {
	l.Mu.Lock()
	var ds []time.Duration
	for _, a := range l.Lats {
		if !a.At.Before(from) && a.At.Before(to) {
			ds = append(ds, a.D)
		}
	}
	l.Mu.Unlock()
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
	t.Parallel()
	const topic, partitions, producers = "scale", 64, 16
	c := harness.StartCluster(t, 3)
	adm := kadm.NewClient(c.Node(2).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	harness.CreateRF3Topic(t, adm, topic, partitions)
	every := 20 * time.Millisecond
	if s := os.Getenv("RINGLOG_SCALE_PRODUCER_EVERY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		every = d
	}
	load := &scaleLoad{FailoverLoad: harness.FailoverLoad{Acked: map[string]harness.AckedRecord{}}}
	load.run(t, c.Addrs(), topic, partitions, producers, every)
	stopLoad := sync.OnceFunc(func() { load.Stopped.Store(true); load.Wg.Wait() })
	t.Cleanup(stopLoad)
	harness.WaitAcks(t, &load.FailoverLoad, 30*time.Second, "load running on every partition", func(a map[int32]int) bool {
		for p := range int32(partitions) {
			if a[p] < 3 {
				return false
			}
		}
		return true
	})
	// Each producer writes its partitions in turn, one record per tick.
	perPartition := every * partitions / producers
	preStart := time.Now()
	load.waitLoad(t, partitions, perPartition, 4*time.Second, "4 s of load before the scale-out")
	boot := c.Node(2).Addr

	// A 4th broker joins and the rebalance moves about a quarter of the
	// replicas onto it, then balances the preferred leaders.
	addBroker(t, c, 4)
	moveStart := time.Now()
	out := harness.MustAdmin(t, "rebalance", "--bootstrap", boot, "--throttle", "20000000", "--wait", "--timeout", "2m")
	moveEnd := time.Now()
	t.Logf("rebalance (%v):\n%s", moveEnd.Sub(moveStart).Round(time.Millisecond), out)
	m := harness.WaitMetadata(t, adm, 30*time.Second, "every broker leading and holding about a quarter", balanced(topic, partitions, 3, []int32{1, 2, 3, 4}, 2))
	t.Logf("after rebalance: leaders %v replicas %v", leaderCounts(m, topic), replicaCounts(m, topic))

	// Broker 1 leaves under the same load.
	load.waitLoad(t, partitions, perPartition, 2*time.Second, "2 s of load after the rebalance")
	decStart := time.Now()
	out = harness.MustAdmin(t, "decommission", "--bootstrap", boot, "--broker", "1", "--throttle", "20000000", "--wait", "--timeout", "2m")
	decEnd := time.Now()
	t.Logf("decommission (%v):\n%s", decEnd.Sub(decStart).Round(time.Millisecond), out)
	m = harness.WaitMetadata(t, adm, 30*time.Second, "broker 1 empty, the rest balanced", balanced(topic, partitions, 3, []int32{2, 3, 4}, 2))
	t.Logf("after decommission: leaders %v replicas %v", leaderCounts(m, topic), replicaCounts(m, topic))
	load.waitLoad(t, partitions, perPartition, 2*time.Second, "2 s of load after the decommission")
	stopLoad()

	if n := load.Failed.Load(); n != 0 {
		t.Errorf("producers saw %d errors: %v", n, load.errs)
	}
	res := harness.CheckNoLoss(t, c, adm, &load.FailoverLoad, topic, partitions)
	if res.Duplicated != 0 {
		t.Errorf("checker: %+v", res)
	}
	pre, npre := load.p99Between(preStart, moveStart)
	mv, nmv := load.p99Between(moveStart, moveEnd)
	dc, ndc := load.p99Between(decStart, decEnd)
	t.Logf("checker %+v; ack p99: before %v (%d acks), rebalance %v (%d), decommission %v (%d)", res, pre, npre, mv, nmv, dc, ndc)

	// Stopped, broker 1 can be unregistered and leaves Metadata.
	c.Node(1).Stop()
	harness.MustAdmin(t, "unregister", "--bootstrap", boot, "--broker", "1")
	harness.WaitMetadata(t, adm, 20*time.Second, "broker 1 gone from Metadata", func(m kadm.Metadata) bool {
		for _, b := range m.Brokers {
			if b.NodeID == 1 {
				return false
			}
		}
		return true
	})
}
