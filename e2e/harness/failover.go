package harness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AckedRecord is one acknowledged produce.
type AckedRecord struct {
	Producer  int
	Seq       int
	Partition int32
}

type FailoverLoad struct {
	Mu      sync.Mutex
	Acked   map[string]AckedRecord // value -> who
	Lats    []AckLatency           // every acknowledged produce's latency
	Failed  atomic.Int64
	Stopped atomic.Bool
	Wg      sync.WaitGroup
}

func FailoverValue(producer, seq int) string { return fmt.Sprintf("p%02d-%08d", producer, seq) }

// Run starts one producer per (partition, k): each sends one record at a
// time, so its acknowledged records must appear in the log in seq order.
func (l *FailoverLoad) Run(t *testing.T, seeds []string, topic string, partitions, perPartition int) {
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
			l.Wg.Add(1)
			go func() {
				defer l.Wg.Done()
				defer cl.Close()
				for seq := 0; !l.Stopped.Load() && seq < 1_000_000; seq++ {
					v := FailoverValue(id, seq)
					ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
					t0 := time.Now()
					err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}).FirstErr()
					cancel()
					if err != nil {
						l.Failed.Add(1)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					now := time.Now()
					l.Mu.Lock()
					l.Acked[v] = AckedRecord{Producer: id, Seq: seq, Partition: int32(p)}
					l.Lats = append(l.Lats, AckLatency{At: now, D: now.Sub(t0)})
					l.Mu.Unlock()
				}
			}()
		}
	}
}

// AckLatency is when a produce was acknowledged and how long it took.
type AckLatency struct {
	At time.Time
	D  time.Duration
}

// FailoverResult are the checker's counts.
type FailoverResult struct {
	Acked, Lost, Duplicated, Reordered, Unacked int
}

// CheckFailover compares what was acknowledged with the logs read back
// (values in log order per partition).
func CheckFailover(acked map[string]AckedRecord, logs map[int32][]string) (FailoverResult, []string) {
	var res FailoverResult
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
			if a.Partition != p {
				note("%s acknowledged on partition %d found on %d", v, a.Partition, p)
			}
			if seen[v] > 1 {
				continue
			}
			if last, ok := lastSeq[a.Producer]; ok && a.Seq < last {
				res.Reordered++
				note("partition %d offset-order %d: %s after seq %d", p, i, v, last)
			}
			lastSeq[a.Producer] = a.Seq
		}
	}
	for v := range acked {
		switch n := seen[v]; {
		case n == 0:
			res.Lost++
			note("acknowledged %s (partition %d) lost", v, acked[v].Partition)
		case n > 1:
			res.Duplicated++
			note("acknowledged %s appears %d times", v, n)
		}
	}
	return res, problems
}

// ReadBackValues reads every partition of topic from the start up to its
// end offset now and returns the values in log order per partition.
func ReadBackValues(t *testing.T, c *Cluster, adm *kadm.Client, topic string, partitions int) map[int32][]string {
	t.Helper()
	ends := ListedEnds(t, adm, topic)
	cons := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	logs := map[int32][]string{}
	next := map[int32]int64{}
	ctx := Context(t, 60*time.Second)
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
