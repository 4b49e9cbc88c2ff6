package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CheckNoLoss reads topic back and fails on a lost or reordered
// acknowledged record. Duplicates are reported, not failed: the load is
// not idempotent, and a record the failed leader had already replicated
// before its fsync failed is retried by the client (at-least-once, as in
// Kafka without idempotence).
func CheckNoLoss(t *testing.T, c *Cluster, adm *kadm.Client, l *FailoverLoad, topic string, partitions int) FailoverResult {
	t.Helper()
	logs := ReadBackValues(t, c, adm, topic, partitions)
	l.Mu.Lock()
	res, problems := CheckFailover(l.Acked, logs)
	l.Mu.Unlock()
	if res.Lost+res.Reordered > 0 {
		for _, p := range problems {
			t.Error(p)
		}
		t.Fatalf("checker: %+v", res)
	}
	if res.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
	return res
}

// Latencies returns the sorted latencies of produces acknowledged in
// [from, to).
func (l *FailoverLoad) Latencies(from, to time.Time) []time.Duration {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	var out []time.Duration
	for _, a := range l.Lats {
		if !a.At.Before(from) && a.At.Before(to) {
			out = append(out, a.D)
		}
	}
	slices.Sort(out)
	return out
}

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
	l.run(t, seeds, topic, partitions, perPartition,
		// Bounded: a failed record is abandoned, never retried
		// after the producer moved on.
		kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(4*time.Second),
		kgo.ProduceRequestTimeout(3*time.Second))
}

// run is Run and RunSilent with their clients' timeouts and retries.
func (l *FailoverLoad) run(t *testing.T, seeds []string, topic string, partitions, perPartition int, opts ...kgo.Opt) {
	for p := range partitions {
		for k := range perPartition {
			id := p*perPartition + k
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.MetadataMinAge(100 * time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
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
						// Backs off from a broker that fails at once
						// (refused, no leader) instead of spinning on it.
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

// EnvRepeats reads a repetition count from the environment (default 1).
func EnvRepeats(t *testing.T, name string) int {
	t.Helper()
	return EnvInt(t, name, 1)
}

// EnvInt reads a positive integer from the environment, def when unset;
// anything else fails the test.
func EnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// OffsetForLeaderEpoch asks b (the leader) where epoch ends, as a consumer
// would.
func OffsetForLeaderEpoch(t *testing.T, b *BrokerProc, topic string, p int32, epoch int32) int64 {
	t.Helper()
	cl := b.Client(t, kgo.SeedBrokers(b.Addr))
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t, 10*time.Second), cl.SeedBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetForLeaderEpoch %s-%d epoch %d: %+v", topic, p, epoch, resp)
	}
	return resp.Topics[0].Partitions[0].EndOffset
}

// AnswerName names a request's outcome: a Kafka error, acknowledged, or
// no answer.
func AnswerName(code int16, err error) string {
	if err != nil {
		return "no answer"
	}
	return ErrName(code)
}

const PartitionLag = 2 * time.Second

// RunSilent is failoverLoad.run with client timeouts for a network that
// drops packets: a request to a broker that is cut off gets no answer and
// no connection error, so it must give up on its own, quickly, for the
// producer to move on to the new leader.
func (l *FailoverLoad) RunSilent(t *testing.T, seeds []string, topic string, partitions, perPartition int) {
	l.run(t, seeds, topic, partitions, perPartition,
		// No retries: a write that timed out may still commit
		// (REQUEST_TIMED_OUT is no "not written"), and a retry
		// of it would be a duplicate of the client's making.
		kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(4*time.Second),
		kgo.ProduceRequestTimeout(2*time.Second), kgo.RequestTimeoutOverhead(time.Second),
		kgo.DialTimeout(2*time.Second))
}

// LogTailsOnFailure logs the last lines each broker wrote when the test
// fails. Register it after the cluster starts, so
// it runs before the brokers are stopped.
func LogTailsOnFailure(t *testing.T, c *Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, b := range c.Nodes {
			var keep []string
			for _, ln := range strings.Split(b.Out.String(), "\n") {
				// Debug lines and raft's retry noise left out.
				if ln != "" && !strings.Contains(ln, "level=DEBUG") && !strings.Contains(ln, "component=raft") {
					keep = append(keep, ln)
				}
			}
			t.Logf("node %d, last lines:\n%s", i+1, strings.Join(keep[max(0, len(keep)-60):], "\n"))
		}
	})
}

// AckedByPartition counts acknowledged records per partition.
func (l *FailoverLoad) AckedByPartition() map[int32]int {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	out := map[int32]int{}
	for _, a := range l.Acked {
		out[a.Partition]++
	}
	return out
}

// ErrName names a Kafka error code.
func ErrName(code int16) string {
	if code == 0 {
		return "acknowledged"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}

// ReadBack consumes every partition from its start to its end offset.
func ReadBack(t *testing.T, c *Cluster, topic string, partitions int32) map[int32][]*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	ends := ListedEnds(t, adm, topic)
	cons := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	logs := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	ctx := Context(t, 60*time.Second)
	done := func() bool {
		for p := range partitions {
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
			logs[r.Partition] = append(logs[r.Partition], r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return logs
}

func RecordValues(logs map[int32][]*kgo.Record) map[int32][]string {
	out := map[int32][]string{}
	for p, rs := range logs {
		for _, r := range rs {
			out[p] = append(out[p], string(r.Value))
		}
	}
	return out
}

// Quantile of durations (sorts ds).
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q * float64(len(ds)))
	return ds[min(i, len(ds)-1)]
}
