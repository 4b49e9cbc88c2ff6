package results

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// twoBrokers is a window of 8 s in which 4,000 messages of 1,000 bytes
// were acknowledged by two brokers: one read from /proc (a thread exited,
// uncounted), one through its admin endpoint (exited threads counted).
func twoBrokers() *BrokerCPU {
	return NewBrokerCPU(8, []BrokerProcess{
		{PID: 11, Name: "ringlog", Seconds: 0.2, CtxSwitches: &CtxSwitches{Voluntary: 6000, Involuntary: 400, ThreadsExited: 1,
			ByThread: []ThreadSwitches{{"ringlog", 9, 4000, 300}, {"iou-wrk-*", 2, 2000, 100}}}},
		{PID: 22, Admin: "127.0.0.1:9645", Name: "ringlog", Seconds: 0.12, CtxSwitches: &CtxSwitches{Voluntary: 3000, Involuntary: 200, ExitedCounted: true, ThreadsStarted: 2,
			ByThread: []ThreadSwitches{{"ringlog", 8, 2500, 150}, {ExitedThreadsName, 0, 500, 50}}}},
	}, 4000, 4_000_000, true)
}

func TestNewBrokerCPUPerMessage(t *testing.T) {
	c := twoBrokers()
	if c.Processes != 2 || c.WindowS != 8 || c.MessagesAcked != 4000 || !c.SameHost {
		t.Fatalf("%+v", c)
	}
	// 0.32 CPU-s over 4,000 messages and 0.004 GB.
	if !near(c.Seconds, 0.32) || !near(c.CPUMicrosPerMsg, 80) || !near(c.PerGB, 80) {
		t.Fatalf("CPU %.3f s, %.3f µs/msg, %.3f s/GB; want 0.32, 80, 80", c.Seconds, c.CPUMicrosPerMsg, c.PerGB)
	}
	if b := c.Brokers; !near(b[0].CPUMicrosPerMsg, 50) || !near(b[1].CPUMicrosPerMsg, 30) ||
		!near(b[0].CtxSwitches.PerMsg, 1.6) || !near(b[1].CtxSwitches.PerMsg, 0.8) {
		t.Fatalf("per broker: %+v %+v / %+v %+v", b[0], b[0].CtxSwitches, b[1], b[1].CtxSwitches)
	}
	sw := c.CtxSwitches
	if sw.Voluntary != 9000 || sw.Involuntary != 600 || !near(sw.PerMsg, 2.4) || sw.ExitedCounted ||
		sw.ThreadsExited != 1 || sw.ThreadsStarted != 2 {
		t.Fatalf("sum %+v", sw)
	}
	want := []ThreadSwitches{{"ringlog", 17, 6500, 450}, {"iou-wrk-*", 2, 2000, 100}, {ExitedThreadsName, 0, 500, 50}}
	if !reflect.DeepEqual(sw.ByThread, want) {
		t.Fatalf("by thread %+v, want %+v", sw.ByThread, want)
	}
	// A broker without context switches: no sum that would pass for all.
	c = NewBrokerCPU(8, []BrokerProcess{{PID: 1, Seconds: 1, CtxSwitches: &CtxSwitches{Voluntary: 5}}, {PID: 2, Seconds: 1}}, 100, 0, false)
	if c.CtxSwitches != nil || !near(c.CPUMicrosPerMsg, 20000) || c.PerGB != 0 {
		t.Fatalf("partial switches summed: %+v", c)
	}
	// Nothing acknowledged: no per-message numbers (no division by 0).
	c = NewBrokerCPU(8, []BrokerProcess{{PID: 1, Seconds: 1, CtxSwitches: &CtxSwitches{Voluntary: 5}}}, 0, 0, false)
	if c.CPUMicrosPerMsg != 0 || c.CtxSwitches.PerMsg != 0 || cpuUsPerMsgCell(c) != "-" || switchesPerMsgCell(c) != "-" {
		t.Fatalf("no acks: %+v", c)
	}
}

func near(a, b float64) bool { return a > b-1e-9*max(1, b) && a < b+1e-9*max(1, b) }

// TestBrokerCPUJSON: the fields that existed before the counters keep
// their names; the new ones round-trip.
func TestBrokerCPUJSON(t *testing.T) {
	r := Result{BrokerCPU: twoBrokers(), GeneratorCPU: &GeneratorCPU{WindowS: 8, Seconds: 1.2, Cores: 2, Processes: 1}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"broker_cpu":{"processes":2,"window_s":8,"cpu_s":0.32`, `"cpu_s_per_gb":80`, `"cpu_us_per_msg":80`,
		`"ctx_switches":{"voluntary":9000,"involuntary":600,"per_msg":2.4`, `"by_thread":[{"name":"ringlog","threads":17`,
		`"brokers":[{"pid":11,"name":"ringlog"`, `"admin":"127.0.0.1:9645"`, `"same_host":true`, `"generator_cpu":{"window_s":8,"cpu_s":1.2`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("result.json lacks %s:\n%s", key, b)
		}
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.BrokerCPU, r.BrokerCPU) || !reflect.DeepEqual(back.GeneratorCPU, r.GeneratorCPU) {
		t.Fatalf("round trip:\n%+v\n%+v", back.BrokerCPU, r.BrokerCPU)
	}
}

// TestSummaryShowsCostPerMessage: the terminal summary and report.html
// show CPU-µs and context switches per acknowledged message, summed and
// per broker, by thread name, and the generator's CPU.
func TestSummaryShowsCostPerMessage(t *testing.T) {
	r := &Result{Label: "cost", MessagesAcked: 4000, BrokerCPU: twoBrokers(), SLA: SLA{TargetP99Ms: 10, Pass: true},
		AckLatencyMs: Percentiles{Count: 4000, P99: 2}, GeneratorCPU: &GeneratorCPU{WindowS: 8, Seconds: 1.2, Cores: 4, Processes: 1}}
	var out bytes.Buffer
	WriteSummary(&out, r)
	text := out.String()
	for _, re := range []string{
		`(?m)^per acked msg\s+80\.0 CPU-µs\s+2\.40 ctx switches \(2\.25 voluntary, 0\.15 involuntary\), all brokers, 4000 messages$`,
		`(?m)^  switches by thread\s+ringlog 1\.74, iou-wrk-\* 0\.53, \(exited threads\) 0\.14$`,
		`(?m)^  exited threads\s+1 thread\(s\) exited in the window: their switches are not counted$`,
		`(?m)^per acked msg\s+CPU-µs\s+ctx switches\s+by thread\n  pid 11 \(ringlog\)\s+50\.0\s+1\.60\s+ringlog 1\.07, iou-wrk-\* 0\.53; 1 thread\(s\) exited in the window: their switches are not counted$`,
		`(?m)^  127\.0\.0\.1:9645 pid 22 \(ringlog\)\s+30\.0\s+0\.80\s+ringlog 0\.66, \(exited threads\) 0\.14$`,
		`(?m)^generator CPU\s+0\.15 cores of 4\s+1\.20 CPU-s over 8\.0 s$`,
		// 0.04 + 0.15 of 4 cores: no contention, the verdict has no note.
		`(?m)^SLA PASS: ack p99 2\.000 ms \(target 10\.000 ms\), 0 errors$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("summary lacks %s:\n%s", re, text)
		}
	}
	page := string(RenderHTMLMust(t, &Run{Result: *r}))
	for _, want := range []string{`<table id="broker-counters">`,
		`<tr data-broker="11"><td class="id">pid 11 (ringlog)</td><td class="n">0.20</td><td class="n">50.0</td><td class="n">1.60</td><td class="n">1.50</td><td class="n">0.10</td><td>ringlog 1.07, iou-wrk-* 0.53</td><td>0 started; 1 thread(s) exited in the window: their switches are not counted</td></tr>`,
		`<tr data-broker="sum"><td class="id">all brokers</td><td class="n">0.32</td><td class="n">80.0</td><td class="n">2.40</td>`,
		"per acked msg", "generator CPU"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if strings.Contains(page, `id="contention"`) {
		t.Error("report.html notes contention for a run without it")
	}
	// One broker: named in the sum line, no per-broker rows.
	one := &Result{MessagesAcked: 1000, BrokerCPU: NewBrokerCPU(8, []BrokerProcess{{PID: 7, Name: "fakebroker", Seconds: 0.05,
		CtxSwitches: &CtxSwitches{Voluntary: 900, Involuntary: 100, ByThread: []ThreadSwitches{{"fakebroker", 5, 900, 100}}}}}, 1000, 1e6, true)}
	out.Reset()
	WriteSummary(&out, one)
	if !strings.Contains(out.String(), "1.00 ctx switches (0.90 voluntary, 0.10 involuntary), pid 7 (fakebroker), 1000 messages") ||
		strings.Count(out.String(), "pid 7") != 1 {
		t.Fatalf("one-broker summary:\n%s", out.String())
	}
}

// TestCompareCostRows: report compare has a row each for CPU-µs and
// context switches per message and the machine's busy cores, values and
// ratios, "-" where a run has no counters.
func TestCompareCostRows(t *testing.T) {
	a := Result{Label: "ringlog", MessagesAcked: 4000, BrokerCPU: twoBrokers(), GeneratorCPU: &GeneratorCPU{WindowS: 8, Seconds: 1, Cores: 2, MachineBusyCores: 1.6}}
	kfake := NewBrokerCPU(8, []BrokerProcess{{PID: 5, Name: "fakebroker", Seconds: 0.16, CtxSwitches: &CtxSwitches{Voluntary: 4000, Involuntary: 800}}}, 4000, 4e6, true)
	b := Result{Label: "kfake", MessagesAcked: 4000, BrokerCPU: kfake, GeneratorCPU: &GeneratorCPU{WindowS: 8, Seconds: 1, Cores: 2, MachineBusyCores: 0.4}}
	c := Result{Label: "remote"}
	runs := []*Run{{Result: a}, {Result: b}, {Result: c}}
	var out bytes.Buffer
	WriteCompare(&out, runs)
	text := out.String()
	for _, re := range []string{`(?m)^\s*broker CPU-µs/msg\s+80\.0\s+40\.0\s+-\s*$`, `(?m)^\s*broker ctx switches/msg\s+2\.40\s+1\.20\s+-\s*$`,
		`(?m)^\s*broker CPU-µs/msg\s+x0\.50\s+-\s*$`, `(?m)^\s*broker ctx switches/msg\s+x0\.50\s+-\s*$`,
		`(?m)^\s*machine busy cores\s+1\.60\s+0\.40\s+-\s*$`, `(?m)^\s*machine busy cores\s+x0\.25\s+-\s*$`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("compare lacks %s:\n%s", re, text)
		}
	}
	page := string(RenderCompareHTML(runs))
	for _, want := range []string{`<tr data-metric="broker CPU-µs/msg"><th>broker CPU-µs/msg</th><td class="n">80.000</td><td class="n">40.000 (x0.50)</td><td class="n">-</td></tr>`,
		`<tr data-metric="broker ctx switches/msg"><th>broker ctx switches/msg</th><td class="n">2.400</td><td class="n">1.200 (x0.50)</td><td class="n">-</td></tr>`,
		`<tr data-metric="machine busy cores"><th>machine busy cores</th><td class="n">1.600</td><td class="n">0.400 (x0.25)</td><td class="n">-</td></tr>`} {
		if !strings.Contains(page, want) {
			t.Errorf("compare.html lacks %s", want)
		}
	}
}

// contended is a run on a 2-core machine: brokers 1.48 and generator
// 0.45 cores over an 8 s window.
func contended() *Result {
	return &Result{Label: "busy", MessagesAcked: 8000, SLA: SLA{TargetP99Ms: 10}, AckLatencyMs: Percentiles{Count: 8000, P99: 27.5},
		BrokerCPU:    NewBrokerCPU(8, []BrokerProcess{{PID: 3, Seconds: 11.84}}, 8000, 8e6, true),
		GeneratorCPU: &GeneratorCPU{WindowS: 8, Seconds: 3.6, Cores: 2, Processes: 1}}
}

// TestContentionNote: when brokers and generator on one machine used more
// than 90% of its cores, the verdict says so next to the p99, in the
// terminal and the page; the verdict itself stays the p99's.
func TestContentionNote(t *testing.T) {
	const note = "CPU contention: brokers 1.48 + generator 0.45 of 2 cores (96%): this run measured the machine, not the broker"
	r := contended()
	if got := Verdict(r); got != "SLA FAIL: ack p99 27.500 ms (target 10.000 ms), 0 errors — "+note {
		t.Fatalf("verdict %q", got)
	}
	v := VerdictOf(r)
	if v.Pass || v.Note != note || len(v.Reasons) != 1 || !strings.HasSuffix(v.Headline(r), "target 10.000 ms — "+note) {
		t.Fatalf("verdict %+v, headline %q", v, v.Headline(r))
	}
	page := string(RenderHTMLMust(t, &Run{Result: *r}))
	if !strings.Contains(page, `<p id="contention">`+note+`</p></div>`) {
		t.Errorf("report.html verdict lacks the note")
	}
	// A passing p99 passes under contention too; the note stays.
	r.AckLatencyMs.P99, r.SLA.Pass = 4, true
	if v := VerdictOf(r); !v.Pass || v.Note != note || !strings.HasPrefix(Verdict(r), "SLA PASS") {
		t.Fatalf("passing run under contention: %+v %q", v, Verdict(r))
	}
	// Below 90%, brokers elsewhere, or a generator of unknown machine: no note.
	for name, mod := range map[string]func(r *Result){
		"under 90%":      func(r *Result) { r.BrokerCPU.Seconds = 10.0 }, // 1.25 + 0.45 = 85%
		"remote brokers": func(r *Result) { r.BrokerCPU.SameHost = false },
		"merged":         func(r *Result) { r.GeneratorCPU.Cores = 0 },
		"no generator":   func(r *Result) { r.GeneratorCPU = nil },
		"no broker CPU":  func(r *Result) { r.BrokerCPU = nil },
		"empty window":   func(r *Result) { r.BrokerCPU.WindowS = 0 },
	} {
		r := contended()
		mod(r)
		if v := VerdictOf(r); v.Note != "" || strings.Contains(Verdict(r), "contention") {
			t.Errorf("%s: note %q", name, v.Note)
		}
	}
	// Brokers and generator under 90%, but the whole machine over it: the
	// kernel's own work (block completions, writeback, softirq) counts,
	// and the note names it.
	r = contended()
	r.BrokerCPU.Seconds = 10.0 // 1.25 + 0.45 = 85%
	r.GeneratorCPU.MachineBusyCores = 1.9
	const kernelNote = "CPU contention: brokers 1.25 + generator 0.45 + the kernel's threads and other work 0.20 of 2 cores (95%): this run measured the machine, not the broker"
	if v := VerdictOf(r); v.Note != kernelNote {
		t.Fatalf("machine-wide contention: note %q, want %q", v.Note, kernelNote)
	}
	var sum bytes.Buffer
	WriteSummary(&sum, r)
	if !regexp.MustCompile(`machine CPU\s+1\.90 cores busy of 2`).MatchString(sum.String()) {
		t.Fatalf("summary lacks the machine's CPU:\n%s", sum.String())
	}
	if page := string(RenderHTMLMust(t, &Run{Result: *r})); !strings.Contains(page, "1.90 cores busy of 2") {
		t.Errorf("report.html lacks the machine's CPU")
	}
	r.GeneratorCPU.MachineBusyCores = 1.7 // 85%: no note
	if v := VerdictOf(r); v.Note != "" {
		t.Fatalf("machine at 85%%: note %q", v.Note)
	}
	// A sweep names its contended rows.
	s := &Result{SLA: SLA{TargetP99Ms: 10}, Sweep: []SweepRow{
		{Partitions: 8, Pass: true, BrokerCPU: contended().BrokerCPU, GeneratorCPU: &GeneratorCPU{WindowS: 8, Seconds: 0.1, Cores: 2}},
		{Partitions: 64, BrokerCPU: contended().BrokerCPU, GeneratorCPU: contended().GeneratorCPU}}}
	var out bytes.Buffer
	WriteSummary(&out, s)
	want := "CPU contention at 64 partitions (96%) of 2 cores (brokers, generator and, where read, the kernel's own work): those rows measured the machine, not the broker"
	if VerdictOf(s).Note != want || !strings.Contains(out.String(), want) || !regexp.MustCompile(`(?m)^\s*64 .* 96% of 2 !`).MatchString(out.String()) ||
		!regexp.MustCompile(`(?m)^\s*8 .* 75% of 2 `).MatchString(out.String()) {
		t.Fatalf("sweep note %q:\n%s", VerdictOf(s).Note, out.String())
	}
}

// TestMergeCounters: merging runs sums the generators' CPU and leaves the
// brokers' out with a warning (each run measured them over its own
// window); one run keeps its own.
func TestMergeCounters(t *testing.T) {
	a, b := contended(), contended()
	b.GeneratorCPU.Seconds, b.GeneratorCPU.WindowS = 2, 9
	m, err := Merge([]*Run{{Result: *a, Dir: "a"}, {Result: *b, Dir: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	g := m.Result.GeneratorCPU
	if g == nil || g.Seconds != 5.6 || g.WindowS != 9 || g.Cores != 0 || g.Processes != 2 {
		t.Fatalf("merged generator %+v", g)
	}
	if m.Result.BrokerCPU != nil || !strings.Contains(strings.Join(m.Result.Warnings, "\n"), "broker CPU and context switches left out: each run measured the brokers over its own window (see a, b)") {
		t.Fatalf("merged broker CPU %+v, warnings %q", m.Result.BrokerCPU, m.Result.Warnings)
	}
	if VerdictOf(&m.Result).Note != "" {
		t.Fatal("a merge of generators on unknown machines notes contention")
	}
	one, err := Merge([]*Run{{Result: *a, Dir: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if one.Result.BrokerCPU != a.BrokerCPU || len(one.Result.Warnings) != 0 {
		t.Fatalf("one run lost its broker CPU: %+v %q", one.Result.BrokerCPU, one.Result.Warnings)
	}
}
