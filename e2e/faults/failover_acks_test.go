package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	ackRate           = 2000 // records per second
	ackPartitions     = 6
	ackProduceTimeout = 10 * time.Second // franz-go's default produce timeout_ms
	// ackAnswerSlack is what a loaded 2-core machine may add to a
	// broker's answer at timeout_ms.
	ackAnswerSlack = 5 * time.Second
)

// produceRoundTrips records how long each produce request waited for its
// answer, from franz-go's end-to-end broker hook.
type produceRoundTrips struct {
	mu       sync.Mutex
	n        int
	slowest  time.Duration
	timeouts int // reads that ended in the client's deadline: unanswered
	late     []string
}

func (p *produceRoundTrips) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 0 || e2e.WriteErr != nil {
		return
	}
	wait := e2e.ReadWait + e2e.TimeToRead
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if errors.Is(e2e.ReadErr, os.ErrDeadlineExceeded) {
		p.timeouts++
		p.late = append(p.late, fmt.Sprintf("node %d: no answer after %v", meta.NodeID, wait))
		return
	}
	if e2e.ReadErr != nil {
		return // the broker died under it
	}
	p.slowest = max(p.slowest, wait)
	if wait > ackProduceTimeout+ackAnswerSlack && len(p.late) < 10 {
		p.late = append(p.late, fmt.Sprintf("node %d: answered after %v", meta.NodeID, wait))
	}
}

func TestFailoverAcksAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	runs := harness.EnvRepeats(t, "RINGLOG_FAILOVER_ACK_RUNS")
	// See above: Kafka's lag window, fast preferred-leader rebalance.
	flags := append([]string{"--replica-lag-time-max", "30s", "--leader-rebalance-interval", "2s"},
		strings.Fields(os.Getenv("RINGLOG_FAILOVER_ACK_FLAGS"))...)
	c := harness.StartReplCluster(t, 3, flags...)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	for run := range runs {
		start := time.Now()
		res, inLog, rt := failoverAcksRun(t, c, adm, fmt.Sprintf("acks-%d", run))
		fmt.Printf("failover-acks: run=%d/%d acknowledged=%d in_log=%d lost=%d duplicated=%d reordered=%d produce_requests=%d slowest_answer=%v unanswered=%d took=%v\n",
			run+1, runs, res.Acked, inLog, res.Lost, res.Duplicated, res.Reordered, rt.n, rt.slowest.Round(time.Millisecond), rt.timeouts, time.Since(start).Round(time.Second))
		if t.Failed() {
			return
		}
	}
}

// failoverAcksRun runs the scenario once on a new topic.
func failoverAcksRun(t *testing.T, c *harness.Cluster, adm *kadm.Client, topic string) (res harness.FailoverResult, inLog int, rt *produceRoundTrips) {
	harness.CreateRF3Topic(t, adm, topic, ackPartitions)
	allISR := harness.FullISR(topic, ackPartitions)

	rt = &produceRoundTrips{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: franz-go's default
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(ackProduceTimeout),
		kgo.MaxBufferedRecords(200_000),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.WithHooks(rt))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	var (
		mu       sync.Mutex
		acked    = map[string]harness.AckedRecord{}
		failed   atomic.Int64
		firstErr atomic.Value
		pending  sync.WaitGroup
		stop     = make(chan struct{})
		genDone  = make(chan struct{})
	)
	// The generator: 2,000 records/s in 10 ms ticks, round robin over the
	// partitions; partition p's records carry producer id p and its own
	// sequence, so the checker can tell reordering. Bounded by stop and
	// by count (120 s worth).
	go func() {
		defer close(genDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		seq := make([]int, ackPartitions)
		for n := 0; n < 120*ackRate; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range ackRate / 100 {
				p := n % ackPartitions
				v := harness.FailoverValue(p, seq[p])
				rec := harness.AckedRecord{Producer: p, Seq: seq[p], Partition: int32(p)}
				seq[p]++
				n++
				pending.Add(1)
				prod.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}, func(_ *kgo.Record, err error) {
					defer pending.Done()
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
						return
					}
					mu.Lock()
					acked[v] = rec
					mu.Unlock()
				})
			}
		}
	}()
	stopGen := sync.OnceFunc(func() { close(stop); <-genDone })
	defer stopGen()

	// ackedGrows waits until every partition has n more acknowledged
	// records than now: the load flows on all of them.
	ackedGrows := func(n int, what string) {
		t.Helper()
		count := func() map[int32]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[int32]int{}
			for _, r := range acked {
				out[r.Partition]++
			}
			return out
		}
		from := count()
		harness.Eventually(t, 30*time.Second, what, func() (bool, string) {
			now := count()
			for p := range int32(ackPartitions) {
				if now[p] < from[p]+n {
					return false, fmt.Sprintf("acknowledged per partition %v, %v before", now, from)
				}
			}
			return true, ""
		})
	}

	ackedGrows(100, "load running on every partition")
	for _, f := range []struct {
		part int32
		down time.Duration
	}{{0, 8 * time.Second}, {1, 6 * time.Second}} {
		victim := harness.PartitionLeader(t, adm, topic, ackPartitions, f.part)
		t.Logf("%s: kill -9 node %d (leader of partition %d), restart in %v", topic, victim, f.part, f.down)
		c.Node(victim).Kill9()
		// Real time: the fault is the leader down this long under load.
		time.Sleep(f.down)
		c.Node(victim).Restart()
		ackedGrows(20, "acks on every partition after the restart")
	}
	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs after the restarts", allISR)
	ackedGrows(20, "acks on every partition with full ISRs")
	stopGen()

	// Every promise must be called soon: a broker that holds a produce
	// past its timeout, or never answers it, keeps the producer waiting.
	finished := make(chan struct{})
	go func() { pending.Wait(); close(finished) }()
	bound := 2*ackProduceTimeout + 2*ackAnswerSlack
	select {
	case <-finished:
	case <-time.After(bound):
		dumpAckState(t, c, topic)
		t.Fatalf("%s: producer not finished %v after the load stopped (unanswered produce)", topic, bound)
	}
	if failed.Load() > 0 {
		t.Logf("%s: %d records failed, first: %v", topic, failed.Load(), firstErr.Load())
	}
	rt.mu.Lock()
	for _, l := range rt.late {
		t.Errorf("%s: produce %s (timeout_ms %v)", topic, l, ackProduceTimeout)
	}
	late := len(rt.late) > 0
	rt.mu.Unlock()
	if late {
		dumpAckState(t, c, topic)
	}

	// Nothing stays parked once the producer is done.
	for _, id := range []int32{1, 2, 3} {
		admin := c.Node(id).Admin
		harness.Eventually(t, 10*time.Second, "empty purgatories", func() (bool, string) {
			m := harness.Scrape(t, admin)
			for _, pg := range []string{"produce", "replication"} {
				if v, _ := harness.SumSeries(m, "ringlog_purgatory_size", `purgatory="`+pg+`"`); v != 0 {
					return false, fmt.Sprintf("node %d: %s purgatory holds %v after the producer finished", id, pg, v)
				}
			}
			return true, ""
		})
	}

	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs at the end", allISR)
	// A leader elected at the end (preferred replica back) starts with a
	// lower high watermark than its predecessor's; read back once every
	// replica's HW reached the common log end, or the tail acknowledged
	// by the old leader would be cut off by a stale end offset.
	harness.Eventually(t, 30*time.Second, "replicas converged", func() (bool, string) {
		return replicasConverged(t, c, topic, ackPartitions)
	})
	logs := harness.RecordValues(harness.ReadBack(t, c, topic, ackPartitions))
	mu.Lock()
	res, problems := harness.CheckFailover(acked, logs)
	mu.Unlock()
	for _, vals := range logs {
		inLog += len(vals)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if res.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
	if res.Lost+res.Duplicated+res.Reordered > 0 {
		t.Errorf("%s: checker: %+v", topic, res)
		dumpAckState(t, c, topic)
	}
	return res, inLog, rt
}

// dumpAckState logs what each broker holds for topic: its purgatories,
// partition offsets and its log lines about the topic's leaderships.
func dumpAckState(t *testing.T, c *harness.Cluster, topic string) {
	for _, id := range []int32{1, 2, 3} {
		b := c.Node(id)
		m := harness.Scrape(t, b.Admin)
		p, _ := harness.SumSeries(m, "ringlog_purgatory_size", `purgatory="produce"`)
		r, _ := harness.SumSeries(m, "ringlog_purgatory_size", `purgatory="replication"`)
		w, _ := harness.SumSeries(m, "ringlog_produce_oldest_wait_seconds")
		t.Logf("node %d: purgatory produce=%v replication=%v oldest_wait=%vs", id, p, r, w)
		for series, v := range m {
			if (strings.HasPrefix(series, "ringlog_partition_") || strings.HasPrefix(series, "ringlog_follower_lag")) && strings.Contains(series, `topic="`+topic+`"`) {
				t.Logf("node %d: %s %v", id, series, v)
			}
		}
		var lines []string
		for _, l := range strings.Split(b.Out.String(), "\n") {
			if strings.Contains(l, "topic="+topic+" ") || strings.Contains(l, "topic="+topic+"\n") {
				lines = append(lines, l)
			}
		}
		t.Logf("node %d: last log lines about %s:\n%s", id, topic, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		if dir := os.Getenv("RINGLOG_FAILOVER_ACK_LOGS"); dir != "" {
			// The whole broker log, for a closer look.
			name := filepath.Join(dir, fmt.Sprintf("%s-node%d.log", topic, id))
			if err := os.WriteFile(name, []byte(b.Out.String()), 0o644); err != nil {
				t.Log(err)
			}
		}
	}
}

// replicasConverged reports whether every replica of every partition of
// topic has the same log end offset and a high watermark at it.
func replicasConverged(t *testing.T, c *harness.Cluster, topic string, partitions int) (bool, string) {
	ends := map[string]float64{}
	for _, id := range []int32{1, 2, 3} {
		m := harness.Scrape(t, c.Node(id).Admin)
		for p := range partitions {
			frag := []string{`topic="` + topic + `"`, fmt.Sprintf(`partition="%d"`, p)}
			leo, ok1 := harness.SumSeries(m, "ringlog_partition_log_end_offset", frag...)
			hw, ok2 := harness.SumSeries(m, "ringlog_partition_high_watermark", frag...)
			if !ok1 || !ok2 || hw != leo {
				return false, fmt.Sprintf("node %d partition %d: log end %v, high watermark %v", id, p, leo, hw)
			}
			key := strconv.Itoa(p)
			if prev, ok := ends[key]; ok && prev != leo {
				return false, fmt.Sprintf("partition %d: log ends %v and %v", p, prev, leo)
			}
			ends[key] = leo
		}
	}
	return true, ""
}
