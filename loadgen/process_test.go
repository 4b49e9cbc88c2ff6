package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/loadgen/nullsink"
	"github.com/ringlog/ringlog/results"
)

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// brokerBin is RINGLOG_TEST_BROKER_BIN (the real ringlog) or else the
// fakebroker built once for this test binary.
func brokerBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("RINGLOG_TEST_BROKER_BIN"); bin != "" {
		return bin
	}
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakebroker-")
		if err != nil {
			fakeErr = err
			return
		}
		fakeBin = filepath.Join(dir, "fakebroker")
		out, err := exec.Command("go", "build", "-o", fakeBin, "./internal/fakebroker").CombinedOutput()
		if err != nil {
			fakeErr = err
			t.Logf("%s", out)
		}
	})
	if fakeErr != nil {
		t.Fatalf("build fakebroker: %v", fakeErr)
	}
	return fakeBin
}

func startBroker(t *testing.T) *LocalBroker {
	t.Helper()
	var log bytes.Buffer
	b, err := StartLocalBroker(brokerBin(t), t.TempDir(), &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Cleanup(func() { b.Stop() })
	return b
}

// TestStalledBrokerShowsInTail pauses the broker process for 600 ms in the
// middle of the measured window. Because latency is measured from each
// message's intended send time, every message scheduled during the pause
// records the stall: a closed-loop generator would record it once.
func TestStalledBrokerShowsInTail(t *testing.T) {
	b := startBroker(t)
	cfg := testConfig([]string{b.Addr})
	cfg.Partitions = 1
	cfg.Duration = 3 * time.Second
	cfg.StartAt = time.Now().Add(1500 * time.Millisecond)
	const pause = 600 * time.Millisecond
	go func() {
		// Wall-clock schedule: a second into the measured window, the
		// broker stops for the 600 ms whose stall the tail must show.
		time.Sleep(time.Until(cfg.StartAt.Add(cfg.Warmup + time.Second)))
		syscall.Kill(b.Pid(), syscall.SIGSTOP)
		time.Sleep(pause)
		syscall.Kill(b.Pid(), syscall.SIGCONT)
	}()
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	t.Logf("ack %+v send delay %+v", r.AckLatencyMs, r.SendDelayMs)
	if r.Errors != 0 {
		t.Fatalf("errors %d: %s", r.Errors, r.FirstError)
	}
	// 20% of the window is stalled: messages sent during it waited from
	// 0 to 600 ms, so p99 sits near 570 ms and p90 near 300 ms.
	if r.AckLatencyMs.Max < 550 || r.AckLatencyMs.P99 < 400 || r.AckLatencyMs.P90 < 150 {
		t.Fatalf("stall missing from the tail: %+v", r.AckLatencyMs)
	}
	// The generator itself kept its schedule while the broker was paused:
	// a generator that waited for the broker would have sent the
	// messages due in the pause up to 600 ms late. Scheduling noise on a
	// busy machine (make test runs packages side by side on two cores)
	// can push the send delay's p99 past the 5 ms at which a run is
	// called saturated, so the bound here is the stall's, not that one.
	if limit := float64(pause/time.Millisecond) / 4; r.SendDelayMs.Max > limit {
		t.Fatalf("the stall reached the generator's schedule: send delay %+v, max over %.0f ms", r.SendDelayMs, limit)
	}
	if r.GeneratorSaturated {
		t.Logf("send delay p99 %.2f ms: the machine was busy (%s)", r.SendDelayMs.P99, r.SaturationReason)
	}
}

// TestBenchCommandWritesReport: Bench (`ringlog bench`) with one broker
// writes the report directory and prints the verdict.
func TestBenchCommandWritesReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench")
	bc := DefaultBenchConfig()
	bc.BrokerBin, bc.Brokers, bc.Out = brokerBin(t), 1, out
	bc.Workload.Duration, bc.Workload.Warmup, bc.Workload.Rate = 1500*time.Millisecond, 500*time.Millisecond, 1000
	bc.Workload.Partitions, bc.Workload.Quiet = 2, true
	var stdout bytes.Buffer
	if err := Bench(context.Background(), bc, &stdout); err != nil {
		t.Fatal(err)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.MessagesAcked != 1500 || res.Errors != 0 || res.E2ELatencyMs == nil || res.MessagesConsumed != 1500 {
		t.Fatalf("bench result: acked %d consumed %d errors %d", res.MessagesAcked, res.MessagesConsumed, res.Errors)
	}
	if os.Getenv("RINGLOG_TEST_BROKER_BIN") == "" && res.Environment.BrokerIOPath != "kfake-memory" {
		t.Fatalf("environment lacks the broker's /healthz: %+v", res.Environment)
	}
	summary := stdout.String()
	if !strings.Contains(summary, "SLA ") {
		t.Fatalf("no verdict in output:\n%s", summary)
	}
}

// realBrokerBin is the real ringlog binary: RINGLOG_TEST_BROKER_BIN (set
// by `make test`) or RINGLOG_TEST_BIN (the integration tests' variable).
// The fakebroker is one kfake node and cannot form a cluster, so tests
// that need several brokers skip without one.
func realBrokerBin(t *testing.T) string {
	t.Helper()
	for _, v := range []string{"RINGLOG_TEST_BROKER_BIN", "RINGLOG_TEST_BIN"} {
		if bin := os.Getenv(v); bin != "" {
			return bin
		}
	}
	t.Skip("needs the ringlog binary: set RINGLOG_TEST_BROKER_BIN (make build first)")
	return ""
}

// TestBenchThreeBrokers runs Bench (`ringlog bench`) the default way:
// three brokers, the topic at RF=3 with min.insync.replicas 2, acks=all.
func TestBenchThreeBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-broker cluster")
	}
	bin := realBrokerBin(t)
	out := filepath.Join(t.TempDir(), "bench")
	bc := DefaultBenchConfig()
	bc.BrokerBin, bc.Out = bin, out
	bc.Workload.Duration, bc.Workload.Warmup, bc.Workload.Rate = 2*time.Second, 500*time.Millisecond, 1000
	bc.Workload.Partitions, bc.Workload.Quiet = 3, true
	var stdout bytes.Buffer
	if err := Bench(context.Background(), bc, &stdout); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "bench: 3 broker(s), topic replication factor 3, min.insync.replicas 2, acks all") {
		t.Fatalf("bench did not announce the default cluster:\n%s", stdout.String())
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	w := res.Workload
	if w["replication_factor"] != "3" || w["topic_config.min.insync.replicas"] != "2" || w["acks"] != "all" {
		t.Fatalf("workload %v: want replication_factor 3, topic_config.min.insync.replicas 2, acks all", w)
	}
	if res.Errors != 0 || res.MessagesAcked != 2000 || res.MessagesConsumed != 2000 {
		t.Fatalf("acked %d consumed %d errors %d (%s)", res.MessagesAcked, res.MessagesConsumed, res.Errors, res.FirstError)
	}
	for _, f := range []string{results.ResultFile, results.AckHgrmFile, results.AckLogFile, results.E2EHgrmFile,
		results.E2ELogFile, results.SendDelayHgrmFile, results.SendDelayLogFile, results.HTMLFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("result file: %v", err)
		}
	}
	if res.Environment.BrokerIOPath == "" || res.Environment.BrokerFsync == "" {
		t.Fatalf("environment lacks the broker's /healthz: %+v", res.Environment)
	}
	// The three brokers split this machine's cores, and the report says so.
	if want := max(1, runtime.GOMAXPROCS(0)/3); res.Environment.BrokerMaxProcs != want ||
		res.Environment.BrokerCPUs != runtime.NumCPU() || !strings.Contains(stdout.String(), fmt.Sprintf("GOMAXPROCS %d:", want)) {
		t.Fatalf("broker GOMAXPROCS %d of %d CPUs, want %d of %d:\n%s", res.Environment.BrokerMaxProcs,
			res.Environment.BrokerCPUs, want, runtime.NumCPU(), stdout.String())
	}
	// The brokers run serve's default scheduling policy, and the
	// environment records it.
	if res.Environment.BrokerSchedPolicy != "batch" {
		t.Fatalf("broker scheduling policy %q, want batch (serve's default)", res.Environment.BrokerSchedPolicy)
	}
	// Every broker's counters, and their sum.
	c := res.BrokerCPU
	if c == nil || c.Processes != 3 || len(c.Brokers) != 3 || c.CtxSwitches == nil || c.CtxSwitches.PerMsg <= 0 {
		t.Fatalf("broker_cpu %+v", c)
	}
	// ringlog brokers are read through their admin endpoints, which count
	// the switches of threads that exited.
	for _, p := range c.Brokers {
		if p.Seconds <= 0 || p.CtxSwitches == nil || p.CtxSwitches.Total() <= 0 || p.Admin == "" || !p.CtxSwitches.ExitedCounted {
			t.Fatalf("broker %s: %+v", p.Label(), p)
		}
	}
}

// TestScaleOutMerge runs two generators against one broker with a shared
// --start-at and merges their reports.
func TestScaleOutMerge(t *testing.T) {
	b := startBroker(t)
	start := time.Now().Add(time.Second)
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	runs := make([]*results.Run, 2)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := testConfig([]string{b.Addr})
			cfg.Duration, cfg.Rate, cfg.StartAt = time.Second, float64(1000*(i+1)), start
			r, err := Run(context.Background(), cfg, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if err := r.Write(dirs[i]); err != nil {
				t.Error(err)
			}
			runs[i], _ = results.Load(dirs[i])
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	m, err := results.Merge(runs)
	if err != nil {
		t.Fatal(err)
	}
	if m.Result.MessagesAcked != 3000 || m.Result.TargetRate != 3000 {
		t.Fatalf("merged acked %d target %v", m.Result.MessagesAcked, m.Result.TargetRate)
	}
	// Same workload, started together: nothing to warn about.
	if len(m.Result.Warnings) != 0 {
		t.Fatalf("merge warned about runs started together: %q", m.Result.Warnings)
	}
	if got := results.MergeAll(m.Ack).TotalCount(); got != 3000 {
		t.Fatalf("merged histogram holds %d values", got)
	}
	if d := runs[0].Result.StartedAt.Sub(runs[1].Result.StartedAt); d > 50*time.Millisecond || d < -50*time.Millisecond {
		t.Fatalf("--start-at: runs started %v apart", d)
	}
}

func TestNullSink(t *testing.T) {
	for _, acks := range []int16{0, 1} {
		sink, err := nullsink.Listen("127.0.0.1:0", 4)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig([]string{sink.Addr()})
		cfg.Acks, cfg.Rate, cfg.Duration = acks, 20000, time.Second
		run, err := Run(context.Background(), cfg, nil)
		sink.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r := run.Result; r.MessagesAcked != 20000 || r.Errors != 0 || sink.Requests.Load() == 0 {
			b, _ := json.Marshal(r)
			t.Fatalf("acks=%d: %s", acks, b)
		}
	}
}
