package tiered

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTieredBench is the tiered-storage benchmark of BENCHMARKS.md, in one
// run on one broker (RINGLOG_TIERED_BENCH=1; skipped otherwise):
//
//	(a) consumer throughput reading the same bytes from local segments,
//	    from the remote tier with a cold chunk cache (the broker restarted
//	    over an empty --remote-cache-dir) and again with the cache warm;
//	(b) producer ack latency (acks=all, open loop at a fixed rate,
//	    measured from each record's intended send time, HdrHistogram) on a
//	    remote.storage.enable topic whose uploads and local deletions run,
//	    against the same topic config with remote storage off, rounds
//	    interleaved A/B/A/B so drift of the machine hits both.
//
// Knobs: RINGLOG_TIERED_BENCH_BYTES (512MiB), RINGLOG_TIERED_BENCH_RATE
// (records/s, 5000), RINGLOG_TIERED_BENCH_ROUND (30s),
// RINGLOG_TIERED_BENCH_UPLOAD_RATE (bytes/s; unset: no cap),
// RINGLOG_TIERED_S3_DIR (where the S3 server keeps objects, e.g. a tmpfs).
// The markdown table
// goes to stdout and to $RINGLOG_TIERED_BENCH_OUT when set.
func TestTieredBench(t *testing.T) {
	if os.Getenv("RINGLOG_TIERED_BENCH") != "1" {
		t.Skip("set RINGLOG_TIERED_BENCH=1 to run the tiered-storage benchmark")
	}
	readBytes := envBytes(t, "RINGLOG_TIERED_BENCH_BYTES", 512<<20)
	rate := 5000
	if v := os.Getenv("RINGLOG_TIERED_BENCH_RATE"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			rate = n
		} else {
			t.Fatalf("RINGLOG_TIERED_BENCH_RATE=%q: want records per second", v)
		}
	}
	round := envDuration(t, "RINGLOG_TIERED_BENCH_ROUND", 30*time.Second)
	const (
		valueSize  = 1024
		partitions = 4
		segBytes   = 16 << 20
	)
	s3 := startS3(t)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	flags := append([]string{
		"--retention-check-interval", "1s",
		"--remote-upload-interval", "1s",
		"--remote-cache-dir", cacheDir,
		"--remote-cache-bytes", fmt.Sprint(2 * readBytes),
	}, s3.brokerFlags()...)
	// RINGLOG_TIERED_BENCH_UPLOAD_RATE (bytes/s) caps the uploads
	// (--remote-upload-max-rate) to compare paced with unpaced uploads.
	if v := os.Getenv("RINGLOG_TIERED_BENCH_UPLOAD_RATE"); v != "" {
		flags = append(flags, "--remote-upload-max-rate", v)
	}
	c := harness.StartClusterAt(t, harness.FreshNodeSpecs(t, 1), 1, func(int) []string { return flags })
	b := c.Node(1)
	cl := b.Client(t)
	adm := kadm.NewClient(cl)
	var out strings.Builder
	fmt.Fprintf(&out, "## Tiered storage, one broker, test S3 server (tiered/s3test) on loopback, %s\n\n", time.Now().UTC().Format("2006-01-02"))

	// (a) Read throughput.
	const rtopic = "bench-read"
	harness.CreateTopicWith(t, adm, rtopic, partitions, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.ms":    kadm.StringPtr("3600000"),
		"segment.bytes":         kadm.StringPtr(fmt.Sprint(segBytes)),
	})
	ctx := harness.Context(t, 30*time.Minute)
	load := runTieredLoad(t, ctx, []string{b.Addr}, rtopic, 0, readBytes+int64(partitions)*segBytes, valueSize, 0)
	load.wait(t, 10*time.Minute)
	if load.errs > 0 {
		t.Fatalf("produce: %v", load.lastErr)
	}
	// The read range of each partition: what the remote tier holds.
	var ranges map[int32]int64
	if ok, msg := poll(3*time.Minute, time.Second, func() (bool, string) {
		rs, err := remoteState(b.Admin, rtopic)
		if err != nil {
			return false, err.Error()
		}
		ranges = map[int32]int64{}
		var behind []string
		for p := range int32(partitions) {
			rp, _ := rs.part(p)
			ranges[p] = rp.RemoteEnd
			if active := newestSegmentBase(b.DataDir, rtopic, p); rp.RemoteEnd < active {
				behind = append(behind, fmt.Sprintf("p%d %d < %d", p, rp.RemoteEnd, active))
			}
		}
		return len(behind) == 0, strings.Join(behind, ", ")
	}); !ok {
		t.Fatalf("uploads did not finish: %s", msg)
	}
	var records int64
	for _, e := range ranges {
		records += e
	}
	type readRow struct {
		name string
		d    time.Duration
	}
	var rows []readRow
	readOnce := func(name string) {
		t.Helper()
		d, n, err := consumeRange(harness.Context(t, 10*time.Minute), b.Addr, rtopic, ranges)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n != records {
			t.Fatalf("%s: read %d records, want %d", name, n, records)
		}
		t.Logf("%s: %d records in %v", name, n, d)
		rows = append(rows, readRow{name, d})
	}
	// Twice: the first read also pays for the consumer's start.
	readOnce("local segments")
	readOnce("local segments, again")
	// Local retention down to a second: the local copy goes, every read
	// below the active segments is remote.
	if err := harness.AlterErr(adm.AlterTopicConfigs(harness.Context(t, 10*time.Second), []kadm.AlterConfig{harness.SetConfig("local.retention.ms", "1000")}, rtopic)); err != nil {
		t.Fatal(err)
	}
	if ok, msg := poll(2*time.Minute, time.Second, func() (bool, string) {
		rs, err := remoteState(b.Admin, rtopic)
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for p, e := range ranges {
			if rp, _ := rs.part(p); rp.LocalLogStart < e {
				left = append(left, fmt.Sprintf("p%d local start %d < %d", p, rp.LocalLogStart, e))
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	}); !ok {
		t.Fatalf("local copies not deleted: %s", msg)
	}
	// Cold: the broker restarted over an empty cache directory.
	b.Stop()
	if err := os.RemoveAll(cacheDir); err != nil {
		t.Fatal(err)
	}
	b.Start()
	readOnce("remote tier, cold cache")
	readOnce("remote tier, warm cache")
	m, _ := scrapeMetrics(b.Admin)
	var cacheLines []string
	for k, v := range m {
		if strings.HasPrefix(k, "ringlog_remote_cache_") {
			cacheLines = append(cacheLines, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(cacheLines)
	t.Logf("cache metrics after the reads:\n%s", strings.Join(cacheLines, "\n"))

	fmt.Fprintf(&out, "### Consumer throughput, %s of %d B records over %d partitions (franz-go, one consumer)\n\n", mib(records*valueSize), valueSize, partitions)
	out.WriteString("| read from | time | MB/s (values) | records/s |\n|---|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&out, "| %s | %v | %.0f | %.0f |\n", r.name, r.d.Truncate(time.Millisecond), float64(records*valueSize)/r.d.Seconds()/1e6, float64(records)/r.d.Seconds())
	}
	out.WriteString("\nLocal reads come from the page cache (the data was just written); the remote tier is the test S3 server on loopback, its files in the page cache too: cold measures the broker's remote path (GETs, chunk cache fill, read-ahead), not a WAN.\n\n")

	// (b) Producer latency with uploads running vs remote storage off.
	topics := map[string]map[string]*string{
		"bench-remote": {
			"remote.storage.enable": kadm.StringPtr("true"),
			"local.retention.ms":    kadm.StringPtr("10000"),
			"segment.bytes":         kadm.StringPtr(fmt.Sprint(8 << 20)),
		},
		"bench-local": {
			"segment.bytes": kadm.StringPtr(fmt.Sprint(8 << 20)),
		},
	}
	for name, cfg := range topics {
		harness.CreateTopicWith(t, adm, name, 2, 1, cfg)
	}
	type latRow struct {
		name     string
		h        *hdrhistogram.Histogram
		uploaded float64
	}
	var lrows []latRow
	total := map[string]*hdrhistogram.Histogram{}
	// A short unrecorded round on each topic first: the first seconds of
	// a topic (leader election, first segments, client start) are not
	// what the comparison is about.
	for _, name := range []string{"bench-remote", "bench-local"} {
		if _, err := openLoopProduce(harness.Context(t, 2*time.Minute), b.Addr, name, rate, valueSize, 10*time.Second, 0); err != nil {
			t.Fatalf("warm-up on %s: %v", name, err)
		}
	}
	for i, name := range []string{"bench-remote", "bench-local", "bench-remote", "bench-local"} {
		up0 := metricSum(b, "ringlog_remote_bytes_uploaded_total")
		h, err := openLoopProduce(harness.Context(t, round+2*time.Minute), b.Addr, name, rate, valueSize, round, 3*time.Second)
		if err != nil {
			t.Fatalf("round %d (%s): %v", i+1, name, err)
		}
		up := metricSum(b, "ringlog_remote_bytes_uploaded_total") - up0
		t.Logf("round %d %s: p50 %v p99 %v p999 %v max %v (%d acks), uploaded %s", i+1, name,
			usDur(h.ValueAtQuantile(50)), usDur(h.ValueAtQuantile(99)), usDur(h.ValueAtQuantile(99.9)), usDur(h.Max()), h.TotalCount(), mib(int64(up)))
		lrows = append(lrows, latRow{fmt.Sprintf("%d: %s", i+1, name), h, up})
		if total[name] == nil {
			total[name] = hdrhistogram.New(1, 120_000_000, 3)
		}
		total[name].Merge(h)
	}
	capNote := "uploads not paced"
	if v := os.Getenv("RINGLOG_TIERED_BENCH_UPLOAD_RATE"); v != "" {
		capNote = "uploads paced at --remote-upload-max-rate " + v + " bytes/s"
	}
	fmt.Fprintf(&out, "### Producer ack latency, acks=all, %d B records, %d records/s open loop (latency from the intended send time), %v rounds, 2 partitions, %s\n\n", valueSize, rate, round, capNote)
	out.WriteString("| round: topic | p50 | p99 | p99.9 | max | acks | uploaded in the round |\n|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, h *hdrhistogram.Histogram, up string) {
		fmt.Fprintf(&out, "| %s | %v | %v | %v | %v | %d | %s |\n", name,
			usDur(h.ValueAtQuantile(50)), usDur(h.ValueAtQuantile(99)), usDur(h.ValueAtQuantile(99.9)), usDur(h.Max()), h.TotalCount(), up)
	}
	for _, r := range lrows {
		row(r.name, r.h, mib(int64(r.uploaded)))
	}
	row("**all: bench-remote (uploads running)**", total["bench-remote"], "")
	row("**all: bench-local (remote storage off)**", total["bench-local"], "")
	out.WriteString("\nEach topic had a 10 s unrecorded round first; each round drops its first 3 s. ")
	out.WriteString("bench-remote: remote.storage.enable=true, local.retention.ms=10000, segment.bytes=8 MiB (a segment rolls, uploads and is deleted locally every few seconds); bench-local: the same without remote storage.\n")

	fmt.Println(out.String())
	if path := os.Getenv("RINGLOG_TIERED_BENCH_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func usDur(us int64) time.Duration {
	return (time.Duration(us) * time.Microsecond).Truncate(10 * time.Microsecond)
}

// consumeRange reads [0, ends[p]) of each partition with one franz-go
// consumer and returns the time it took and the records read.
func consumeRange(ctx context.Context, addr, topic string, ends map[int32]int64) (time.Duration, int64, error) {
	offs := map[int32]kgo.Offset{}
	for p := range ends {
		offs[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20),
		kgo.KeepRetryableFetchErrors())
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	next := map[int32]int64{}
	var n int64
	start := time.Now()
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var lastErr error
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return 0, n, fmt.Errorf("stuck at %v of %v (last error %v)", next, ends, lastErr)
		}
		fs.EachError(func(_ string, _ int32, err error) { lastErr = err })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] && r.Offset >= next[r.Partition] {
				next[r.Partition] = r.Offset + 1
				n++
			}
		})
	}
	return time.Since(start), n, nil
}

// openLoopProduce sends rate records/s for d to topic, each at its
// intended time whatever the acknowledgements do, and returns the
// histogram (µs) of ack latency measured from the intended time, without
// the first warmup.
func openLoopProduce(ctx context.Context, addr, topic string, rate, valueSize int, d, warmup time.Duration) (*hdrhistogram.Histogram, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(max(rate*10, 1000)))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	h := hdrhistogram.New(1, 120_000_000, 3)
	var (
		mu      sync.Mutex
		lastErr error
	)
	value := tieredValue(7, valueSize)
	start := time.Now()
	n := int(d.Seconds() * float64(rate))
	per := time.Second / time.Duration(rate)
	for i := range n {
		intended := start.Add(time.Duration(i) * per)
		if w := time.Until(intended); w > time.Millisecond {
			// Real time: the open loop sends each record at its intended
			// time, whatever the acknowledgements do.
			time.Sleep(w)
		}
		if ctx.Err() != nil {
			break
		}
		record := i >= int(warmup/per)
		cl.Produce(ctx, &kgo.Record{Key: tieredKey(uint64(i)), Value: value}, func(_ *kgo.Record, err error) {
			lat := time.Since(intended).Microseconds()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lastErr = err
				return
			}
			if record {
				h.RecordValue(max(lat, 1))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if lastErr != nil {
		return h, fmt.Errorf("produce: %w", lastErr)
	}
	return h, nil
}
