package results

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// hist is an interval histogram of n values over [startMs, endMs).
func hist(startMs, endMs int64, n int) *hdr.Histogram {
	h := NewHistogram()
	for range n {
		RecordMicros(h, 1000)
	}
	h.SetStartTimeMs(startMs)
	h.SetEndTimeMs(endMs)
	return h
}

// TestFullSecondsTrimsPartialEdges: the charts over time leave out a
// partial first interval (the warm-up's last fraction), a partial last
// one (the drain after the schedule stopped) and one past the end of the
// measured window, and keeps everything when nothing else is left.
func TestFullSecondsTrimsPartialEdges(t *testing.T) {
	const s0 = 1_700_000_000_000
	hs := []*hdr.Histogram{
		hist(s0, s0+400, 800), // partial first
		hist(s0+400, s0+1400, 2000), hist(s0+1400, s0+2400, 2000), hist(s0+2400, s0+3400, 2000),
		hist(s0+3400, s0+4400, 2000), hist(s0+4400, s0+5400, 2000),
		hist(s0+5400, s0+5411, 9), // the drain: 818 msg/s
	}
	kept, dropped := fullSeconds(hs, 0)
	if dropped != 2 || len(kept) != 5 || kept[0] != hs[1] || kept[4] != hs[5] {
		t.Fatalf("kept %d, dropped %d; want the 5 whole seconds", len(kept), dropped)
	}
	// A whole second after the measured window (the drain took longer) goes too.
	late := append(append([]*hdr.Histogram{}, hs[1:6]...), hist(s0+5400, s0+6400, 30))
	if kept, dropped := fullSeconds(late, s0+5400); dropped != 1 || len(kept) != 5 {
		t.Fatalf("past the window: kept %d, dropped %d", len(kept), dropped)
	}
	// Timer jitter is not a partial interval; a short one in the middle stays.
	jitter := []*hdr.Histogram{hist(s0, s0+1003, 1), hist(s0+1003, s0+1500, 1), hist(s0+1500, s0+2497, 1)}
	if kept, dropped := fullSeconds(jitter, 0); dropped != 0 || len(kept) != 3 {
		t.Fatalf("jitter: kept %d, dropped %d", len(kept), dropped)
	}
	// Nothing but partial intervals: all of them, not an empty chart.
	if kept, dropped := fullSeconds([]*hdr.Histogram{hist(s0, s0+300, 1), hist(s0+300, s0+310, 1)}, s0+100); dropped != 0 || len(kept) != 2 {
		t.Fatalf("all partial: kept %d, dropped %d", len(kept), dropped)
	}

	// On the page: the throughput line has the five whole seconds (no
	// 818 msg/s point), and the caption says what was left out.
	r := &Run{Result: Result{Label: "trim", StartedAt: time.UnixMilli(s0), DurationS: 5.4, TargetRate: 2000, AchievedRate: 2000,
		SLA: SLA{TargetP99Ms: 10}}, Ack: hs, SendDelay: hs}
	r.Finalize()
	page := string(RenderHTMLMust(t, r))
	fig := regexp.MustCompile(`<figure class="chart" id="chart-throughput-over-time".*?</figure>`).FindString(page)
	pts := regexp.MustCompile(`<polyline [^>]*points="([^"]*)"`).FindStringSubmatch(fig)
	if pts == nil || len(strings.Fields(pts[1])) != 5 {
		t.Fatalf("throughput chart: %v, want 5 points\n%s", pts, fig)
	}
	if !strings.Contains(fig, "<figcaption>Whole seconds only: 2 partial interval(s)") {
		t.Errorf("throughput chart does not say what it left out:\n%s", fig)
	}
	// The latency over time plots the same whole seconds.
	lat := regexp.MustCompile(`<figure class="chart" id="chart-latency-over-time".*?</figure>`).FindString(page)
	for _, m := range regexp.MustCompile(`<polyline [^>]*points="([^"]*)"`).FindAllStringSubmatch(lat, -1) {
		if len(strings.Fields(m[1])) != 5 {
			t.Errorf("latency over time: %d points, want 5", len(strings.Fields(m[1])))
		}
	}
	for _, v := range tickValues(t, fig, "ytick") {
		if v > 2500 {
			t.Errorf("throughput axis reaches %v for a 2000 msg/s run", v)
		}
	}
}

// reportRun is a run on a 3-broker cluster with counters, consumers and
// a latency breakdown, for the title block and summary tests.
func reportRun(t *testing.T) *Run {
	t.Helper()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	iv, _ := intervals(start.UnixMilli(), 3, 1, 10_000)
	r := &Run{Result: Result{StartedAt: start, DurationS: 3, WarmupS: 2, TargetRate: 20_000, AchievedRate: 19_990, ThroughputMBps: 19.99,
		MessageSize: 1000, MessagesSent: 60_000, MessagesAcked: 59_970, MessagesConsumed: 59_970, Errors: 3, SLA: SLA{TargetP99Ms: 5},
		Workload:    map[string]string{"topic": "orders", "partitions": "8", "cluster_brokers": "3", "client": "lean", "acks": "all"},
		Environment: Environment{Partitions: 24, Client: "kgo", ReplicationFactor: 3, MinISR: 2, Acks: "all"},
		BrokerCPU:   twoBrokers()},
		Ack: iv, E2E: iv, SendDelay: iv}
	r.Finalize()
	return r
}

// TestTitleBlock: the page is titled by the run's label, else the
// workload's name, else its directory's name, never a bare "report:";
// the title block names the topic, partitions, brokers and client.
func TestTitleBlock(t *testing.T) {
	r := reportRun(t)
	r.Result.Label = "acks=all <RF 3>"
	page := string(RenderHTMLMust(t, r))
	for _, want := range []string{`<title>acks=all &lt;RF 3&gt; · ringlog load report</title>`,
		`<p class="kicker">ringlog load report</p><h1 id="run-name">acks=all &lt;RF 3&gt;</h1>`,
		`<div data-fact="topic"><dt>topic</dt><dd>orders</dd></div>`,
		`<div data-fact="partitions"><dt>partitions</dt><dd>24</dd></div>`, // the topic's metadata, over the flag
		`<div data-fact="brokers"><dt>brokers</dt><dd>3</dd></div>`,
		`<div data-fact="client"><dt>client</dt><dd>kgo</dd></div>`,
		`<div data-fact="replication"><dt>replication factor</dt><dd>3, min ISR 2</dd></div>`,
		`<div data-fact="message_size"><dt>message size</dt><dd>1,000 bytes</dd></div>`,
		`<p id="run-window">Started 2026-03-01 12:00:00 +00:00; 3 s measured after 2 s warm-up.</p>`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if t1, v := strings.Index(page, `id="title-block"`), strings.Index(page, `id="verdict"`); t1 < 0 || v < t1 {
		t.Error("the title block is not above the verdict")
	}

	for _, c := range []struct {
		label, ombName, file, dir, want string
	}{
		{"", "OMB 1 topic 16 partitions", "", "/x/run1", "OMB 1 topic 16 partitions"},
		{"", "", "workloads/keyed-1kb-acks-all-20k.yaml", "/x/run1", "keyed-1kb-acks-all-20k"},
		{"", "", "", "bench-results/2026-03-01T12-00-00", "2026-03-01T12-00-00"},
		{"  ", "", "", "bench-results/run2/", "run2"},
		{"", "", "", "", "unlabelled run"},
	} {
		res := Result{Label: c.label, Workload: map[string]string{}}
		if c.ombName != "" {
			res.Workload["omb.name"] = c.ombName
		}
		if c.file != "" {
			res.Workload["workload_file"] = c.file
		}
		if got := RunName(&res, c.dir); got != c.want {
			t.Errorf("RunName(%+v, %q) = %q, want %q", c, c.dir, got, c.want)
		}
	}
	if got := RunName(&Result{}, "."); got == "" || got == "." {
		t.Errorf(`RunName in "." = %q, want the working directory's name`, got)
	}

	// Unlabelled and written to a directory: the directory names the page;
	// facts nobody recorded say unknown, never blank.
	dir := filepath.Join(t.TempDir(), "run-42")
	bare := &Run{Result: Result{StartedAt: r.Result.StartedAt, DurationS: 3, SLA: SLA{TargetP99Ms: 5}}, Ack: r.Ack, SendDelay: r.SendDelay}
	bare.Finalize()
	if err := bare.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	page = string(b)
	for _, want := range []string{`<h1 id="run-name">run-42</h1>`, `<div data-fact="topic"><dt>topic</dt><dd>unknown</dd></div>`,
		`<div data-fact="brokers"><dt>brokers</dt><dd>unknown</dd></div>`} {
		if !strings.Contains(page, want) {
			t.Errorf("unlabelled report.html lacks %s", want)
		}
	}
	if strings.Contains(page, ": </h1>") || strings.Contains(page, "<dd></dd>") {
		t.Error("unlabelled report.html has an empty title or fact")
	}
	var text bytes.Buffer
	if err := Report(&text, dir, 5); err != nil || !strings.Contains(text.String(), "run run-42: started") {
		t.Errorf("text report of an unlabelled run: %v\n%s", err, text.String())
	}
}

// TestSummaryTables: the summary is tables, not terminal text: rate
// target and achieved, counts, errors, broker CPU and its per-message
// counters, and p50/p90/p99/p99.9/max of ack, end-to-end and send delay.
func TestSummaryTables(t *testing.T) {
	r := reportRun(t)
	page := string(RenderHTMLMust(t, r))
	if strings.Contains(page, `<pre id="summary">`) {
		t.Fatal("report.html still pastes the text summary into a <pre>")
	}
	row := func(key, name, value string) string {
		return `<tr data-row="` + key + `"><th>` + name + `</th><td>` + value + `</td></tr>`
	}
	for _, want := range []string{`<table id="summary">`,
		row("target_rate", "target rate", "20,000 msg/s"),
		row("achieved_rate", "achieved rate", "19,990 msg/s (100.0% of target)"),
		row("sent", "messages sent", "60,000"), row("acked", "messages acknowledged", "59,970"),
		row("consumed", "messages consumed", "59,970"),
		`<tr data-row="errors"><th>errors (messages failed)</th><td class="bad">3</td></tr>`,
		row("cpu_us_per_msg", "broker CPU-µs per acked msg", "80.0"),
		row("ctx_switches_per_msg", "broker context switches per acked msg", "2.40 (2.25 voluntary, 0.15 involuntary)"),
		`<tr data-row="broker_cpu"><th>broker CPU</th><td>0.04 cores: 0.32 CPU-s over 8.0 s, 2 broker process(es); `,
		`<table id="latency"><tr><th class="head">latency (ms)</th><th class="q">p50</th><th class="q">p90</th><th class="q">p99</th><th class="q">p99.9</th><th class="q">max</th></tr>`,
		`<table id="environment"><tr><th colspan="2" class="head">environment</th></tr>`,
		`<table id="broker-counters">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	res := &r.Result
	for key, p := range map[string]Percentiles{"ack": res.AckLatencyMs, "e2e": *res.E2ELatencyMs, "send_delay": res.SendDelayMs} {
		m := regexp.MustCompile(`<tr data-latency="` + key + `"><th>[^<]+</th>((?:<td class="[^"]+">[^<]+</td>){5})</tr>`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("latency table lacks the %s row", key)
			continue
		}
		cells := regexp.MustCompile(`>([0-9.]+)<`).FindAllStringSubmatch(m[1], -1)
		for i, v := range []float64{p.P50, p.P90, p.P99, p.P999, p.Max} {
			if got, _ := strconv.ParseFloat(cells[i][1], 64); math.Abs(got-v) > 0.0005 {
				t.Errorf("%s column %d = %v, want %.3f", key, i, got, v)
			}
		}
	}
	// The ack p99 over its 5 ms target is marked.
	if !regexp.MustCompile(`<tr data-latency="ack"><th>ack</th><td class="n">[0-9.]+</td><td class="n">[0-9.]+</td><td class="n bad">`).MatchString(page) {
		t.Error("ack p99 over target not marked")
	}
	// Every chart is as wide as the page.
	if n := strings.Count(page, `<figure class="chart"`); n != 3 || !strings.Contains(page, "figure.chart{margin:12px 0;width:100%}") ||
		!strings.Contains(page, "figure.chart svg{width:100%;height:auto;display:block}") {
		t.Errorf("%d charts, or not at the page's width", n)
	}
	// A find-max run has its step table.
	r.Result.FindMax = &FindMax{MaxPassingRate: 15_000, TargetP99Ms: 5, Steps: []Step{{TargetRate: 10_000, AchievedRate: 10_000, P99Ms: 2, Pass: true},
		{TargetRate: 20_000, AchievedRate: 19_990, P99Ms: 9}}}
	page = string(RenderHTMLMust(t, r))
	if !strings.Contains(page, `<table id="find-max">`) || !strings.Contains(page, "<strong>15,000 msg/s</strong>") ||
		!strings.Contains(page, `data-chart="p99-vs-rate"`) {
		t.Error("find-max run lacks its step table or chart")
	}
}

// TestCompareLabelsEveryColumn: unlabelled runs are named by their
// directories, two directories of one name by their paths, and no
// column head is blank, in the terminal or in compare.html; compare says
// where it wrote the page, and when it replaced one.
func TestCompareLabelsEveryColumn(t *testing.T) {
	tmp := t.TempDir()
	base := time.Now().Truncate(time.Second)
	a := filepath.Join(tmp, "ringlog-run")
	b1, b2 := filepath.Join(tmp, "x", "kafka"), filepath.Join(tmp, "y", "kafka")
	for _, d := range []string{a, b1, b2} {
		writeRun(t, d, base, 1, func(r *Result) { r.Label = "" })
	}
	runs, err := LoadAll([]string{a, b1, b2})
	if err != nil {
		t.Fatal(err)
	}
	names := runNames(runs)
	if names[0] != "ringlog-run" || names[1] != b1 || names[2] != b2 {
		t.Fatalf("names %q", names)
	}
	if got := runNames([]*Run{{Result: Result{Label: "same"}, Dir: "p/one"}, {Result: Result{Label: "same"}, Dir: "p/two"}, {}}); got[0] != "same (p/one)" ||
		got[1] != "same (p/two)" || got[2] != "run 3" {
		t.Fatalf("names %q", got)
	}

	var out bytes.Buffer
	if err := CompareDirs(&out, "", []string{a, b1, b2}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if f := strings.Fields(lines[0]); len(f) != 4 || f[0] != "run" || f[1] != "ringlog-run" || f[2] != b1 || f[3] != b2 {
		t.Fatalf("header %q\n%s", lines[0], out.String())
	}
	page := filepath.Join(a, "compare.html")
	if !strings.HasSuffix(out.String(), "\nwrote comparison page: "+page+"\n") {
		t.Fatalf("compare does not say where it wrote:\n%s", out.String())
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(html, []byte("<th></th>")) || !bytes.Contains(html, []byte(`<th class="head">run</th><th class="head run">ringlog-run</th><th class="head run">`+b1+`</th>`)) {
		t.Errorf("compare.html column heads:\n%.600s", html)
	}
	if !bytes.Contains(html, []byte(`<h1 id="run-name">ringlog-run vs `+b1+` vs `+b2+`</h1>`)) {
		t.Error("compare.html title does not name the runs")
	}
	out.Reset()
	if err := CompareDirs(&out, "", []string{a, b1}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "\noverwrote the earlier comparison page: "+page+"\n") {
		t.Fatalf("compare does not say it replaced the page:\n%s", out.String())
	}
}

// TestOldResultRenders: a result.json from before the title block (no
// cluster_brokers, no client, no environment partitions) still loads,
// renders and re-renders with RenderDir.
func TestOldResultRenders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "old-run")
	writeRun(t, dir, time.Now().Truncate(time.Second), 1, nil)
	old := `{"label": "", "started_at": "2025-01-02T03:04:05Z", "duration_s": 3, "warmup_s": 1, "target_rate": 1000,
"achieved_rate": 998, "throughput_mb_s": 1, "message_size": 1000, "messages_sent": 3000, "messages_acked": 2994, "errors": 0,
"ack_latency_ms": {"p50": 1, "p90": 2, "p99": 3, "p999": 4, "max": 5}, "send_delay_ms": {"p50": 0.1, "p90": 0.2, "p99": 0.3, "p999": 0.4, "max": 0.5},
"generator_saturated": false, "sla": {"target_p99_ms": 10, "pass": true},
"workload": {"topic": "t1", "partitions": "6", "client": "franz-go"}, "environment": {"hostname": "h"}}`
	if err := os.WriteFile(filepath.Join(dir, ResultFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RenderDir(&out, dir, ""); err != nil {
		t.Fatal(err)
	}
	if out.String() != "overwrote the earlier report page: "+filepath.Join(dir, HTMLFile)+"\n" {
		t.Errorf("RenderDir said %q", out.String())
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<h1 id="run-name">old-run</h1>`, `<dd>t1</dd>`, `<div data-fact="partitions"><dt>partitions</dt><dd>6</dd></div>`,
		`<div data-fact="client"><dt>client</dt><dd>franz-go</dd></div>`, `<div data-fact="brokers"><dt>brokers</dt><dd>unknown</dd></div>`,
		`<td class="n">3.000</td>`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("old run's report.html lacks %s", want)
		}
	}
}
