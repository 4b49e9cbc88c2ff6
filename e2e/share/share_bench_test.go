package share

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareBench measures, for BENCHMARKS.md, what share groups are for:
// one partition consumed by 1, 2, 4 and 8 consumers that each spend a
// fixed time on every record, as a share group and as a classic consumer
// group, side by side in one run (for each consumer count the two runs
// follow each other). A classic group gives the partition to one member,
// so its throughput stays at one consumer's; a share group hands records,
// not partitions, to its members. Benchmark only:
//
//	RINGLOG_SHARE_BENCH=1 go test -count=1 -run TestShareBench -v ./e2e/share
//
// RINGLOG_SHARE_BENCH_RECORDS (default 2000), _WORK_MS (per-record work,
// default 5), _REPS (default 1), _OUT (a file for the markdown table).
func TestShareBench(t *testing.T) {
	if os.Getenv("RINGLOG_SHARE_BENCH") != "1" {
		t.Skip("set RINGLOG_SHARE_BENCH=1")
	}
	n := harness.EnvInt(t, "RINGLOG_SHARE_BENCH_RECORDS", 2000)
	work := time.Duration(harness.EnvInt(t, "RINGLOG_SHARE_BENCH_WORK_MS", 5)) * time.Millisecond
	reps := harness.EnvInt(t, "RINGLOG_SHARE_BENCH_REPS", 1)

	b := harness.StartBroker(t, filepath.Join(t.TempDir(), "data"))
	const topic = "bench-queue"
	adm := harness.NewClient(t, []string{b.Addr})
	if _, err := kadm.NewClient(adm).CreateTopic(harness.Context(t, 10*time.Second), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	harness.ProduceN(t, adm, topic, n)

	var table strings.Builder
	fmt.Fprintf(&table, "| consumers | share group: records/s | classic group: records/s | share / classic | share: consumers with records | share: redelivered | join to first record, share / classic (s) |\n|---|---|---|---|---|---|---|\n")
	for rep := range reps {
		for _, k := range []int{1, 2, 4, 8} {
			share := benchConsume(t, b.Addr, topic, fmt.Sprintf("share-%d-%d", rep, k), k, n, work, true)
			classic := benchConsume(t, b.Addr, topic, fmt.Sprintf("classic-%d-%d", rep, k), k, n, work, false)
			for _, r := range []benchResult{share, classic} {
				fmt.Printf("sharebench: rep=%d mode=%s consumers=%d records=%d work_ms=%d first_record_s=%.2f processing_s=%.2f records_per_s=%.0f busy_consumers=%d redelivered=%d\n",
					rep, r.mode, k, n, work.Milliseconds(), r.first.Seconds(), r.elapsed.Seconds(), r.rate(n), r.busy, r.redelivered)
			}
			fmt.Fprintf(&table, "| %d | %.0f | %.0f | %.2f | %d | %d | %.2f / %.2f |\n", k, share.rate(n), classic.rate(n), share.rate(n)/classic.rate(n), share.busy, share.redelivered, share.first.Seconds(), classic.first.Seconds())
		}
	}
	t.Logf("\n%s", table.String())
	if out := os.Getenv("RINGLOG_SHARE_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type benchResult struct {
	mode        string
	first       time.Duration // from creating the consumers to the first record processed (the group's join)
	elapsed     time.Duration // from the first record processed to the last
	busy        int           // consumers that processed at least one record
	redelivered int           // records processed more than once
}

func (r benchResult) rate(n int) float64 { return float64(n) / r.elapsed.Seconds() }

// benchConsume runs k consumers of group (a share group when share, else
// a classic group) until every one of the n records has been processed
// once; each consumer processes its records one after another, spending
// work on each. The rate is taken from the first record processed to the
// last, so a classic group's initial rebalance delay does not count
// against it; the time to the first record is reported on its own.
func benchConsume(t *testing.T, addr, topic, group string, k, n int, work time.Duration, share bool) benchResult {
	t.Helper()
	mode := "classic"
	if share {
		mode = "share"
		adm := harness.NewClient(t, []string{addr})
		setGroupConfigs(t, adm, group, "share.auto.offset.reset", "earliest")
	}
	// Bounded: one consumer alone needs n*work; allow three times that
	// plus a minute for joins.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Duration(n)*work+time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		done     = make(map[int]int, n) // key -> times processed
		byMember = make([]int, k)
		all      = make(chan struct{})
		firstAt  time.Time
	)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range k {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100 * time.Millisecond)}
		if share {
			// Small acquisitions, so records are spread over the members
			// rather than taken by the first to fetch.
			opts = append(opts, kgo.ShareGroup(group), kgo.ShareMaxRecords(10))
		} else {
			opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(16<<10))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for ctx.Err() == nil {
				for _, r := range cl.PollFetches(ctx).Records() {
					time.Sleep(work) // the fixed per-record processing time being measured
					if share {
						r.Ack(kgo.AckAccept)
					}
					key, _ := strconv.Atoi(string(r.Key))
					mu.Lock()
					if len(done) == 0 {
						firstAt = time.Now().Add(-work)
					}
					done[key]++
					byMember[i]++
					if len(done) == n {
						select {
						case <-all:
						default:
							close(all)
						}
					}
					mu.Unlock()
				}
				if share {
					cl.FlushAcks(ctx)
				}
			}
		}()
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		got := len(done)
		mu.Unlock()
		cancel()
		wg.Wait()
		t.Fatalf("%s, %d consumers: %d of %d records processed before the deadline", mode, k, got, n)
	}
	end := time.Now()
	cancel()
	wg.Wait()
	r := benchResult{mode: mode, first: firstAt.Sub(start), elapsed: end.Sub(firstAt)}
	for _, c := range byMember {
		if c > 0 {
			r.busy++
		}
	}
	for _, c := range done {
		if c > 1 {
			r.redelivered++
		}
	}
	return r
}
