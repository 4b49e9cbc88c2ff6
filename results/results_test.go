package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// intervals makes n one-second interval histograms starting at startMs, filled
// with seeded random latencies, and also returns one histogram of all values.
func intervals(startMs int64, n int, seed int64, scaleUs int64) ([]*hdr.Histogram, *hdr.Histogram) {
	rng := rand.New(rand.NewSource(seed))
	all := NewHistogram()
	var out []*hdr.Histogram
	for i := 0; i < n; i++ {
		h := NewHistogram()
		h.SetStartTimeMs(startMs + int64(i)*1000)
		h.SetEndTimeMs(startMs + int64(i+1)*1000)
		for j := 0; j < 2000; j++ {
			v := 1 + rng.Int63n(scaleUs)
			RecordMicros(h, v)
			RecordMicros(all, v)
		}
		out = append(out, h)
	}
	return out, all
}

func TestIntervalLogRoundTrip(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 250e6, time.UTC).UnixMilli()
	hs, all := intervals(start, 4, 1, 50_000)
	var buf bytes.Buffer
	if err := WriteIntervalLog(&buf, start, hs); err != nil {
		t.Fatal(err)
	}
	// Java's reader keys on these exact tag spellings.
	for _, want := range []string{"#[StartTime: 1740830400.250 ", "#[BaseTime: 1740830400.250 "} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, buf.String())
		}
	}
	got, err := ReadIntervalLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(hs) {
		t.Fatalf("read %d intervals, wrote %d", len(got), len(hs))
	}
	for i := range hs {
		if !got[i].Equals(hs[i]) {
			t.Fatalf("interval %d differs after round trip", i)
		}
		// Float seconds in the log may cost a millisecond of rounding.
		if d := got[i].StartTimeMs() - hs[i].StartTimeMs(); d < -1 || d > 1 {
			t.Fatalf("interval %d start %d, want %d", i, got[i].StartTimeMs(), hs[i].StartTimeMs())
		}
	}
	if !MergeAll(got).Equals(all) {
		t.Fatal("merged intervals differ from the histogram of all values")
	}
}

func TestMergeEqualsOneHistogramOfAllValues(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	aIv, aAll := intervals(start.UnixMilli(), 3, 2, 10_000)
	bIv, bAll := intervals(start.UnixMilli()+3, 3, 3, 90_000) // a few ms of start skew
	dir := t.TempDir()
	mk := func(name string, iv []*hdr.Histogram, rate float64) *Run {
		r := &Run{Result: Result{Label: name, StartedAt: start, DurationS: 3, TargetRate: rate,
			AchievedRate: rate, MessagesAcked: 6000, SLA: SLA{TargetP99Ms: 10}}, Ack: iv, SendDelay: iv}
		r.Finalize()
		if err := r.Write(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return loaded
	}
	a, b := mk("a", aIv, 1000), mk("b", bIv, 2000)
	m, err := Merge([]*Run{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := NewHistogram()
	want.Merge(aAll)
	want.Merge(bAll)
	if !MergeAll(m.Ack).Equals(want) {
		t.Fatal("merged ack histogram differs from one histogram of all values")
	}
	if len(m.Ack) != 3 {
		t.Fatalf("merged timeline has %d intervals, want 3 (aligned by second)", len(m.Ack))
	}
	if m.Result.TargetRate != 3000 || m.Result.MessagesAcked != 12000 {
		t.Fatalf("counters not summed: %+v", m.Result)
	}
	if got, w := m.Result.AckLatencyMs.P99, float64(want.ValueAtQuantile(99))/1000; got != w {
		t.Fatalf("merged p99 %v, want %v", got, w)
	}
}

func TestReportFiles(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	iv, _ := intervals(start.UnixMilli(), 3, 4, 20_000)
	e2e, _ := intervals(start.UnixMilli(), 3, 5, 30_000)
	r := &Run{Result: Result{Label: "files", StartedAt: start, TargetRate: 2000, AchievedRate: 2000,
		MessagesAcked: 6000, Errors: 40, Retries: 25, MessagesRetried: 250, SLA: SLA{TargetP99Ms: 10},
		ErrorMix: map[string]int64{"KAFKA_STORAGE_ERROR": 30, "<b>": 1}}, Ack: iv, E2E: e2e, SendDelay: iv}
	r.Finalize()
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"target_rate", "achieved_rate", "messages_acked", "errors", "ack_latency_ms",
		"e2e_latency_ms", "send_delay_ms", "sla", "environment", "retries", "messages_retried", "error_mix"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result.json lacks %q", k)
		}
	}
	ack := m["ack_latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
		if _, ok := ack[k]; !ok {
			t.Errorf("ack_latency_ms lacks %q", k)
		}
	}
	// p99 of uniform 1..20000 µs is near 19.8 ms, above the 10 ms target.
	if sla := m["sla"].(map[string]any); sla["pass"] != false {
		t.Errorf("sla.pass = %v, want false", sla["pass"])
	}

	// .hgrm: every data line parses as value, percentile, count, 1/(1-p).
	f, err := os.Open(filepath.Join(dir, AckHgrmFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	rows, lastVal := 0, 0.0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 || fields[0] == "Value" {
			continue
		}
		v, err1 := strconv.ParseFloat(fields[0], 64)
		p, err2 := strconv.ParseFloat(fields[1], 64)
		if err1 != nil || err2 != nil || p < 0 || p > 1 {
			t.Fatalf("bad hgrm line %q", sc.Text())
		}
		lastVal = v
		rows++
	}
	if rows < 10 || lastVal < 19 || lastVal > 21 {
		t.Fatalf("hgrm has %d rows, last value %.3f ms; want many rows ending near 20 ms", rows, lastVal)
	}

	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n < 3 {
		t.Fatalf("report.html has %d svg charts, want >= 3", n)
	}
	// The mix is in the summary and in its own table, escaped.
	for _, want := range []string{`<tr data-row="error_mix"><th>error mix</th><td>KAFKA_STORAGE_ERROR: 30, &lt;b&gt;: 1</td></tr>`,
		`<tr><td>KAFKA_STORAGE_ERROR</td><td align="right">30</td></tr>`, `25 requests retried after a backoff, 250 messages re-sent; 40 messages failed`} {
		if !regexp.MustCompile(want).Match(page) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(string(page), "<b>") {
		t.Error("report.html does not escape an error name")
	}
	// Inline layout self-check only: nothing loaded from anywhere.
	if regexp.MustCompile(`(?i)src=|<link|https?://[a-z]`).Match(bytes.ReplaceAll(page, []byte("http://www.w3.org/2000/svg"), nil)) {
		t.Fatal("report.html must be self-contained")
	}

	var sum bytes.Buffer
	WriteSummary(&sum, &r.Result)
	if !strings.Contains(sum.String(), "SLA FAIL") || !regexp.MustCompile(`retries\s+25 requests\s+250 messages re-sent\n`).MatchString(sum.String()) {
		t.Fatalf("summary lacks verdict:\n%s", sum.String())
	}
	var cmp bytes.Buffer
	WriteCompare(&cmp, []*Run{r, r})
	if !strings.Contains(cmp.String(), "ack p99 ms") {
		t.Fatalf("compare table:\n%s", cmp.String())
	}
	if !bytes.Contains(RenderCompareHTML([]*Run{r, r}), []byte("<polyline")) {
		t.Fatal("compare page has no plotted lines")
	}
}

func TestRecordMicrosClamps(t *testing.T) {
	h := NewHistogram()
	RecordMicros(h, -5)
	RecordMicros(h, 2*HighestMicros)
	if h.TotalCount() != 2 || h.Max() < HighestMicros*999/1000 {
		t.Fatalf("clamped values lost: count %d max %d", h.TotalCount(), h.Max())
	}
}
