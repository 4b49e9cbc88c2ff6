package core

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnBench is a benchmark, not a test: RINGLOG_TXN_BENCH=1 runs it.
// On one 3-broker RF=3 cluster (acks=all, min.insync.replicas=2, 1,000-byte
// records) it measures, side by side for 10, 100 and 1000 records per
// unit, the throughput and p99 latency of
//
//   - transactions: BeginTransaction, produce N records, flush, commit
//     (the latency is from the first produce to the commit returning), and
//   - the same N records from an idempotent acks=all producer, flushed
//     (the latency is from the first produce to the flush returning).
//
// Each case runs for RINGLOG_TXN_BENCH_SECONDS (default 10) after a warmup
// unit. Results go to stdout as a table (BENCHMARKS.md section 10).
func TestTxnBench(t *testing.T) {
	harness.Processes(t) // a benchmark of broker processes
	if os.Getenv("RINGLOG_TXN_BENCH") != "1" {
		t.Skip("benchmark: set RINGLOG_TXN_BENCH=1")
	}
	seconds := 10
	if s := os.Getenv("RINGLOG_TXN_BENCH_SECONDS"); s != "" {
		fmt.Sscan(s, &seconds)
	}
	c := harness.StartReplCluster(t, 3, "--retention-bytes", fmt.Sprint(256<<20), "--segment-bytes", fmt.Sprint(64<<20))
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	value := []byte(strings.Repeat("x", 1000))
	type row struct {
		mode        string
		n           int
		units       int
		recsPerSec  float64
		p50, p99    time.Duration
		mbPerSecond float64
	}
	var rows []row
	for _, n := range []int{10, 100, 1000} {
		for _, mode := range []string{"acks=all idempotent", "transactional"} {
			topic := fmt.Sprintf("txb-%d-%s", n, strings.Fields(mode)[0][:4])
			resp, err := adm.CreateTopic(harness.Context(t, 30*time.Second), 6, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			opts := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(1 << 20)}
			txn := mode == "transactional"
			if os.Getenv("RINGLOG_TXN_BENCH_DEBUG") == "1" {
				opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
			}
			if txn {
				opts = append(opts, kgo.TransactionalID(fmt.Sprintf("bench-%d", n)))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			unit := func(ctx context.Context) (time.Duration, error) {
				start := time.Now()
				if txn {
					if err := cl.BeginTransaction(); err != nil {
						return 0, err
					}
				}
				for i := range n {
					cl.Produce(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: value}, nil)
				}
				// franz-go commits only what has been flushed.
				if err := cl.Flush(ctx); err != nil {
					return 0, err
				}
				flushed := time.Since(start)
				if txn {
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						return 0, err
					}
				}
				if os.Getenv("RINGLOG_TXN_BENCH_STAGES") == "1" {
					t.Logf("flush %v end %v", flushed, time.Since(start)-flushed)
				}
				return time.Since(start), nil
			}
			ctx := harness.Context(t, time.Duration(seconds+60)*time.Second)
			if _, err := unit(ctx); err != nil { // warmup: metadata, producer id
				t.Fatalf("%s n=%d warmup: %v", mode, n, err)
			}
			var lat []time.Duration
			begin := time.Now()
			for time.Since(begin) < time.Duration(seconds)*time.Second && len(lat) < 100000 {
				d, err := unit(ctx)
				if err != nil {
					t.Fatalf("%s n=%d: %v", mode, n, err)
				}
				lat = append(lat, d)
			}
			elapsed := time.Since(begin)
			cl.Close()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			r := row{mode: mode, n: n, units: len(lat), p50: lat[len(lat)/2], p99: lat[min(len(lat)-1, len(lat)*99/100)]}
			r.recsPerSec = float64(len(lat)*n) / elapsed.Seconds()
			r.mbPerSecond = r.recsPerSec * 1000 / 1e6
			rows = append(rows, r)
			t.Logf("%s n=%d: %d units, %.0f records/s, p50 %v, p99 %v", mode, n, r.units, r.recsPerSec, r.p50, r.p99)
		}
	}
	fmt.Printf("\n| records per unit | mode | units | records/s | MB/s | p50 | p99 |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %d | %.0f | %.1f | %.1f ms | %.1f ms |\n", r.n, r.mode, r.units, r.recsPerSec, r.mbPerSecond,
			float64(r.p50.Microseconds())/1000, float64(r.p99.Microseconds())/1000)
	}
}
