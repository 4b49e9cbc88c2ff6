package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ringlog/ringlog/results"
)

// TestInterruptWritesPartialResult cancels a 30 s loadgen after about a
// second, as Ctrl-C does: the command must return within a few seconds,
// still write the result files, and flag the result as interrupted with
// rates over the time actually measured.
func TestInterruptWritesPartialResult(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func(v, cm string) { Version, Commit = v, cm }(Version, Commit)
	Version, Commit = "v-test", "0123abcd" // item of the environment, checked below

	out := filepath.Join(t.TempDir(), "run")
	o := DefaultOptions()
	o.Out = out
	o.Config.Bootstrap, o.Config.Topic, o.Config.Partitions = c.ListenAddrs()[:1], "lg-interrupt", 2
	o.Config.MessageSize, o.Config.Duration, o.Config.Warmup, o.Config.Quiet = 200, 30*time.Second, 200*time.Millisecond, true
	ctx, cancel := context.WithCancel(context.Background())
	const rate = 2000
	o.Config.Rate = rate
	var cancelledAt atomic.Int64
	time.AfterFunc(1200*time.Millisecond, func() { cancelledAt.Store(time.Now().UnixNano()); cancel() })
	start := time.Now()
	err = Execute(ctx, o, io.Discard, io.Discard)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("loadgen returned %v, want ErrInterrupted", err)
	}
	if elapsed > 6*time.Second {
		t.Fatalf("interrupted loadgen returned after %v", elapsed)
	}
	raw, err := os.ReadFile(filepath.Join(out, results.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["interrupted"] != true {
		t.Fatalf("result.json lacks \"interrupted\": true:\n%s", raw)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	// Measured from the end of the warmup to the cancel.
	want := time.Unix(0, cancelledAt.Load()).Sub(res.StartedAt).Seconds()
	if res.DurationS < want-0.1 || res.DurationS > want+0.1 || res.DurationS <= 0 {
		t.Fatalf("measured duration %.3f s, want %.3f s (end of warmup to the cancel)", res.DurationS, want)
	}
	if res.Errors != 0 || res.AchievedRate < 0.8*rate || res.AchievedRate > 1.2*rate {
		t.Fatalf("achieved %.0f msg/s of %d over %.2f s, errors %d (%s)", res.AchievedRate, rate, res.DurationS, res.Errors, res.FirstError)
	}
	if res.MessagesAcked == 0 || res.AckLatencyMs.Count != res.MessagesAcked {
		t.Fatalf("acked %d, ack histogram %d", res.MessagesAcked, res.AckLatencyMs.Count)
	}
	for _, f := range []string{results.AckHgrmFile, results.AckLogFile, results.SendDelayHgrmFile, results.HTMLFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("result file: %v", err)
		}
	}
	if env := res.Environment; env.LoadgenCommit != "0123abcd" || env.LoadgenVersion != "v-test" {
		t.Fatalf("environment version %q commit %q, want the configured ones", env.LoadgenVersion, env.LoadgenCommit)
	}
}

// TestInterruptWithHungBroker stops the broker process (SIGSTOP) so that
// every request frame of the producer is out and the producer waits for
// one; an interrupt must still end the run within the bounded drain and
// count what never came back as errors.
func TestInterruptWithHungBroker(t *testing.T) {
	b := startBroker(t)
	cfg := testConfig([]string{b.Addr})
	cfg.Duration = 30 * time.Second
	cfg.DrainTimeout = 30 * time.Second // the interrupt, not this, must end the drain
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Wall-clock schedule of the run: a second into the measured
		// window the broker stops, and a second of it hung, with every
		// request frame out, the run is interrupted.
		time.Sleep(cfg.Warmup + time.Second)
		syscall.Kill(b.Pid(), syscall.SIGSTOP)
		time.Sleep(time.Second)
		cancel()
	}()
	t.Cleanup(func() { syscall.Kill(b.Pid(), syscall.SIGCONT) })
	start := time.Now()
	run, err := Run(ctx, cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	// Setup + 1.5 s running + 1 s hung + interruptDrain + closing.
	if d := time.Since(start); d > cfg.Warmup+2*time.Second+interruptDrain+3*time.Second {
		t.Fatalf("Run returned %v after the start", d)
	}
	r := run.Result
	if !r.Interrupted || r.Errors == 0 || r.DurationS > 3 {
		t.Fatalf("interrupted %v, errors %d (%s), measured %.2f s", r.Interrupted, r.Errors, r.FirstError, r.DurationS)
	}
}

// TestEnvironmentRecordsVersion: the version and commit main links in
// reach result.json's environment (builds use -buildvcs=false, so the
// build info has no revision).
func TestEnvironmentRecordsVersion(t *testing.T) {
	defer func(v, cm string) { Version, Commit = v, cm }(Version, Commit)
	Version, Commit = "v1.2.3", "feedbeef"
	if env := Environment("", "lean"); env.LoadgenVersion != "v1.2.3" || env.LoadgenCommit != "feedbeef" {
		t.Fatalf("environment %+v", env)
	}
	// main's placeholder never hides a revision the build info knows;
	// without one it is recorded as is.
	Commit = "unknown"
	if env := Environment("", "lean"); env.LoadgenCommit == "" {
		t.Fatalf("commit unrecorded: %+v", env)
	}
}

// TestInterruptKgoAndFindMax: the kgo client path stops on an interrupt
// too, and an interrupted --find-max still writes what it found.
func TestInterruptKgoAndFindMax(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := testConfig(c.ListenAddrs())
	cfg.Client, cfg.Duration = "kgo", 30*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Warmup+time.Second)
	defer cancel()
	start := time.Now()
	run, err := Run(ctx, cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 6*time.Second || !run.Result.Interrupted || run.Result.Errors != 0 || run.Result.MessagesAcked == 0 {
		t.Fatalf("kgo run returned after %v: interrupted %v, acked %d, errors %d (%s)", d, run.Result.Interrupted,
			run.Result.MessagesAcked, run.Result.Errors, run.Result.FirstError)
	}

	out := filepath.Join(t.TempDir(), "fm")
	fmCtx, fmCancel := context.WithCancel(context.Background())
	// Steps of 1 s: the first completes (pass or fail), the second is
	// interrupted half a second after it is announced.
	var steps atomic.Int32
	onSecondStep := writerFunc(func(p []byte) {
		if strings.Contains(string(p), "find-max: step at") && steps.Add(1) == 2 {
			time.AfterFunc(500*time.Millisecond, fmCancel)
		}
	})
	fm := DefaultOptions()
	fm.Out, fm.FindMax = out, true
	fm.Config.Bootstrap, fm.Config.Topic, fm.Config.Partitions, fm.Config.Rate = c.ListenAddrs()[:1], "lg-fm", 2, 500
	fm.Config.MessageSize, fm.Config.Duration, fm.Config.Warmup = 100, time.Second, 100*time.Millisecond
	fm.Config.TargetP99, fm.Config.Quiet = time.Second, true
	err = Execute(fmCtx, fm, onSecondStep, io.Discard)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("find-max returned %v, want ErrInterrupted", err)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	// Only the completed step: a partial one neither passes nor fails.
	if !res.Interrupted || res.FindMax == nil || len(res.FindMax.Steps) != 1 {
		t.Fatalf("interrupted find-max result: interrupted %v, find_max %+v", res.Interrupted, res.FindMax)
	}
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
