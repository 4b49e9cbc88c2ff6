package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/launch"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Running reports whether the process was launched and has not exited.
func (b *BrokerProc) Running() bool {
	if b.InProcess {
		return b.inproc != nil && !b.inproc.stopped
	}
	if b.Proc == nil || !b.Proc.Started() {
		return false
	}
	select {
	case <-b.Proc.Exited():
		return false
	default:
		return true
	}
}

// InjectFault posts one fault to b's /debug/ringlog/faults; method DELETE
// clears them.
func (b *BrokerProc) InjectFault(t *testing.T, method string, f vfs.FaultRequest) {
	t.Helper()
	body, _ := json.Marshal(f)
	req, err := http.NewRequest(method, "http://"+b.Admin+"/debug/ringlog/faults", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		msg.ReadFrom(resp.Body)
		t.Fatalf("%s fault: %s: %s", method, resp.Status, msg.String())
	}
}

// SyncBuffer collects a process's output for failure messages.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type BrokerProc struct {
	T       *testing.T
	Addr    string
	TLSAddr string // set by StartTLSBroker
	Admin   string
	DataDir string
	Args    []string
	// Prefix, when set, is a command the binary runs under, e.g.
	// "ip netns exec NAME" (see netns.go); it must exec the binary in
	// place so signals reach the broker itself.
	Prefix []string
	// Env, when set, is added to the inherited environment (RINGLOG_*
	// settings instead of flags).
	Env []string
	Out *SyncBuffer
	// Proc is the running process (internal/launch, the launcher
	// `ringlog bench` and `ringlog dev cluster` use too); a restart
	// replaces it. Nil for a broker in the test process.
	Proc *launch.Broker
	// InProcess: the broker runs in the test process (inprocess.go), not
	// as a `ringlog serve` process; set from the test's mode by the
	// Start functions.
	InProcess bool
	inproc    *inProcBroker
}

// FreePort is an unused loopback address no other test of this process
// was given.
func FreePort(t *testing.T) string {
	t.Helper()
	addr, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// ioModes lists the write paths the suite runs under; RINGLOG_TEST_IO
// narrows it (CI runs the suite once per path).
func IOMode() string {
	if m := os.Getenv("RINGLOG_TEST_IO"); m != "" {
		return m
	}
	return "auto"
}

// StartBroker starts a broker (`ringlog serve`, or in the test process:
// see inprocess.go) on free loopback ports over dataDir and waits until
// /healthz answers.
func StartBroker(t *testing.T, dataDir string, extra ...string) *BrokerProc {
	t.Helper()
	b := &BrokerProc{T: t, DataDir: dataDir, Addr: FreePort(t), Admin: FreePort(t), InProcess: inProcessFor(t)}
	b.Args = append([]string{"serve",
		"--listen", b.Addr,
		"--admin-listen", b.Admin,
		"--data-dir", dataDir,
		"--io", IOMode(),
		"--log-level", "debug",
	}, extra...)
	// Stopped at cleanup even when it never becomes ready.
	t.Cleanup(func() { b.Stop() })
	b.Start()
	return b
}

// Start launches the broker and waits until it is ready.
func (b *BrokerProc) Start() {
	b.T.Helper()
	b.Launch()
	b.WaitReady(30 * time.Second)
}

// Launch starts the process without waiting: cluster nodes cannot become
// ready until a quorum of them runs.
func (b *BrokerProc) Launch() {
	b.T.Helper()
	if b.InProcess {
		b.launchInProcess()
		return
	}
	b.Out = &SyncBuffer{}
	b.Proc = &launch.Broker{Bin: RinglogBin, Args: b.Args, Addr: b.Addr, Admin: b.Admin,
		Env: b.Env, Prefix: b.Prefix, Output: b.Out,
		// Brokers in namespaces of their own must not outlive the test
		// process, whatever ends it.
		DieWithParent: len(b.Prefix) > 0}
	if err := b.Proc.Start(); err != nil {
		b.T.Fatal(err)
	}
}

// WaitReady waits until /healthz reports status "ok" (joined the cluster,
// Kafka listeners accepting) and checks the write path in use.
func (b *BrokerProc) WaitReady(limit time.Duration) {
	b.T.Helper()
	var h map[string]any
	if b.InProcess {
		h = b.waitReadyInProcess(limit)
	} else {
		var err error
		if h, err = b.Proc.WaitReady(context.Background(), limit); err != nil {
			b.T.Fatalf("%v\n%s", err, b.Out.String())
		}
	}
	// A requested write path must be the one in use, so the suite really
	// runs once per path.
	if mode := IOMode(); mode != "auto" && h["io_path"] != mode {
		b.T.Fatalf("broker runs io path %v, want %s", h["io_path"], mode)
	}
	// Operators read why a path was chosen (a fallback to sync names the
	// missing io_uring) from here.
	if r, _ := h["io_reason"].(string); r == "" {
		b.T.Fatalf("/healthz has no io_reason (io_path %v): %v", h["io_path"], h)
	}
}

// Health is the broker's /healthz document.
func (b *BrokerProc) Health() (map[string]any, error) { return launch.Health(b.Admin) }

// WaitHealth polls /healthz until ok accepts it, and returns it.
func (b *BrokerProc) WaitHealth(limit time.Duration, what string, ok func(h map[string]any) bool) map[string]any {
	b.T.Helper()
	var h map[string]any
	Eventually(b.T, limit, what, func() (bool, string) {
		var err error
		h, err = b.Health()
		return err == nil && ok(h), fmt.Sprintf("/healthz %v (err %v)", h, err)
	})
	return h
}

// Active is a WaitHealth condition: the broker is unfenced.
func Active(h map[string]any) bool { return h["broker_state"] == "active" }

// Exited is closed when the process has exited.
func (b *BrokerProc) Exited() <-chan struct{} {
	b.T.Helper()
	b.needProcess("Exited")
	return b.Proc.Exited()
}

// ExitErr is the exit status; it waits for the exit.
func (b *BrokerProc) ExitErr() error {
	b.T.Helper()
	b.needProcess("ExitErr")
	return b.Proc.ExitErr()
}

// Pid is the process id.
func (b *BrokerProc) Pid() int {
	b.T.Helper()
	b.needProcess("Pid")
	return b.Proc.Pid()
}

// Signal sends sig to the broker.
func (b *BrokerProc) Signal(sig os.Signal) error {
	b.T.Helper()
	b.needProcess("Signal " + sig.String())
	return b.Proc.Signal(sig)
}

// Kill9 sends SIGKILL and waits for the process to exit.
func (b *BrokerProc) Kill9() {
	b.T.Helper()
	b.needProcess("Kill9")
	b.Proc.Kill()
}

// Stop sends SIGTERM and waits for a clean exit (in the test process:
// drains and closes the broker as serve does on SIGTERM). With
// RINGLOG_TEST_KEEP_LOGS=DIR, the broker's output of a failed test is
// written to DIR (the data directories are test temp dirs and go away).
func (b *BrokerProc) Stop() {
	defer b.keepLog()
	if b.InProcess {
		b.stopInProcess()
		return
	}
	if b.Proc == nil || !b.Proc.Started() {
		return
	}
	select {
	case <-b.Proc.Exited():
		return
	default:
	}
	switch err := b.Proc.Stop(30 * time.Second); {
	case errors.Is(err, launch.ErrKilled):
		b.T.Errorf("broker ignored SIGTERM for 30s\n%s", b.Out.String())
	case err != nil:
		b.T.Errorf("broker exit after SIGTERM: %v\n%s", err, b.Out.String())
	}
}

func (b *BrokerProc) keepLog() {
	dir := os.Getenv("RINGLOG_TEST_KEEP_LOGS")
	if dir == "" || !b.T.Failed() || b.Out == nil {
		return
	}
	name := strings.NewReplacer("/", "_", ":", "_").Replace(b.T.Name() + "-" + b.Addr + ".log")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		os.WriteFile(filepath.Join(dir, name), []byte(b.Out.String()), 0o644)
	}
}

// Pause stops the broker with SIGSTOP and waits until every thread of it
// has stopped: the signal takes effect asynchronously, and a follower left
// running for a moment could still fetch what a test means it to miss.
func (b *BrokerProc) Pause() {
	b.T.Helper()
	b.needProcess("Pause")
	b.Proc.Signal(syscall.SIGSTOP)
	pid := b.Proc.Pid()
	// Looked at every millisecond: what the caller times starts here.
	EventuallyEvery(b.T, time.Millisecond, 10*time.Second, fmt.Sprintf("broker pid %d stopped after SIGSTOP", pid), func() (bool, string) {
		return AllThreadsStopped(pid), "threads still running"
	})
}

// Resume continues a paused broker.
func (b *BrokerProc) Resume() {
	b.T.Helper()
	b.needProcess("Resume")
	b.Proc.Signal(syscall.SIGCONT)
}

// AllThreadsStopped reports whether every thread of pid is in the stopped
// state (the field after the command name in /proc/PID/task/TID/stat).
func AllThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, tk := range tasks {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, tk.Name()))
		if err != nil {
			continue // the thread is gone
		}
		i := bytes.LastIndexByte(st, ')')
		if i < 0 || i+2 >= len(st) || (st[i+2] != 'T' && st[i+2] != 't') {
			return false
		}
	}
	return true
}

// Restart starts the broker again on the same ports and data dir.
func (b *BrokerProc) Restart() {
	b.T.Helper()
	b.needProcess("Restart")
	b.Start()
}

func (b *BrokerProc) Client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func Context(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TlsClient is a franz-go client seeded with the TLS listener.
func (b *BrokerProc) TlsClient(t *testing.T, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.TLSAddr), kgo.DialTLSConfig(cfg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Metrics scrapes /metrics into "name{labels}" -> value.
func (b *BrokerProc) Metrics(t *testing.T) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + b.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
