package harness

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/broker/serveflags"
)

// Brokers run in one of two modes:
//
//   - as processes: the `ringlog serve` binary, launched with its flags
//     (internal/launch), stopped with SIGTERM. Tests that kill, pause,
//     signal or restart a broker, read its pid, its process-wide state
//     (RSS, GC target, GOMAXPROCS, process_* metrics), give it an
//     environment of its own or run it in a network namespace need this.
//   - in process: broker.New and Start in the test process, configured
//     from the same serve arguments by the same parser
//     (broker/serveflags), stopped with Drain and Close as serve does on
//     SIGTERM. No binary is started for the broker, so the suite spends
//     no time on process starts, and under -race the broker's own code is
//     checked too. The handle's API is the same (Addr, Admin, DataDir,
//     Out, Stop, Health, Metrics, clients); what only a process can do
//     (Kill9, Signal, Pause, Resume, Pid, Restart, Exited) fails the test
//     with a message saying so.
//
// Brokers are processes unless the suite's TestMain is MainInProcess; a
// test in such a suite that needs processes calls Processes(t) first, and
// a test of a process suite may call InProcess(t).

// inProcessDefault is the mode of tests that did not choose one.
var inProcessDefault bool

// MainInProcess is Main for a suite whose tests run their brokers in the
// test process unless they call Processes(t).
func MainInProcess(m *testing.M) {
	inProcessDefault = true
	Main(m)
}

// modes holds the tests that chose a mode, by name; their subtests
// inherit it.
var modes sync.Map

// Processes makes the brokers t (and its subtests) starts from here on
// `ringlog serve` processes.
func Processes(t *testing.T) { setMode(t, false) }

// InProcess makes the brokers t (and its subtests) starts from here on run
// in the test process.
func InProcess(t *testing.T) { setMode(t, true) }

func setMode(t *testing.T, inProcess bool) {
	name := t.Name()
	modes.Store(name, inProcess)
	t.Cleanup(func() { modes.Delete(name) })
}

// inProcessFor is the mode of the brokers t starts.
func inProcessFor(t *testing.T) bool {
	name := t.Name()
	for {
		if v, ok := modes.Load(name); ok {
			return v.(bool)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return inProcessDefault
		}
		name = name[:i]
	}
}

// inProcessStarted: a broker ran in the test process, so Main checks
// that none left goroutines behind.
var inProcessStarted atomic.Bool

// serverCode matches a goroutine of the broker's packages, by a frame or
// the frame that created it.
var serverCode = regexp.MustCompile(`github\.com/ringlog/ringlog/(broker|engine|netpath|controller|coordinator|replication|tiered|iouring)[/.]`)

// brokerGoroutinesGone waits up to limit for the goroutines of the
// brokers that ran in the test process to end: a closed broker must
// leave nothing running in a process that goes on to start others.
func brokerGoroutinesGone(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		buf := make([]byte, 16<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if serverCode.MatchString(g) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines of closed in-process brokers still run after the tests:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inProcBroker is a broker running in the test process.
type inProcBroker struct {
	b      *broker.Broker
	cancel context.CancelFunc
	// started is closed when Start has returned, startErr then its error.
	started  chan struct{}
	startErr error
	stopped  bool
}

// launchInProcess builds the broker from b.Args as `ringlog serve` would
// and starts it joining the cluster without waiting for it (cluster nodes
// cannot be ready until a quorum of them runs).
func (b *BrokerProc) launchInProcess() {
	b.T.Helper()
	switch {
	case b.inproc != nil:
		b.T.Fatalf("broker %s runs in the test process and cannot be restarted: call harness.Processes(t) at the start of the test", b.Addr)
	case len(b.Env) > 0:
		b.T.Fatalf("broker %s: an environment of its own (%v) needs a process: call harness.Processes(t) at the start of the test", b.Addr, b.Env)
	case len(b.Prefix) > 0:
		b.T.Fatalf("broker %s: running under %v needs a process: call harness.Processes(t) at the start of the test", b.Addr, b.Prefix)
	case len(b.Args) == 0 || b.Args[0] != "serve":
		b.T.Fatalf("not a serve command line: %q", b.Args)
	}
	b.Out = &SyncBuffer{}
	// The version a binary built without -ldflags reports.
	cfg, err := serveflags.Parse(b.Args[1:], serveflags.Options{Version: "dev", Commit: "unknown", LogOutput: b.Out, SharedProcess: true})
	if err != nil {
		b.T.Fatalf("serve %s: %v", strings.Join(b.Args[1:], " "), err)
	}
	br, err := broker.New(cfg)
	if err != nil {
		b.T.Fatalf("in-process broker %s: %v\n%s", b.Addr, err, b.Out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	ip := &inProcBroker{b: br, cancel: cancel, started: make(chan struct{})}
	go func() {
		ip.startErr = br.Start(ctx)
		close(ip.started)
	}()
	b.inproc = ip
	inProcessStarted.Store(true)
}

// waitReadyInProcess polls /healthz as for a process, and fails when Start
// fails first.
func (b *BrokerProc) waitReadyInProcess(limit time.Duration) map[string]any {
	b.T.Helper()
	ip := b.inproc
	deadline := time.Now().Add(limit)
	for {
		if h, err := b.Health(); err == nil && h["status"] == "ok" {
			return h
		}
		select {
		case <-ip.started:
			if ip.startErr != nil {
				b.T.Fatalf("in-process broker %s: %v\n%s", b.Addr, ip.startErr, b.Out.String())
			}
		default:
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("in-process broker %s not ready after %v\n%s", b.Addr, limit, b.Out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopInProcess does what serve does on SIGTERM: ends a Start still
// joining, drains, closes.
func (b *BrokerProc) stopInProcess() {
	ip := b.inproc
	if ip == nil || ip.stopped {
		return
	}
	ip.stopped = true
	ip.cancel()
	done := make(chan error, 1)
	go func() {
		<-ip.started
		ip.b.Drain(context.Background())
		done <- ip.b.Close()
	}()
	select {
	case err := <-done:
		if err != nil {
			b.T.Errorf("in-process broker %s: close: %v\n%s", b.Addr, err, b.Out.String())
		}
	case <-time.After(30 * time.Second):
		b.T.Errorf("in-process broker %s did not close within 30s\n%s", b.Addr, b.Out.String())
	}
}

// needProcess fails the test when b runs in the test process: what runs
// next needs a process.
func (b *BrokerProc) needProcess(what string) {
	if b.InProcess {
		b.T.Helper()
		b.T.Fatal(fmt.Sprintf("%s: broker %s runs in the test process; a test that kills, pauses, signals or restarts "+
			"its brokers, or reads their process, calls harness.Processes(t) at its start", what, b.Addr))
	}
}
