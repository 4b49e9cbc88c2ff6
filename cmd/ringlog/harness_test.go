package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests run the real `ringlog serve` binary on loopback and drive it
// with real clients: franz-go, kcat and confluent_kafka (librdkafka).

var ringlogBin string

func TestMain(m *testing.M) {
	if os.Getenv(noURingEnv) != "" {
		err := execWithoutIOUring()
		fmt.Fprintln(os.Stderr, "exec without io_uring:", err)
		os.Exit(2)
	}
	// Brokers under test get an 8 MiB journal (checkpoints still every
	// MiB): zero-filling the default 64 MiB cost about 60 ms at each of the
	// suite's hundreds of broker starts. The serve-defaults tests unset it.
	if _, ok := os.LookupEnv("RINGLOG_JOURNAL_BYTES"); !ok {
		os.Setenv("RINGLOG_JOURNAL_BYTES", "8388608")
	}
	dir, err := os.MkdirTemp("", "ringlog-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ringlogBin = filepath.Join(dir, "ringlog")
	if env := os.Getenv("RINGLOG_TEST_BIN"); env != "" {
		ringlogBin = env
	} else {
		build := exec.Command("go", "build", "-o", ringlogBin, ".")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building ringlog:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type brokerProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	tlsAddr string // set by startTLSBroker
	admin   string
	dataDir string
	args    []string
	// prefix, when set, is a command the binary runs under, e.g.
	// "ip netns exec NAME" (see netns_test.go); it must exec the binary
	// in place so signals reach the broker itself.
	prefix []string
	// env, when set, is added to the inherited environment (RINGLOG_*
	// settings instead of flags).
	env     []string
	out     *syncBuffer
	exited  chan struct{}
	exitErr error
}

// handedOut remembers ports freePort returned: the kernel may hand a just
// closed ephemeral port out again, and a broker given the same port for two
// listeners fails to start.
var handedOut sync.Map

func freePort(t *testing.T) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
}

// ioModes lists the write paths the suite runs under; RINGLOG_TEST_IO
// narrows it (CI runs the suite once per path).
func ioMode() string {
	if m := os.Getenv("RINGLOG_TEST_IO"); m != "" {
		return m
	}
	return "auto"
}

// startBroker starts `ringlog serve` on free loopback ports over dataDir
// and waits until /healthz answers.
func startBroker(t *testing.T, dataDir string, extra ...string) *brokerProc {
	t.Helper()
	b := &brokerProc{t: t, dataDir: dataDir, addr: freePort(t), admin: freePort(t)}
	b.args = append([]string{"serve",
		"--listen", b.addr,
		"--admin-listen", b.admin,
		"--data-dir", dataDir,
		"--io", ioMode(),
		"--log-level", "debug",
	}, extra...)
	b.start()
	t.Cleanup(func() { b.stop() })
	return b
}

// start launches the broker and waits until it is ready.
func (b *brokerProc) start() {
	b.t.Helper()
	b.launch()
	b.waitReady(30 * time.Second)
}

// launch starts the process without waiting: cluster nodes cannot become
// ready until a quorum of them runs.
func (b *brokerProc) launch() {
	b.t.Helper()
	b.out = &syncBuffer{}
	if len(b.prefix) > 0 {
		b.cmd = exec.Command(b.prefix[0], append(append(slices.Clone(b.prefix[1:]), ringlogBin), b.args...)...)
		// Brokers in namespaces of their own must not outlive the test
		// process, whatever ends it.
		b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	} else {
		b.cmd = exec.Command(ringlogBin, b.args...)
	}
	if len(b.env) > 0 {
		b.cmd.Env = append(os.Environ(), b.env...)
	}
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.exited = make(chan struct{})
	go func() {
		b.exitErr = b.cmd.Wait()
		close(b.exited)
	}()
}

// waitReady polls /healthz until the broker reports status "ok" (joined
// the cluster, Kafka listeners accepting).
func (b *brokerProc) waitReady(limit time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-b.exited:
			b.t.Fatalf("broker exited during startup: %v\n%s", b.exitErr, b.out.String())
		default:
		}
		if h, err := b.health(); err == nil && h["status"] == "ok" {
			// A requested write path must be the one in use, so the
			// suite really runs once per path.
			if mode := ioMode(); mode != "auto" && h["io_path"] != mode {
				b.t.Fatalf("broker runs io path %v, want %s", h["io_path"], mode)
			}
			// Operators read why a path was chosen (a fallback to sync
			// names the missing io_uring) from here.
			if r, _ := h["io_reason"].(string); r == "" {
				b.t.Fatalf("/healthz has no io_reason (io_path %v): %v", h["io_path"], h)
			}
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("broker not ready after %v\n%s", limit, b.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *brokerProc) health() (map[string]any, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + b.admin + "/healthz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var h map[string]any
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// kill9 sends SIGKILL and waits for the process to exit.
func (b *brokerProc) kill9() {
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// stop sends SIGTERM and waits for a clean exit. With
// RINGLOG_TEST_KEEP_LOGS=DIR, the broker's output of a failed test is
// written to DIR (the data directories are test temp dirs and go away).
func (b *brokerProc) stop() {
	defer b.keepLog()
	select {
	case <-b.exited:
		return
	default:
	}
	// A test that failed while the broker was paused (SIGSTOP) must not
	// wait 30 s on a process that cannot act on SIGTERM.
	b.cmd.Process.Signal(syscall.SIGCONT)
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
		if b.exitErr != nil {
			b.t.Errorf("broker exit after SIGTERM: %v\n%s", b.exitErr, b.out.String())
		}
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
		b.t.Errorf("broker ignored SIGTERM for 30s\n%s", b.out.String())
	}
}

func (b *brokerProc) keepLog() {
	dir := os.Getenv("RINGLOG_TEST_KEEP_LOGS")
	if dir == "" || !b.t.Failed() || b.out == nil {
		return
	}
	name := strings.NewReplacer("/", "_", ":", "_").Replace(b.t.Name() + "-" + b.addr + ".log")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		os.WriteFile(filepath.Join(dir, name), []byte(b.out.String()), 0o644)
	}
}

// pause stops the broker with SIGSTOP and waits until every thread of it
// has stopped: the signal takes effect asynchronously, and a follower left
// running for a moment could still fetch what a test means it to miss.
func (b *brokerProc) pause() {
	b.t.Helper()
	b.cmd.Process.Signal(syscall.SIGSTOP)
	pid := b.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !allThreadsStopped(pid) {
		if time.Now().After(deadline) {
			b.t.Fatalf("broker pid %d not stopped 10s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// resume continues a paused broker.
func (b *brokerProc) resume() { b.cmd.Process.Signal(syscall.SIGCONT) }

// allThreadsStopped reports whether every thread of pid is in the stopped
// state (the field after the command name in /proc/PID/task/TID/stat).
func allThreadsStopped(pid int) bool {
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

// restart starts the broker again on the same ports and data dir.
func (b *brokerProc) restart() {
	b.t.Helper()
	b.start()
}

func (b *brokerProc) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
