package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepReport: a sweep result round-trips through its directory, and
// the summary, `report` and report.html show one row per count, the
// charts on a log axis labelled with the counts, and sticky rows labelled.
func TestSweepReport(t *testing.T) {
	row := func(n int, p99, perGB float64, mode string) SweepRow {
		return SweepRow{Partitions: n, Dir: filepathFor(n), TargetRate: 20000, AchievedRate: 19990,
			AckLatencyMs: Percentiles{Count: 1000, P50: p99 / 3, P99: p99, P999: 2 * p99, Max: 3 * p99},
			Spread:       &PartitionSpread{Mode: mode, Keys: 8 * n, TopicPartitions: n, Written: n, MinShare: 0.9 / float64(n), MaxShare: 1.1 / float64(n)},
			BrokerCPU:    &BrokerCPU{Processes: 1, WindowS: 8, Seconds: perGB * 0.16, PerGB: perGB}, Pass: p99 <= 10}
	}
	res := &Result{Label: "sweep-test", TargetRate: 20000, MessageSize: 1000, SLA: SLA{TargetP99Ms: 10},
		Workload: map[string]string{"duration": "8s", "warmup": "2s", "keys": "auto"},
		Sweep:    []SweepRow{row(8, 4.5, 6.1, SpreadKeyed), row(64, 8.25, 7.3, SpreadKeyed), row(1024, 31.5, 9.9, SpreadSticky)}}
	dir := t.TempDir()
	if err := WriteSweepDir(dir, res); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Report(&out, dir, 5); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"partition sweep sweep-test", "64/64", "8.250", "31.500", "63.000", "7.3",
		"sticky (null keys)", "pass at 8, 64 partitions; fail at 1024 partitions"} {
		if !strings.Contains(text, want) {
			t.Fatalf("report lacks %q:\n%s", want, text)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(page, []byte("<svg")); n != 2 {
		t.Fatalf("%d charts, want latency and CPU per GB", n)
	}
	for _, want := range []string{`<table id="sweep"`, ">1024</text>", "partitions (log scale)", `href="p64/report.html"`, "<td>sticky (null keys)</td>", "9.9"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Fatalf("report.html lacks %q", want)
		}
	}
	if got := bytes.Count(page, []byte("<tr><td")); got != 3 {
		t.Fatalf("%d table rows, want 3", got)
	}
}

func filepathFor(n int) string { return fmt.Sprintf("p%d", n) }

// TestSummaryShowsSpreadAndCPU: a run's summary and compare table name its
// workload (keyed over N partitions, or sticky) and its broker CPU per GB.
func TestSummaryShowsSpreadAndCPU(t *testing.T) {
	r := &Result{Label: "one", Spread: &PartitionSpread{Mode: SpreadKeyed, Keys: 512, TopicPartitions: 64, Written: 64, MinShare: 0.0155, MaxShare: 0.0157},
		BrokerCPU: &BrokerCPU{Processes: 3, WindowS: 8, Seconds: 1.6, PerGB: 10.1}}
	var out bytes.Buffer
	WriteSummary(&out, r)
	for _, want := range []string{"keyed over 64 partitions", "64 of 64 partitions received data", "min 1.55% max 1.57%", "10.1 CPU-s/GB", "3 broker process(es)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	sticky := &Result{Label: "two", Spread: &PartitionSpread{Mode: SpreadSticky, TopicPartitions: 8, Written: 3}}
	WriteCompare(&out, []*Run{{Result: *r}, {Result: *sticky}})
	if !strings.Contains(out.String(), "sticky (null keys)") || !strings.Contains(out.String(), "10.1") {
		t.Fatalf("compare table:\n%s", out.String())
	}
}
