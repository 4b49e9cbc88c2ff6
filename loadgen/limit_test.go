package loadgen

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ringlog/ringlog/results"
)

// fixedRun is a passing fixed-rate run: 100k msg/s of 1000 B, RF 3, on 3
// brokers, 10 ms target.
func fixedRun() *results.Result {
	return &results.Result{Label: "run", DurationS: 10, MessageSize: 1000, TargetRate: 100_000, AchievedRate: 100_000,
		MessagesAcked: 1_000_000, AckLatencyMs: results.Percentiles{Count: 1_000_000, P99: 4},
		SLA:      results.SLA{TargetP99Ms: 10, Pass: true},
		Workload: map[string]string{"replication_factor": "3", "cluster_brokers": "3"}}
}

func mustDiagnose(t *testing.T, r *results.Result, o DiagnoseOptions) *Diagnosis {
	t.Helper()
	d, err := Diagnose(r, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func evidenceHas(d *Diagnosis, limit, text string) bool {
	for _, e := range d.Evidence {
		if e.Limit == limit && strings.Contains(e.Detail, text) {
			return true
		}
	}
	return false
}

func TestDiagnoseNone(t *testing.T) {
	d := mustDiagnose(t, fixedRun(), DiagnoseOptions{NICBitsPerSec: 25e9})
	if d.Limit != LimitNone || !d.LowerBound || len(d.Evidence) != 0 {
		t.Fatalf("limit %q lower bound %v evidence %v, want none, lower bound", d.Limit, d.LowerBound, d.Evidence)
	}
	// 100k x 1000 B x 3 copies / 3 brokers = 0.1 GB/s written per broker;
	// out: 2 follower copies / 3 brokers.
	if d.BrokerWriteBps != 100e6 || d.BrokerOutBps != 200e6/3 || d.Agents != 1 || d.ClientHostBps != 100e6 {
		t.Fatalf("per broker write %v out %v, agents %d, per host %v", d.BrokerWriteBps, d.BrokerOutBps, d.Agents, d.ClientHostBps)
	}
	var out bytes.Buffer
	WriteDiagnosis(&out, d, 5e6)
	for _, want := range []string{"Limited by: none", "lower bound", "100000 msg/s (the achieved rate", "on 3 broker(s)", "takes 50 client hosts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The extrapolation uses the diagnosed per-broker rate: 15 GB/s / 0.1.
	c := Size(SizeInput{PeakRate: 5e6, AvgRate: 5e5, MessageBytes: 1000, RetentionDays: 7, Copies: 3})
	c.WithDiagnosis(d, Resources{})
	if c.BrokersForPeak != 150 {
		t.Fatalf("brokers for peak %d, want 150", c.BrokersForPeak)
	}
}

func TestDiagnoseGenerator(t *testing.T) {
	r := fixedRun()
	r.Agents = []results.AgentResult{{Name: "h1:7000", TargetRate: 50_000, AchievedRate: 50_000},
		{Name: "h2:7000", TargetRate: 50_000, AchievedRate: 41_000, Saturated: true, SaturationReason: "send delay p99 9 ms"}}
	r.SLA.Pass = false // a saturated generator's latencies do not blame the broker
	d := mustDiagnose(t, r, DiagnoseOptions{})
	if d.Limit != LimitGenerator || !evidenceHas(d, LimitGenerator, "h2:7000") || d.Evidence[0].Limit != LimitGenerator {
		t.Fatalf("limit %q evidence %v, want generator naming h2:7000 first", d.Limit, d.Evidence)
	}
	var out bytes.Buffer
	WriteDiagnosis(&out, d, 5e6)
	if !strings.Contains(out.String(), "Limited by: generator") || !strings.Contains(out.String(), "more agents") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// A host whose send delay grows over the window is falling behind before
// it reports saturation; the evidence comes from its part directory.
func TestDiagnoseSendDelayGrowth(t *testing.T) {
	dir := t.TempDir()
	start := time.Now().Add(-time.Minute).UnixMilli()
	var sd, ack []*hdr.Histogram
	for i := range 9 {
		h, a := results.NewHistogram(), results.NewHistogram()
		for _, x := range []*hdr.Histogram{h, a} {
			x.SetStartTimeMs(start + int64(i)*1000)
			x.SetEndTimeMs(start + int64(i+1)*1000)
		}
		lateUs := int64(100)
		if i >= 6 {
			lateUs = 3000
		}
		for range 100 {
			h.RecordValue(lateUs)
			a.RecordValue(1000)
		}
		sd, ack = append(sd, h), append(ack, a)
	}
	// Only what Load reads: result.json and the interval logs.
	h1 := filepath.Join(dir, "h1")
	if err := os.Mkdir(h1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteJSON(h1, fixedRun()); err != nil {
		t.Fatal(err)
	}
	for name, hs := range map[string][]*hdr.Histogram{results.AckLogFile: ack, results.SendDelayLogFile: sd} {
		var buf bytes.Buffer
		if err := results.WriteIntervalLog(&buf, start, hs); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h1, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := fixedRun()
	r.Agents = []results.AgentResult{{Name: "h1:7000", Dir: "h1"}}
	d := mustDiagnose(t, r, DiagnoseOptions{Dir: dir})
	if d.Limit != LimitGenerator || !evidenceHas(d, LimitGenerator, "grew from 0.1") {
		t.Fatalf("limit %q evidence %v notes %v, want generator from send-delay growth", d.Limit, d.Evidence, d.Notes)
	}
	// A part that cannot be found is said, not skipped silently.
	r.Agents[0].Dir = "gone"
	d = mustDiagnose(t, r, DiagnoseOptions{Dir: dir})
	if d.Limit != LimitNone || len(d.Notes) == 0 || !strings.Contains(strings.Join(d.Notes, ";"), "part gone not found") {
		t.Fatalf("limit %q notes %v", d.Limit, d.Notes)
	}
}

func TestDiagnoseNetwork(t *testing.T) {
	// 0.1 GB/s written per broker = 0.8 Gbit/s in: 80% of a 1 Gbit NIC;
	// the single client host sends 0.8 Gbit/s too.
	d := mustDiagnose(t, fixedRun(), DiagnoseOptions{NICBitsPerSec: 1e9})
	if d.Limit != LimitNetwork || !evidenceHas(d, LimitNetwork, "each broker receives") || !evidenceHas(d, LimitNetwork, "each client host sends") {
		t.Fatalf("limit %q evidence %v, want network", d.Limit, d.Evidence)
	}
	// Spread over 4 client hosts the hosts have room; the brokers do not.
	d = mustDiagnose(t, fixedRun(), DiagnoseOptions{NICBitsPerSec: 1e9, Agents: 4})
	if d.Limit != LimitNetwork || evidenceHas(d, LimitNetwork, "client host") {
		t.Fatalf("limit %q evidence %v, want network at the brokers only", d.Limit, d.Evidence)
	}
}

func TestDiagnoseBroker(t *testing.T) {
	r := fixedRun()
	r.SLA.Pass, r.AckLatencyMs.P99 = false, 25
	d := mustDiagnose(t, r, DiagnoseOptions{})
	if d.Limit != LimitBroker || d.LowerBound || d.MetTarget || !evidenceHas(d, LimitBroker, "ack p99 25 ms") {
		t.Fatalf("limit %q lower %v met %v evidence %v, want broker", d.Limit, d.LowerBound, d.MetTarget, d.Evidence)
	}
	var out bytes.Buffer
	WriteDiagnosis(&out, d, 5e6)
	if !strings.Contains(out.String(), "Limited by: broker") || !strings.Contains(out.String(), "did not meet its target") {
		t.Fatalf("output:\n%s", out.String())
	}
	// Broker CPU near the host's cores (bench: brokers beside the
	// generator) limits a run that met its target.
	r = fixedRun()
	r.Environment.Cores = 4
	r.BrokerCPU = &results.BrokerCPU{Processes: 3, WindowS: 10, Seconds: 35}
	d = mustDiagnose(t, r, DiagnoseOptions{})
	if d.Limit != LimitBroker || !evidenceHas(d, LimitBroker, "3.50 of 4 cores") {
		t.Fatalf("limit %q evidence %v, want broker CPU", d.Limit, d.Evidence)
	}
	// With 8 cores per broker host it is not the limit.
	d = mustDiagnose(t, r, DiagnoseOptions{BrokerCores: 8})
	if d.Limit != LimitNone {
		t.Fatalf("limit %q evidence %v, want none with 24 cores", d.Limit, d.Evidence)
	}
}

func TestDiagnoseFindMax(t *testing.T) {
	r := fixedRun()
	r.FindMax = &results.FindMax{MaxPassingRate: 400_000, TargetP99Ms: 10, Steps: []results.Step{
		{TargetRate: 200_000, P99Ms: 3, Pass: true}, {TargetRate: 800_000, P99Ms: 30},
		{TargetRate: 400_000, P99Ms: 8, Pass: true}, {TargetRate: 600_000, AchievedRate: 600_000, P99Ms: 14, CPUPerGB: 1},
	}}
	d := mustDiagnose(t, r, DiagnoseOptions{})
	if d.Rate != 400_000 || d.Limit != LimitBroker || !evidenceHas(d, LimitBroker, "600000 msg/s offered") {
		t.Fatalf("rate %v limit %q evidence %v, want broker at the 600k step", d.Rate, d.Limit, d.Evidence)
	}
	r.FindMax.Steps[3].Saturated = true
	if d = mustDiagnose(t, r, DiagnoseOptions{}); d.Limit != LimitGenerator || !d.LowerBound {
		t.Fatalf("limit %q, want generator", d.Limit)
	}
	r.FindMax.MaxPassingRate = 0
	if _, err := Diagnose(r, DiagnoseOptions{}); err == nil {
		t.Fatal("no passing rate: want an error")
	}
	r.FindMax, r.Sweep = nil, []results.SweepRow{{Partitions: 8, Dir: "p8"}}
	if _, err := Diagnose(r, DiagnoseOptions{}); err == nil || !strings.Contains(err.Error(), "p8") {
		t.Fatalf("sweep: %v, want an error naming p8", err)
	}
}

func TestDiagnoseIncomplete(t *testing.T) {
	r := fixedRun()
	r.Incomplete, r.IncompleteReason = true, "1 of 2 agents lost"
	r.Agents = []results.AgentResult{{Name: "h1:7000"}, {Name: "h2:7000", Missing: true, MissingReason: "connection lost at 4s"}}
	_, err := Diagnose(r, DiagnoseOptions{})
	if !errors.Is(err, ErrSizeIncomplete) || !strings.Contains(err.Error(), "h2:7000 (connection lost at 4s)") || !strings.Contains(err.Error(), "--allow-incomplete") {
		t.Fatalf("err %v, want the refusal naming h2:7000", err)
	}
	d := mustDiagnose(t, r, DiagnoseOptions{AllowIncomplete: true})
	if len(d.Notes) == 0 || !strings.Contains(d.Notes[0], "INCOMPLETE") || d.Agents != 1 || !strings.Contains(d.AgentsFrom, "1 missing not counted") {
		t.Fatalf("notes %v agents %d (%s), want 1 agent left", d.Notes, d.Agents, d.AgentsFrom)
	}
	// A missing agent alone makes the run incomplete.
	r.Incomplete = false
	if _, err := Diagnose(r, DiagnoseOptions{}); !errors.Is(err, ErrSizeIncomplete) {
		t.Fatalf("err %v, want ErrSizeIncomplete", err)
	}
}

func TestDiagnoseAgentCount(t *testing.T) {
	r := fixedRun()
	for _, tc := range []struct {
		name   string
		set    func(r *results.Result)
		flag   int
		want   int
		source string
	}{
		{"single", func(r *results.Result) {}, 0, 1, "one generator"},
		{"client hosts", func(r *results.Result) { r.Environment.ClientHosts = 3 }, 0, 3, "client_hosts"},
		{"merged", func(r *results.Result) { r.MergedFrom = []string{"a", "b"} }, 0, 2, "merged_from"},
		{"agents", func(r *results.Result) { r.Agents = make([]results.AgentResult, 4) }, 0, 4, "agents the run recorded"},
		{"flag", func(r *results.Result) { r.Agents = make([]results.AgentResult, 4) }, 5, 5, "--agents"},
	} {
		c := *r
		c.Environment, c.Agents, c.MergedFrom = r.Environment, nil, nil
		tc.set(&c)
		d := mustDiagnose(t, &c, DiagnoseOptions{Agents: tc.flag})
		if d.Agents != tc.want || !strings.Contains(d.AgentsFrom, tc.source) || d.PerAgentRate != 100_000/float64(tc.want) {
			t.Errorf("%s: %d agents from %q (%v per agent), want %d from %q", tc.name, d.Agents, d.AgentsFrom, d.PerAgentRate, tc.want, tc.source)
		}
	}
}
