package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logSegmentFiles returns the base offsets and sizes of a partition's .log
// files, ascending; the last is the active segment.
func logSegmentFiles(t *testing.T, dir string) (bases []int64, sizes []int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n := e.Name()
		if len(n) != 24 || !strings.HasSuffix(n, ".log") {
			continue
		}
		base, err := strconv.ParseInt(n[:20], 10, 64)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // swapped by the cleaner meanwhile
		}
		bases, sizes = append(bases, base), append(sizes, info.Size())
	}
	return bases, sizes
}

// consumePartition0 reads partition 0 of topic from the start to its end.
func consumePartition0(t *testing.T, b *harness.BrokerProc, topic string, end int64) []*kgo.Record {
	t.Helper()
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx := harness.Context(t, 30*time.Second)
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s: %d records, none at or after %d: %v", topic, len(out), end-1, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			done = done || r.Offset >= end-1
		})
		if done {
			return out
		}
	}
}

// TestLogCompaction runs the log cleaner in a real broker: a compacted
// user topic written by an idempotent franz-go producer ends up with
// one record per key in its sealed segments, and a group whose offsets
// were committed many times resumes at its last commit after a restart
// that reloads a compacted __consumer_offsets.
func TestLogCompaction(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted
	dir := t.TempDir()
	b := harness.StartBroker(t, dir, "--log-cleaner-interval", "200ms", "--offsets-topic-partitions", "1",
		"--offsets-topic-segment-bytes", "2048", "--group-initial-rebalance-delay", "100ms")
	adm := kadm.NewClient(b.Client(t))
	ctx := harness.Context(t, 120*time.Second)

	// A user topic: many updates to a few keys, small segments.
	const topic, keys, n = "compacted", 10, 3000
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("1024")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// franz-go's default idempotent producer: its records are compacted,
	// its batches stay (empty headers where every record went).
	prod := b.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	values := map[int64]string{}
	keyOf := map[int64]string{}
	for i := 0; i < n; i += 100 {
		var rs []*kgo.Record
		for j := i; j < i+100; j++ {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", j%keys), Value: fmt.Appendf(nil, "v%d", j)})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			values[r.Offset], keyOf[r.Offset] = string(r.Value), string(r.Key)
		}
	}
	// No key on a compacted topic: INVALID_RECORD.
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("keyless")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record: %v, want INVALID_RECORD", err)
	}

	partDir := filepath.Join(dir, topic+"-0")
	var recs []*kgo.Record
	var active int64
	deadline := time.Now().Add(60 * time.Second)
	// Every 200 ms: each look reads the whole partition back.
	harness.EventuallyEvery(t, 200*time.Millisecond, time.Until(deadline), "sealed segments compacted", func() (bool, string) {
		bases, _ := logSegmentFiles(t, partDir)
		if len(bases) < 5 {
			t.Fatalf("only %d segments: segment.bytes not applied?", len(bases))
		}
		active = bases[len(bases)-1]
		recs = consumePartition0(t, b, topic, n)
		seen := map[string]int{}
		for _, r := range recs {
			if r.Offset < active {
				seen[string(r.Key)]++
			}
		}
		dup := 0
		for _, c := range seen {
			dup += c - 1
		}
		return dup == 0, fmt.Sprintf("sealed segments still hold %d superseded records (%d records read)", dup, len(recs))
	})
	// Below the active segment: exactly the latest record of each key
	// there; from it on: every record produced.
	latest := map[string]int64{}
	for o := int64(0); o < active; o++ {
		latest[keyOf[o]] = o
	}
	var got []int64
	for _, r := range recs {
		if values[r.Offset] != string(r.Value) || keyOf[r.Offset] != string(r.Key) {
			t.Fatalf("offset %d: %s=%s, produced %s=%s", r.Offset, r.Key, r.Value, keyOf[r.Offset], values[r.Offset])
		}
		if r.Offset < active && latest[string(r.Key)] != r.Offset {
			t.Fatalf("offset %d of key %s kept, its latest below %d is %d", r.Offset, r.Key, active, latest[string(r.Key)])
		}
		got = append(got, r.Offset)
	}
	var want []int64
	for _, o := range latest {
		want = append(want, o)
	}
	for o := active; o < n; o++ {
		want = append(want, o)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read offsets %v\nwant %v", got, want)
	}
	t.Logf("%d records produced, %d read after compaction (active segment from %d)", n, len(recs), active)
	// librdkafka reads the compacted log (gaps, empty batches) the same.
	harness.NeedTool(t, "/usr/bin/kcat")
	out := harness.RunCmd(t, "", 60*time.Second, "/usr/bin/kcat", "-b", b.Addr, "-t", topic, "-p", "0", "-C", "-o", "beginning", "-e", "-q", "-f", "%o\n")
	var kcatOffs []int64
	for _, l := range strings.Fields(out) {
		o, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("kcat output %q", out)
		}
		kcatOffs = append(kcatOffs, o)
	}
	if !slices.Equal(kcatOffs, got) {
		t.Fatalf("kcat read offsets %v\nfranz-go read %v", kcatOffs, got)
	}

	// A group commits offsets of a plain topic many times; the offsets
	// topic rolls every 2 KiB and gets compacted.
	const src = "src"
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, src); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	harness.ProduceN(t, b.Client(t), src, 400)
	const group = "compacted-group"
	for i := int64(1); i <= 300; i++ {
		offs := make(kadm.Offsets)
		offs.Add(kadm.Offset{Topic: src, Partition: 0, At: i, LeaderEpoch: -1})
		cr, err := adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = cr.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	offDir := filepath.Join(dir, "__consumer_offsets-0")
	var offState string
	harness.Eventually(t, time.Until(deadline), "__consumer_offsets-0 compacted", func() (bool, string) {
		bases, sizes := logSegmentFiles(t, offDir)
		var sealed int64
		for _, s := range sizes[:len(sizes)-1] {
			sealed += s
		}
		offState = fmt.Sprintf("%d segments, %d bytes sealed", len(bases), sealed)
		// 300 commits are ~30 KiB; compacted, the sealed segments hold
		// at most the latest commit.
		return len(bases) >= 5 && sealed < 2048, offState
	})
	t.Logf("__consumer_offsets-0: %s", offState)
	m := harness.Scrape(t, b.Admin)
	if v, _ := harness.SumSeries(m, "ringlog_cleaner_segments_rewritten_total"); v == 0 {
		t.Fatal("ringlog_cleaner_segments_rewritten_total is 0")
	}
	before, _ := harness.SumSeries(m, "ringlog_cleaner_bytes_before_total")
	after, _ := harness.SumSeries(m, "ringlog_cleaner_bytes_after_total")
	if after >= before {
		t.Fatalf("cleaner bytes before %v, after %v", before, after)
	}

	if strings.Contains(b.Out.String(), "cleaning log failed") {
		t.Fatalf("the cleaner failed:\n%s", b.Out.String())
	}

	// The coordinator reloads the compacted log after a restart.
	b.Stop()
	b.Restart()
	adm = kadm.NewClient(b.Client(t))
	if got := harness.CommittedOffsets(t, adm, group, src); got[0] != 300 {
		t.Fatalf("committed offsets after restart %v, want 300", got)
	}
	mem := harness.StartMember(t, b.Addr, group, src, kgo.RoundRobinBalancer())
	defer mem.Close()
	var first int64
	harness.Eventually(t, time.Until(deadline.Add(30*time.Second)), "group member got records", func() (bool, string) {
		mem.Mu.Lock()
		defer mem.Mu.Unlock()
		f, ok := mem.First[0]
		first = f
		return ok, "none yet"
	})
	if first != 300 {
		t.Fatalf("group resumed at %d, want 300", first)
	}
	// Both internal topics are created compacted.
	rc, err := adm.DescribeTopicConfigs(context.Background(), "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc[0].Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
			t.Fatalf("__consumer_offsets cleanup.policy %q", c.MaybeValue())
		}
	}
}
