package broker

import (
	"encoding/json"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/ringlog/ringlog/internal/procstat"
)

// TestProcessCounters: the admin listener serves the process's own
// counters (getrusage totals, live threads by name) and /metrics exports
// its context switches by kind.
func TestProcessCounters(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("per-thread counters need /proc")
	}
	cfg, _ := lifecycleConfig(t)
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	code, body := adminGet(t, b, procstat.CountersPath)
	if code != 200 {
		t.Fatalf("%s: %d %s", procstat.CountersPath, code, body)
	}
	var s procstat.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var live uint64
	for _, th := range s.Threads {
		live += th.Voluntary + th.Involuntary
	}
	if s.PID != os.Getpid() || !s.ExitedIncluded || s.CPUSeconds <= 0 || s.BootID == "" || s.Cores < 1 ||
		len(s.Threads) < 2 || s.Voluntary+s.Involuntary < live || live == 0 {
		t.Fatalf("counters: %s", body)
	}
	_, metrics := adminGet(t, b, "/metrics")
	for _, kind := range []string{"voluntary", "involuntary"} {
		m := regexp.MustCompile(`(?m)^ringlog_process_context_switches_total\{kind="` + kind + `"\} (\S+)$`).FindSubmatch(metrics)
		if m == nil {
			t.Fatalf("/metrics lacks the %s context switches", kind)
		}
		if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || (kind == "voluntary" && v <= 0) {
			t.Fatalf("%s context switches %q", kind, m[1])
		}
	}
}
