package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/results"
)

// chromiumFlags run a throwaway headless browser that talks to nothing:
// no sandbox (containers), no GPU, no background fetches.
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--hide-scrollbars", "--force-device-scale-factor=1"}

// findChromium returns the browser, or skips the test when there is none,
// unless CI or RINGLOG_REQUIRE_CHROMIUM says it must run.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" || os.Getenv("RINGLOG_REQUIRE_CHROMIUM") != "" {
		t.Fatal("headless Chromium is required here (CI or RINGLOG_REQUIRE_CHROMIUM set) but neither chromium, chromium-browser nor google-chrome is on PATH; install it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: report.html is not checked in a browser (set RINGLOG_REQUIRE_CHROMIUM=1 to make this a failure)")
	return ""
}

// chromium runs the browser on page with extra flags and returns stdout.
func chromium(t *testing.T, bin, page string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	args := append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir()), extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
	}
	return stdout.Bytes()
}

// chartBox is what the report's layout script records for one chart.
type chartBox struct {
	ID         string
	X, Y, W, H int
}

// pageLayout reads the layout script's attributes from a dumped DOM.
func pageLayout(t *testing.T, dom []byte) (charts []chartBox, clipped []string) {
	t.Helper()
	attr := func(name string) string {
		m := regexp.MustCompile(name + `="([^"]*)"`).FindSubmatch(dom)
		if m == nil {
			t.Fatalf("DOM lacks body[%s]: the layout script did not run\n%.2000s", name, dom)
		}
		return html.UnescapeString(string(m[1]))
	}
	if attr("data-layout-checked") != "true" {
		t.Fatal("layout script did not finish")
	}
	if err := json.Unmarshal([]byte(attr("data-charts")), &charts); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(attr("data-clipped")), &clipped); err != nil {
		t.Fatal(err)
	}
	return charts, clipped
}

// TestHarnessReportChromium: a real broker and a real `ringlog loadgen
// --find-max --out`; report.html opened in headless Chromium at 1,400 px
// shows the title block (label, topic, partitions, brokers, client), the
// verdict, the summary and latency tables, the environment table and
// every chart (p99 against rate included) at the page's width, with no
// element whose text overflows its box; the screenshot is the page's
// size and has drawn lines in every chart's area. The same run with a
// per-agent breakdown, and the compare page of the run against itself,
// are checked for clipping at narrower widths.
func TestHarnessReportChromium(t *testing.T) {
	browser := findChromium(t)
	b := harness.StartBroker(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	lg := exec.CommandContext(ctx, harness.RinglogBin, "loadgen", "--bootstrap", b.Addr, "--broker-admin", b.Admin,
		"--topic", "chromium", "--partitions", "2", "--replication-factor", "1", "--rate", "1000", "--message-size", "200",
		"--warmup", "1s", "--duration", "2s", "--consumers", "1", "--find-max", "--find-max-steps", "2",
		"--target-p99", "50ms", "--quiet", "--label", "chromium check: a long label that must wrap rather than run off the page", "--out", out)
	if msg, err := lg.CombinedOutput(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, msg)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	health, err := b.Health()
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, results.HTMLFile)

	const width = 1400
	dom := chromium(t, browser, page, fmt.Sprintf("--window-size=%d,1000", width), "--virtual-time-budget=3000", "--dump-dom")
	// The title block says what was measured; the summary is tables with
	// their headings, not terminal text.
	for _, want := range []string{
		`<h1 id="run-name">` + html.EscapeString(res.Label) + `</h1>`,
		`<div data-fact="topic"><dt>topic</dt><dd>chromium</dd></div>`,
		`<div data-fact="partitions"><dt>partitions</dt><dd>2</dd></div>`,
		`<div data-fact="brokers"><dt>brokers</dt><dd>1</dd></div>`,
		`<div data-fact="client"><dt>client</dt><dd>lean</dd></div>`,
		`<table id="summary">`, `<th>target rate</th>`, `<th>achieved rate</th>`, `<th>messages acknowledged</th>`, `<th>errors (messages failed)</th>`,
		`<th>broker CPU</th>`, `<th>broker CPU-µs per acked msg</th>`, `<th>broker context switches per acked msg</th>`,
		`<th class="head">latency (ms)</th><th class="q">p50</th><th class="q">p90</th><th class="q">p99</th><th class="q">p99.9</th><th class="q">max</th>`,
		`<tr data-latency="ack"><th>ack</th>`, `<tr data-latency="e2e"><th>end-to-end</th>`, `<tr data-latency="send_delay"><th>send delay</th>`,
		`<table id="find-max">`,
	} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("DOM lacks %s", want)
		}
	}
	if bytes.Contains(dom, []byte(`<pre id="summary">`)) {
		t.Error("the summary is still terminal text in a <pre>")
	}
	word := "FAIL"
	if results.VerdictOf(res).Pass {
		word = "PASS"
	}
	if !bytes.Contains(dom, []byte(`<div id="verdict" class="`+strings.ToLower(word)+`" data-verdict="`+word+`">`+word)) {
		t.Errorf("DOM lacks the %s verdict", word)
	}
	if v, h := bytes.Index(dom, []byte(`id="verdict"`)), bytes.Index(dom, []byte(`id="summary"`)); v < 0 || h < 0 || v > h {
		t.Error("the verdict is not above the summary")
	}
	for field, want := range map[string]string{
		"broker_version": fmt.Sprint(health["version"]), "broker_commit": fmt.Sprint(health["commit"]),
		"io_path": fmt.Sprint(health["io_path"]), "fsync": fmt.Sprint(health["fsync"]),
		"replication_factor": "1", "min_isr": "1", "partitions": "2", "acks": "all", "compression": "none",
		"client_hosts": "1", "client_cpus": fmt.Sprint(runtime.NumCPU()), "kernel": res.Environment.Kernel,
		"cpu_model": "", // present; its value is whatever /proc/cpuinfo says
	} {
		m := regexp.MustCompile(`<tr data-field="` + field + `"><th>[^<]+</th><td>([^<]*)</td></tr>`).FindSubmatch(dom)
		switch {
		case m == nil:
			t.Errorf("environment table lacks %s", field)
		case want != "" && html.UnescapeString(string(m[1])) != want:
			t.Errorf("environment %s = %q, want %q", field, m[1], want)
		}
	}
	charts, clipped := pageLayout(t, dom)
	if len(clipped) > 0 {
		t.Errorf("clipped at %d px: %v", width, clipped)
	}
	wantCharts := []string{"percentiles", "latency-over-time", "throughput-over-time", "p99-vs-rate"}
	bottom := 0
	for i, id := range wantCharts {
		// At the page's width: the body's 16 px margins aside, no chart
		// leaves part of a 1,400 px page empty beside it.
		if i >= len(charts) || charts[i].ID != id || charts[i].W < width-2*16-8 || charts[i].H < 300 || charts[i].X > 24 {
			t.Fatalf("charts %+v, want %v, each across the page (%d px wide or more) and 300 px tall", charts, wantCharts, width-40)
		}
		bottom = max(bottom, charts[i].Y+charts[i].H)
	}

	// A viewport tall enough for the whole page: the screenshot is the
	// viewport, and the layout does not depend on its height.
	shot := filepath.Join(t.TempDir(), "report.png")
	chromium(t, browser, page, fmt.Sprintf("--window-size=%d,%d", width, bottom+40), "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != width || got.Y != bottom+40 {
		t.Fatalf("screenshot is %v, want %dx%d (the whole page)", got, width, bottom+40)
	}
	// The title block and tables are drawn at the top: ink in the top
	// band, across more than half the width (facts, then three tables).
	if ink, _ := inkIn(img, image.Rect(0, 0, width, 200)); ink < width*200/100 {
		t.Errorf("the top of the page looks blank: %d non-white pixels", ink)
	}
	if ink, _ := inkIn(img, image.Rect(width/2, charts[0].Y-400, width, charts[0].Y-20)); ink < 2000 {
		t.Errorf("the right half above the charts is empty (%d non-white pixels): the tables do not use the page's width", ink)
	}
	for _, c := range charts {
		ink, color := inkIn(img, image.Rect(c.X, c.Y, c.X+c.W, c.Y+c.H))
		// Axes and labels alone are grey: a chart with data has coloured
		// lines too.
		if ink < c.W*c.H/100 || color < 100 {
			t.Errorf("chart %s looks blank in the screenshot: %d non-white and %d coloured pixels in %dx%d", c.ID, ink, color, c.W, c.H)
		}
	}

	// The per-agent table is the widest: the real run's histograms with a
	// fabricated three-agent breakdown (the agents themselves are tested
	// where they are built), one agent missing, at a laptop's width.
	run, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	p := run.Result.AckLatencyMs
	run.Result.Incomplete, run.Result.IncompleteReason = true, "agent 10.0.0.3:7070 lost at 1.4 s"
	run.Result.Agents = []results.AgentResult{
		{Name: "10.0.0.1:7070", Hostname: "loadgen-host-with-a-long-name-1.example.internal", Cores: 64, TargetRate: 333, AchievedRate: 333, MessagesSent: 666, MessagesAcked: 666, AckLatencyMs: p},
		{Name: "10.0.0.2:7070", Hostname: "loadgen-2", Cores: 64, TargetRate: 333, AchievedRate: 300, MessagesSent: 600, MessagesAcked: 600, AckLatencyMs: p,
			Saturated: true, SaturationReason: "send delay p99 12.00 ms > 5 ms: the generator fell behind its schedule"},
		{Name: "10.0.0.3:7070", Hostname: "loadgen-3", Cores: 64, TargetRate: 334, MessagesSent: 200, MessagesAcked: 200, AckLatencyMs: p,
			Missing: true, MissingReason: "connection reset by peer at 1.4 s; its share is missing from then on"},
	}
	dist := filepath.Join(t.TempDir(), "dist")
	if err := run.Write(dist); err != nil {
		t.Fatal(err)
	}
	dom = chromium(t, browser, filepath.Join(dist, results.HTMLFile), "--window-size=1024,1000", "--virtual-time-budget=3000", "--dump-dom")
	charts, clipped = pageLayout(t, dom)
	if len(clipped) > 0 || len(charts) != len(wantCharts) || bytes.Count(dom, []byte(`<tr data-agent=`)) != 3 ||
		!bytes.Contains(dom, []byte(`<span class="missing">MISSING</span>`)) || !bytes.Contains(dom, []byte(`data-verdict="FAIL"`)) {
		t.Errorf("distributed report at 1024 px: clipped %v, %d charts, agents table or FAIL verdict missing", clipped, len(charts))
	}

	cmp := filepath.Join(t.TempDir(), "compare.html")
	if msg, err := exec.Command(harness.RinglogBin, "report", "compare", "--html", cmp, out, out).CombinedOutput(); err != nil || !bytes.Contains(msg, []byte("ratio to ")) {
		t.Fatalf("report compare: %v\n%s", err, msg)
	}
	dom = chromium(t, browser, cmp, "--window-size=720,1000", "--virtual-time-budget=3000", "--dump-dom")
	charts, clipped = pageLayout(t, dom)
	if len(clipped) > 0 || len(charts) != 1 || charts[0].ID != "compare-percentiles" || charts[0].W < 300 {
		t.Errorf("compare.html at 720 px: clipped %v, charts %+v", clipped, charts)
	}
	// Every run column has a head: the run's label (the same run twice,
	// so with its directory).
	if bytes.Contains(dom, []byte("<th></th>")) || bytes.Count(dom, []byte(`<th class="head run">`+html.EscapeString(res.Label)+" (")) != 2 {
		t.Errorf("compare.html column heads missing or blank")
	}
}

// inkIn counts the pixels of r that are not white, and those that are
// clearly coloured (not grey).
func inkIn(img image.Image, r image.Rectangle) (ink, color int) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			hi, lo := max(cr, cg, cb)>>8, min(cr, cg, cb)>>8
			if lo < 240 {
				ink++
			}
			if hi-lo > 60 {
				color++
			}
		}
	}
	return ink, color
}
