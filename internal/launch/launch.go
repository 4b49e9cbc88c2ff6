// Package launch starts and stops `ringlog serve` processes on this
// machine. It is the one launcher of local brokers: `ringlog bench` and
// `ringlog dev cluster` use it, and so do the end-to-end suites
// (e2e/harness), so a broker is started, found ready and stopped the same
// way everywhere.
package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Broker is one broker process. Fill in the fields, then Start it.
type Broker struct {
	// Bin is the executable; Args its command line after the program
	// name (for ringlog: "serve" and its flags).
	Bin  string
	Args []string
	// Addr and Admin are the Kafka and admin (HTTP) listeners the
	// command line gives it; WaitReady asks Admin's /healthz.
	Addr, Admin string
	// Env is added to the inherited environment.
	Env []string
	// Prefix, when set, is a command the binary runs under (for example
	// "ip netns exec NAME"); it must exec the binary in place so that
	// signals reach the broker itself.
	Prefix []string
	// Output receives the process's stdout and stderr (nil: discarded).
	Output io.Writer
	// OwnGroup puts the process in a process group of its own, so a
	// terminal's Ctrl-C reaches only the launcher, which stops the brokers
	// in order.
	OwnGroup bool
	// DieWithParent kills the broker when the launching thread's process
	// exits (test processes that may be killed at a timeout).
	DieWithParent bool

	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// Start launches the process without waiting for it to be ready: cluster
// nodes cannot be ready until a quorum of them runs.
func (b *Broker) Start() error {
	if len(b.Prefix) > 0 {
		b.cmd = exec.Command(b.Prefix[0], append(append(slices.Clone(b.Prefix[1:]), b.Bin), b.Args...)...)
	} else {
		b.cmd = exec.Command(b.Bin, b.Args...)
	}
	if len(b.Env) > 0 {
		b.cmd.Env = append(os.Environ(), b.Env...)
	}
	b.cmd.Stdout, b.cmd.Stderr = b.Output, b.Output
	if b.OwnGroup || b.DieWithParent {
		b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: b.OwnGroup}
		if b.DieWithParent {
			dieWithParent(b.cmd.SysProcAttr)
		}
	}
	if err := b.cmd.Start(); err != nil {
		return err
	}
	b.exited = make(chan struct{})
	go func() {
		b.exitErr = b.cmd.Wait()
		close(b.exited)
	}()
	return nil
}

// Started reports whether Start succeeded.
func (b *Broker) Started() bool { return b.exited != nil }

// Exited is closed once the process has exited; ExitErr is then its
// status.
func (b *Broker) Exited() <-chan struct{} { return b.exited }

// ExitErr is the process's exit status once Exited is closed.
func (b *Broker) ExitErr() error {
	<-b.exited
	return b.exitErr
}

// Pid is the process id.
func (b *Broker) Pid() int { return b.cmd.Process.Pid }

// Signal sends sig to the process.
func (b *Broker) Signal(sig os.Signal) error { return b.cmd.Process.Signal(sig) }

// Health is the broker's /healthz document.
func (b *Broker) Health() (map[string]any, error) {
	return Health(b.Admin)
}

// Health fetches http://admin/healthz.
func Health(admin string) (map[string]any, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + admin + "/healthz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("healthz: %s", resp.Status)
	}
	var h map[string]any
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// ErrExited is returned by WaitReady when the process exits first.
var ErrExited = errors.New("broker exited during startup")

// WaitReady polls /healthz until the broker reports status "ok" (it has
// joined the cluster and its Kafka listener accepts) and returns that
// document. It fails when the process exits first (ErrExited, with the
// exit status), when ctx ends, or after limit.
func (b *Broker) WaitReady(ctx context.Context, limit time.Duration) (map[string]any, error) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if h, err := b.Health(); err == nil {
			st, reports := h["status"]
			if st == "ok" {
				return h, nil
			}
			// A broker that reports no status at all (bench's in-memory
			// baseline, another project's binary behind serve's flags) is
			// ready once its Kafka listener accepts.
			if !reports && b.accepts() {
				return h, nil
			}
		}
		select {
		case <-b.exited:
			return nil, fmt.Errorf("%w: %v", ErrExited, b.exitErr)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("broker %s not ready after %v", b.Addr, limit)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *Broker) accepts() bool {
	c, err := net.DialTimeout("tcp", b.Addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Kill sends SIGKILL and waits for the process to exit.
func (b *Broker) Kill() {
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// ErrKilled is returned by Stop when the broker ignored SIGTERM.
var ErrKilled = errors.New("broker ignored SIGTERM; killed")

// Stop sends SIGTERM (after SIGCONT: a paused broker cannot act on it) and
// waits up to grace for the process to exit, then SIGKILLs it (ErrKilled).
// An exit by the signal counts as clean; any other failure is returned.
func (b *Broker) Stop(grace time.Duration) error {
	select {
	case <-b.exited:
		return b.cleanExit()
	default:
	}
	b.cmd.Process.Signal(syscall.SIGCONT)
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
		return b.cleanExit()
	case <-time.After(grace):
		b.cmd.Process.Kill()
		<-b.exited
		return ErrKilled
	}
}

func (b *Broker) cleanExit() error {
	var ee *exec.ExitError
	if errors.As(b.exitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return b.exitErr
}

// handedOut remembers the ports FreePort returned: the kernel may hand a
// just-closed ephemeral port out again, and a broker given the same port
// for two listeners fails to start.
var handedOut sync.Map

// FreePort returns an unused loopback address (127.0.0.1:port) that this
// process has not handed out before.
func FreePort() (string, error) {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr, nil
		}
	}
}

// FreePortRun finds n consecutive free loopback ports not handed out
// before and returns the first (`ringlog dev cluster` takes a base port
// per listener kind and counts up from it).
func FreePortRun(n int) (int, error) {
	for range 200 {
		base := 20000 + rand.IntN(40000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
			if _, dup := handedOut.LoadOrStore(fmt.Sprintf("127.0.0.1:%d", p), true); dup {
				ok = false
			}
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no run of free loopback ports")
}

// SplitMaxProcs is the GOMAXPROCS each of n brokers on this machine gets
// when they share its cores: this process's GOMAXPROCS (the CPUs it may
// use, cgroup limits included) divided among them, at least 1; 0 (Go's
// default, all of them) for one broker. Three brokers that each believe
// they own both cores of a 2-core machine wake an idle scheduler thread
// for almost every goroutine made runnable, and put it back to sleep:
// on this project's VMs that doubled the context switches per message
// (BENCHMARKS.md section 21). A broker alone on its host, or in a
// container with a CPU limit (which Go reads), needs no setting.
func SplitMaxProcs(n int) int {
	if n <= 1 {
		return 0
	}
	return max(1, runtime.GOMAXPROCS(0)/n)
}

// MaxProcsEnv is the environment to add for a broker with GOMAXPROCS
// procs (0: nothing, Go's default).
func MaxProcsEnv(procs int) []string {
	if procs <= 0 {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(procs)}
}
