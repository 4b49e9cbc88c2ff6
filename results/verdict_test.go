package results

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestVerdictReasons: every reason a run fails is named, and a clean run
// passes.
func TestVerdictReasons(t *testing.T) {
	clean := Result{MessagesAcked: 10, AckLatencyMs: Percentiles{Count: 10, P99: 4}, SLA: SLA{TargetP99Ms: 5, Pass: true}}
	if v := VerdictOf(&clean); !v.Pass || len(v.Reasons) != 0 || !strings.HasPrefix(v.Headline(&clean), "PASS: ") {
		t.Fatalf("clean run: %+v", v)
	}
	for _, tc := range []struct {
		mod  func(r *Result)
		want string
	}{
		{func(r *Result) { r.AckLatencyMs.P99 = 6 }, "ack p99 6.000 ms is over the target 5.000 ms"},
		{func(r *Result) { r.Errors = 3 }, "3 messages failed"},
		{func(r *Result) { r.GeneratorSaturated, r.SaturationReason = true, "send delay p99 9 ms" }, "generator saturated: send delay p99 9 ms"},
		{func(r *Result) { r.Incomplete, r.IncompleteReason = true, "agent b died at 3 s" }, "run incomplete: agent b died at 3 s"},
		{func(r *Result) {
			r.Agents = []AgentResult{{Name: "h2:7000", Missing: true, MissingReason: "connection lost"}}
		}, "agent h2:7000 missing: connection lost"},
		{func(r *Result) { r.Agents = []AgentResult{{Name: "h1:7000", Saturated: true, SaturationReason: "cpu"}} }, "agent h1:7000 saturated: cpu"},
		{func(r *Result) { r.Interrupted = true }, "interrupted before its planned end"},
		{func(r *Result) { r.MessagesAcked, r.AckLatencyMs = 0, Percentiles{} }, "no message was acknowledged"},
	} {
		r := clean
		tc.mod(&r)
		v := VerdictOf(&r)
		if v.Pass || !strings.Contains(v.Headline(&r), tc.want) || !strings.HasPrefix(v.Headline(&r), "FAIL: ") {
			t.Errorf("want FAIL naming %q, got %q", tc.want, v.Headline(&r))
		}
	}
	sweep := Result{SLA: SLA{TargetP99Ms: 5}, Sweep: []SweepRow{{Partitions: 8, Pass: true}, {Partitions: 64, Errors: 2}, {Partitions: 256, Saturated: true}}}
	if h := VerdictOf(&sweep).Headline(&sweep); !strings.Contains(h, "64 partitions: ack p99") || !strings.Contains(h, "256 partitions: generator saturated") || strings.Contains(h, "8 partitions") {
		t.Fatalf("sweep verdict %q", h)
	}
}

// fabricatedDistributed is a distributed run as the agents controller
// writes it: three agents, one lost mid-run.
func fabricatedDistributed(t *testing.T, dir string) {
	writeRun(t, dir, time.Now().Truncate(time.Second), 7, func(r *Result) {
		r.Errors, r.Incomplete, r.IncompleteReason = 0, true, "agent 10.0.0.3:7070 lost at 4.2 s: its share (1/3) is missing from then on"
		r.Environment = Environment{BrokerVersion: "v0.9 (abc123)", BrokerCommit: "abc123", BrokerIOPath: "uring", BrokerFsync: "interval",
			ReplicationFactor: 3, MinISR: 2, Partitions: 24, Acks: "all", Compression: "none", ClientHosts: 3, ClientCPUs: 48,
			Kernel: "6.8.0", CPUModel: "AMD EPYC <9654>"}
		p := Percentiles{Count: 1000, P50: 1.5, P99: 4.25, Max: 9}
		r.Agents = []AgentResult{
			{Name: "10.0.0.1:7070", Hostname: "load-1", Cores: 16, TargetRate: 10000, AchievedRate: 9990, MessagesSent: 99900, MessagesAcked: 99900, AckLatencyMs: p},
			{Name: "10.0.0.2:7070", Hostname: "load-2", Cores: 16, TargetRate: 10000, AchievedRate: 9100, MessagesSent: 91000, MessagesAcked: 90990, Errors: 10, AckLatencyMs: p,
				Saturated: true, SaturationReason: "send delay p99 12.00 ms > 5 ms"},
			{Name: "10.0.0.3:7070", Hostname: "load-3", Cores: 16, TargetRate: 10000, MessagesSent: 42000, MessagesAcked: 42000, AckLatencyMs: p,
				Missing: true, MissingReason: "connection lost at 4.2 s"},
		}
	})
}

// TestReportShowsEnvironmentAgentsVerdict: the text report and
// report.html of a (fabricated) distributed run lead with the verdict and
// show the environment and the per-agent table, missing agent named.
func TestReportShowsEnvironmentAgentsVerdict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dist")
	fabricatedDistributed(t, dir)
	var out bytes.Buffer
	if err := Report(&out, dir, 5); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.HasPrefix(text, "FAIL: ") || !strings.Contains(strings.SplitN(text, "\n", 2)[0], "run incomplete: agent 10.0.0.3:7070 lost") {
		t.Fatalf("text report does not lead with the verdict:\n%s", text)
	}
	for _, re := range []string{`(?m)^\s*10\.0\.0\.3:7070\s+load-3\s+16\s+10000\s+0\s+42000\s+42000\s+0\s+1\.500\s+4\.250\s+9\.000\s+false\s+MISSING$`,
		`agent 10\.0\.0\.3:7070 MISSING: connection lost at 4\.2 s`, `agent 10\.0\.0\.2:7070 saturated: send delay p99`,
		`(?m)^  replication factor\s+3$`, `(?m)^  min ISR\s+2$`, `(?m)^  client hosts\s+3$`, `(?m)^  client CPUs\s+48$`,
		`(?m)^  broker commit\s+abc123$`, `(?m)^  io path\s+uring$`, `(?m)^  fsync policy\s+interval$`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("text report lacks %s:\n%s", re, text)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	p := string(page)
	verdict := strings.Index(p, `<div id="verdict" class="fail" data-verdict="FAIL">`)
	if verdict < 0 || verdict > strings.Index(p, `id="summary"`) || verdict > strings.Index(p, "<figure") {
		t.Fatal("report.html: the verdict is not at the top")
	}
	for _, want := range []string{`<tr data-field="min_isr"><th>min ISR</th><td>2</td></tr>`, `<tr data-field="partitions"><th>partitions</th><td>24</td></tr>`,
		`<tr data-field="acks"><th>acks</th><td>all</td></tr>`, `<tr data-field="cpu_model"><th>CPU model</th><td>AMD EPYC &lt;9654&gt;</td></tr>`,
		`<tr data-field="client_cpus"><th>client CPUs</th><td>48</td></tr>`, `<table id="agents">`,
		`<tr data-agent="10.0.0.3:7070"><td class="id">10.0.0.3:7070</td><td>load-3</td>`, `<span class="missing">MISSING</span>: connection lost at 4.2 s`,
		`<td>yes: send delay p99 12.00 ms &gt; 5 ms</td>`, `<li>run incomplete: agent 10.0.0.3:7070 lost at 4.2 s`} {
		if !strings.Contains(p, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if n := strings.Count(p, "<tr data-agent="); n != 3 {
		t.Errorf("%d agent rows, want 3", n)
	}
	// An environment nobody filled reads "unknown", never blank.
	if !strings.Contains(string(RenderHTMLMust(t, &Run{Result: Result{}})), `<tr data-field="broker_commit"><th>broker commit</th><td>unknown</td></tr>`) {
		t.Error("empty environment not shown as unknown")
	}
}

func RenderHTMLMust(t *testing.T, r *Run) []byte {
	t.Helper()
	b, err := RenderHTML(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompareRatios: the compare table has each run's ratio to the first
// run, in text and HTML, with "-" where a number is absent.
func TestCompareRatios(t *testing.T) {
	tmp := t.TempDir()
	base := time.Now().Truncate(time.Second)
	a, b, c := filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "c")
	writeRun(t, a, base, 1, func(r *Result) { r.AchievedRate, r.BrokerCPU = 1000, &BrokerCPU{PerGB: 10} })
	writeRun(t, b, base, 1, func(r *Result) { r.AchievedRate, r.BrokerCPU = 2500, &BrokerCPU{PerGB: 5} })
	writeRun(t, c, base, 1, func(r *Result) { r.AchievedRate = 500 })
	runs, err := LoadAll([]string{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteCompare(&out, runs)
	text := out.String()
	for _, re := range []string{`ratio to a `, `(?m)^\s+b\s+c\s*$`, `(?m)^\s*achieved msg/s\s+x2\.50\s+x0\.50\s*$`,
		`(?m)^\s*broker CPU-s/GB\s+x0\.50\s+-\s*$`, `(?m)^\s*ack p99 ms\s+x1\.00\s+x1\.00\s*$`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("compare text lacks %s:\n%s", re, text)
		}
	}
	page := string(RenderCompareHTML(runs))
	for _, want := range []string{`<td class="n">2500 (x2.50)</td>`, `<td class="n">500 (x0.50)</td>`, `<td class="n">-</td>`,
		`data-chart="compare-percentiles"`, `<tr data-field="io_path">`} {
		if !strings.Contains(page, want) {
			t.Errorf("compare.html lacks %s", want)
		}
	}
	if n := strings.Count(page, "<polyline"); n != 3 {
		t.Errorf("overlay has %d lines, want 3", n)
	}
}

// TestSweepPageVerdictAndEnvironment: a sweep's page leads with its
// verdict and has the environment and the p99-by-partitions chart with
// the target line.
func TestSweepPageVerdictAndEnvironment(t *testing.T) {
	res := &Result{Label: "s", SLA: SLA{TargetP99Ms: 5}, Environment: Environment{Partitions: 8, Acks: "all"},
		Sweep: []SweepRow{{Partitions: 8, Pass: true, AckLatencyMs: Percentiles{P99: 2}}, {Partitions: 64, AckLatencyMs: Percentiles{P99: 7}}}}
	page := string(renderSweepPage(res, ""))
	for _, want := range []string{`<div id="verdict" class="fail" data-verdict="FAIL">FAIL<ul><li>64 partitions: ack p99 7.000 ms`,
		`<tr data-field="partitions"><th>partitions</th><td>one row per count, below</td></tr>`, `data-chart="p99-vs-partitions"`, `>target 5 ms</text>`,
		`<div data-fact="partitions"><dt>partitions</dt><dd>8, 64 (one run each)</dd></div>`, `<h1 id="run-name">s</h1>`,
		`<p>Ack p99 within 5 ms and no errors: pass at 8 partitions; fail at 64 partitions.</p>`} {
		if !strings.Contains(page, want) {
			t.Errorf("sweep page lacks %s", want)
		}
	}
}
