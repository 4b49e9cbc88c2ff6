package loadgen

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/results"
)

// runCounters runs the load generator (Execute, as `ringlog loadgen`
// does) for 2 s against b with cfg's broker sources set by mod, and
// returns result.json and the printed summary.
func runCounters(t *testing.T, b *LocalBroker, mod func(cfg *Config)) (*results.Result, string) {
	t.Helper()
	cfg := testConfig([]string{b.Addr})
	cfg.Partitions = 2
	mod(&cfg)
	out := t.TempDir()
	var stdout bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Execute(ctx, Options{Config: cfg, Out: out}, &stdout, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.MessagesAcked == 0 || res.Errors != 0 {
		t.Fatalf("acked %d, errors %d (%s)", res.MessagesAcked, res.Errors, res.FirstError)
	}
	return res, stdout.String()
}

// checkProcess: the broker process pid did work in the window, and its
// per-message numbers are its counts over the messages acknowledged.
func checkProcess(t *testing.T, res *results.Result, p results.BrokerProcess, pid int) {
	t.Helper()
	sw := p.CtxSwitches
	if p.PID != pid || p.Seconds <= 0 || sw == nil || sw.Total() <= 0 || len(sw.ByThread) == 0 {
		t.Fatalf("broker %+v switches %+v", p, sw)
	}
	acked := float64(res.MessagesAcked)
	if math.Abs(p.CPUMicrosPerMsg-p.Seconds*1e6/acked) > 1e-6 || math.Abs(sw.PerMsg-float64(sw.Total())/acked) > 1e-9 || sw.PerMsg <= 0 {
		t.Fatalf("per message: %.3f CPU-µs (%.3f s / %.0f), %.4f switches (%d / %.0f)", p.CPUMicrosPerMsg, p.Seconds, acked, sw.PerMsg, sw.Total(), acked)
	}
}

// TestBrokerPidCounters: `loadgen --broker-pid` against a broker process
// on this machine (the fakebroker, which is not ringlog, or the real
// binary with RINGLOG_TEST_BROKER_BIN) puts that process's CPU and context
// switches per acknowledged message into result.json and the summary,
// with the generator's own CPU and the machine's cores.
func TestBrokerPidCounters(t *testing.T) {
	b := startBroker(t)
	res, summary := runCounters(t, b, func(cfg *Config) { cfg.BrokerPIDs = []int{b.Pid()} })
	c := res.BrokerCPU
	if c == nil || c.Processes != 1 || len(c.Brokers) != 1 || !c.SameHost || c.MessagesAcked != res.MessagesAcked ||
		c.WindowS < 1.5 || c.CtxSwitches == nil || c.CtxSwitches.ExitedCounted {
		t.Fatalf("broker_cpu %+v\n%s", c, summary)
	}
	checkProcess(t, res, c.Brokers[0], b.Pid())
	if c.CPUMicrosPerMsg != c.Brokers[0].CPUMicrosPerMsg || c.CtxSwitches.PerMsg != c.Brokers[0].CtxSwitches.PerMsg {
		t.Fatalf("one broker: sum %+v differs from the broker %+v", c, c.Brokers[0])
	}
	g := res.GeneratorCPU
	if g == nil || g.Seconds <= 0 || g.Cores < 1 || g.WindowS < 1.5 {
		t.Fatalf("generator_cpu %+v", g)
	}
	// The whole machine ran at least the generator and the broker.
	if busy := g.MachineBusyCores; busy > float64(g.Cores)+0.01 || busy < (g.Seconds+c.Seconds)/g.WindowS*0.8 {
		t.Fatalf("machine busy %.2f cores, generator %.2f + broker %.2f CPU-s over %.1f s", busy, g.Seconds, c.Seconds, g.WindowS)
	}
	for _, want := range []string{"per acked msg", "ctx switches", "generator CPU", "machine CPU"} {
		if !strings.Contains(summary, want) {
			t.Fatalf("summary lacks %q:\n%s", want, summary)
		}
	}
}

// TestBrokerAdminCounters: `loadgen --broker-admin` reads a ringlog
// broker's /v1/process/counters; the same process read by pid over the
// same window agrees on its CPU time, and the admin reading counts
// exited threads.
func TestBrokerAdminCounters(t *testing.T) {
	if os.Getenv("RINGLOG_TEST_BROKER_BIN") == "" {
		t.Skip("the counters endpoint is ringlog's: set RINGLOG_TEST_BROKER_BIN (make build first)")
	}
	b := startBroker(t)
	res, summary := runCounters(t, b, func(cfg *Config) {
		cfg.BrokerPIDs, cfg.CounterAdmins = []int{b.Pid()}, []string{b.AdminAddr}
	})
	c := res.BrokerCPU
	if c == nil || len(c.Brokers) != 2 || !c.SameHost {
		t.Fatalf("broker_cpu %+v\n%s", c, summary)
	}
	byPid, byAdmin := c.Brokers[0], c.Brokers[1]
	checkProcess(t, res, byPid, b.Pid())
	checkProcess(t, res, byAdmin, b.Pid())
	if byAdmin.Admin != b.AdminAddr || !byAdmin.CtxSwitches.ExitedCounted || byPid.CtxSwitches.ExitedCounted {
		t.Fatalf("sources: %+v / %+v", byPid, byAdmin)
	}
	// /proc/PID/stat counts in 10 ms ticks; the two are read one after
	// the other at each end of the window.
	if d := math.Abs(byPid.Seconds - byAdmin.Seconds); d > 0.05+0.2*byAdmin.Seconds {
		t.Fatalf("CPU by pid %.3f s, by admin %.3f s", byPid.Seconds, byAdmin.Seconds)
	}
}
