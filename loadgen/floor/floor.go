// Package floor measures what the cheapest replicated round costs on the
// machine it runs on, as a yardstick for a broker's own per-message
// figures. It starts Replicas minimal processes on loopback, a leader and
// its followers, and sends them fixed-size messages at a fixed rate. Per
// message the leader reads it, sends it to every follower, writes it to
// its log (O_DIRECT|O_DSYNC by default, the same barrier a broker with
// fsync always pays), waits for every follower's answer (each follower
// writes it to its own log first) and answers. There is no protocol, no
// batching, no bookkeeping: whatever a broker spends above this per
// message is its own; what this costs, the machine charges any design
// with the same hops.
//
// Three ways to wait are measured. ModeNetpoll is Go's standard library:
// goroutines park on the netpoller, the runtime's threads sleep in epoll
// and hand work between them, socket calls carry the runtime's system
// call bookkeeping, and the log write blocks the thread. ModeUring is
// a Go broker's with ringlog's storage path: the same netpoller for the
// sockets, and the log write submitted to an io_uring whose completion
// signals an eventfd the netpoller watches, so no thread blocks in the
// write (the leader's write runs while its followers write theirs).
// ModeThread is a C server's: one thread per node blocks in its own read
// and write, woken by the kernel directly. The gaps between them are what
// Go's scheduler costs per wake-up on this machine, and what the blocking
// write costs a Go server.
package floor

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/internal/cpusched"
	"github.com/ringlog/ringlog/internal/launch"
	"github.com/ringlog/ringlog/internal/procstat"
	"github.com/ringlog/ringlog/results"
)

// The ways a node waits.
const (
	ModeNetpoll = "netpoll"
	ModeUring   = "uring"
	ModeThread  = "thread"
)

// Modes lists every mode, in the order "all" runs them.
var Modes = []string{ModeNetpoll, ModeUring, ModeThread}

const (
	ackSize   = 8 // a message's sequence number, echoed
	minSize   = ackSize
	maxSize   = 1 << 20
	blockSize = 4096
	// maxAhead bounds the messages in flight the client remembers send
	// times for: a node this far behind fails the run.
	maxAhead = 1 << 20
)

// Config is one measurement.
type Config struct {
	Replicas int           // nodes: 1 is a single durable server
	Rate     int           // messages per second, open loop
	Duration time.Duration // measured
	Warmup   time.Duration // sent before measuring
	Size     int           // message bytes
	Mode     string        // ModeNetpoll, ModeUring or ModeThread
	Fsync    bool          // a durable write per message on every node
	Dir      string        // for the nodes' logs (default: a temporary directory)
	// MaxProcs is each node's GOMAXPROCS: -1 splits the cores among the
	// nodes as ringlog bench does for its brokers (launch.SplitMaxProcs),
	// 0 is Go's default.
	MaxProcs int
	// SchedPolicy is each node's scheduling policy (cpusched.Batch, as
	// serve's default gives the brokers, or cpusched.Normal).
	SchedPolicy string
	// Command builds a node's process from NodeMain's arguments; nil runs
	// this executable's "floor node".
	Command func(args []string) *exec.Cmd
}

// DefaultConfig is the round ringlog bench measures at 1,000 msg/s with
// --client kgo --linger 0: three replicas, 1,000-byte messages, a
// durable write on each.
func DefaultConfig() Config {
	return Config{Replicas: 3, Rate: 1000, Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Size: 1000, Mode: ModeNetpoll, Fsync: true, MaxProcs: -1, SchedPolicy: cpusched.Batch}
}

// Validate checks the bounds a run keeps to.
func (c Config) Validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("floor: replicas %d outside 1..5", c.Replicas)
	case c.Rate < 1 || c.Rate > 1_000_000:
		return fmt.Errorf("floor: rate %d outside 1..1000000", c.Rate)
	case c.Duration <= 0 || c.Duration > 10*time.Minute:
		return fmt.Errorf("floor: duration %v outside (0, 10m]", c.Duration)
	case c.Warmup < 0 || c.Warmup > time.Minute:
		return fmt.Errorf("floor: warmup %v outside [0, 1m]", c.Warmup)
	}
	if err := cpusched.Check(c.SchedPolicy); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	return checkNode(c.Mode, c.Size)
}

// checkNode is the part of Validate a node checks again on its own
// arguments.
func checkNode(mode string, size int) error {
	switch {
	case size < minSize || size > maxSize:
		return fmt.Errorf("floor: size %d outside %d..%d", size, minSize, maxSize)
	case !slices.Contains(Modes, mode):
		return fmt.Errorf("floor: mode %q is not one of %s", mode, strings.Join(Modes, ", "))
	}
	return nil
}

// Result is a run's figures; per-message figures are over the messages
// answered in the measured window.
type Result struct {
	Replicas    int     `json:"replicas"`
	Rate        int     `json:"rate"`
	Size        int     `json:"size"`
	Mode        string  `json:"mode"`
	Fsync       bool    `json:"fsync"`
	Direct      bool    `json:"direct_io"` // O_DIRECT was accepted (false on tmpfs)
	MaxProcs    int     `json:"max_procs"`
	SchedPolicy string  `json:"sched_policy"`
	WindowS     float64 `json:"window_s"`
	Messages    int64   `json:"messages"`
	CPUUsPerMsg float64 `json:"cpu_us_per_msg"` // summed over the nodes
	CtxPerMsg   float64 `json:"ctx_switches_per_msg"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Nodes       []Node  `json:"nodes"`
}

// Node is one node's share.
type Node struct {
	Role        string  `json:"role"`
	CPUUsPerMsg float64 `json:"cpu_us_per_msg"`
	CtxPerMsg   float64 `json:"ctx_switches_per_msg"`
}

// String is the summary ringlog floor prints.
func (r Result) String() string {
	var b strings.Builder
	fsync := "fsync always"
	if !r.Fsync {
		fsync = "fsync never"
	}
	fmt.Fprintf(&b, "floor: %d replica(s), %s, %s, %d msg/s of %d bytes, %.1f s measured, %d messages, GOMAXPROCS %d, scheduling %s\n",
		r.Replicas, r.Mode, fsync, r.Rate, r.Size, r.WindowS, r.Messages, r.MaxProcs, r.SchedPolicy)
	fmt.Fprintf(&b, "  CPU-µs per message %.1f, context switches per message %.2f (summed over the nodes)\n", r.CPUUsPerMsg, r.CtxPerMsg)
	fmt.Fprintf(&b, "  latency p50 %.3f ms, p99 %.3f ms\n", r.P50Ms, r.P99Ms)
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "  %-10s CPU-µs/msg %7.1f  ctx/msg %5.2f\n", n.Role, n.CPUUsPerMsg, n.CtxPerMsg)
	}
	return b.String()
}

type proc struct {
	role string
	cmd  *exec.Cmd
	addr string
	// direct is whether the node's log took O_DIRECT (tmpfs refuses it).
	direct bool
	errb   *strings.Builder
	exited chan struct{} // closed when the process has ended; err is set then
	err    error
	killed atomic.Bool // by Run, at its end
}

// Run measures cfg. Every node is stopped before it returns.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "ringlog-floor-"); err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
	}
	procs := cfg.MaxProcs
	if procs < 0 {
		procs = launch.SplitMaxProcs(cfg.Replicas)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var nodes []*proc
	defer func() {
		// The client's connection is closed by now (or was never
		// opened): the leader, and after it the followers, exit on their
		// own. Those that do not within 5 s are killed.
		kill := time.AfterFunc(5*time.Second, cancel)
		defer kill.Stop()
		// A node's own failure says more than the client's broken
		// connection; those Run killed itself say nothing.
		for _, p := range nodes {
			<-p.exited
			if p.err != nil && !p.killed.Load() {
				err = errors.Join(err, p.err)
			}
		}
	}()
	start := func(role, file string, peers []string) (*proc, error) {
		args := []string{"-file", filepath.Join(dir, file), "-mode", cfg.Mode,
			"-fsync=" + strconv.FormatBool(cfg.Fsync), "-size", strconv.Itoa(cfg.Size), "-sched-policy", cfg.SchedPolicy}
		if len(peers) > 0 {
			args = append(args, "-peers", strings.Join(peers, ","))
		}
		if strings.HasPrefix(role, "follower") {
			args = append(args, "-follower")
		}
		var cmd *exec.Cmd
		if cfg.Command != nil {
			cmd = cfg.Command(args)
		} else {
			exe, err := os.Executable()
			if err != nil {
				return nil, err
			}
			cmd = exec.Command(exe, append([]string{"floor", "node"}, args...)...)
		}
		cmd.Env = append(cmd.Environ(), launch.MaxProcsEnv(procs)...)
		// Wait returns once the copy into errb is done, so done's reader
		// may read it.
		p := &proc{role: role, cmd: cmd, errb: &strings.Builder{}, exited: make(chan struct{})}
		cmd.Stderr = p.errb
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		nodes = append(nodes, p)
		line := make(chan string, 1)
		go func() {
			s := bufio.NewScanner(out)
			if s.Scan() {
				line <- s.Text()
			}
			close(line)
			io.Copy(io.Discard, out)
		}()
		go func() {
			stop := context.AfterFunc(ctx, func() {
				p.killed.Store(true)
				cmd.Process.Kill()
			})
			werr := cmd.Wait()
			stop()
			if werr != nil {
				p.err = fmt.Errorf("floor: %s: %w: %s", role, werr, strings.TrimSpace(p.errb.String()))
			}
			close(p.exited)
		}()
		select {
		case l, ok := <-line:
			var direct bool
			if _, err := fmt.Sscanf(l, "listening %s direct=%t", &p.addr, &direct); ok && err == nil {
				p.direct = direct
				return p, nil
			}
			if !ok {
				// It exited before listening: its own error says why.
				select {
				case <-p.exited:
					if p.err != nil {
						return nil, p.err
					}
				case <-time.After(5 * time.Second):
				}
			}
			return nil, fmt.Errorf("floor: %s did not start: %q", role, l)
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("floor: %s did not start within 30 s", role)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var peers []string
	for i := 1; i < cfg.Replicas; i++ {
		p, err := start(fmt.Sprintf("follower %d", i), fmt.Sprintf("follower-%d.log", i), nil)
		if err != nil {
			return res, err
		}
		peers = append(peers, p.addr)
	}
	leader, err := start("leader", "leader.log", peers)
	if err != nil {
		return res, err
	}
	// The leader first in reports.
	nodes = append(nodes[len(nodes)-1:], nodes[:len(nodes)-1]...)
	conn, err := net.DialTimeout("tcp", leader.addr, 5*time.Second)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	res, err = drive(ctx, cfg, conn, nodes)
	res.Replicas, res.Rate, res.Size, res.Mode, res.Fsync, res.MaxProcs = cfg.Replicas, cfg.Rate, cfg.Size, cfg.Mode, cfg.Fsync, procs
	res.SchedPolicy = cfg.SchedPolicy
	res.Direct = leader.direct
	conn.Close()
	return res, err
}

// drive sends at cfg.Rate (each message's latency counts from when it
// was due, not when it went out, so a stalled node cannot hide its
// stall) and reads the nodes' counters around the measured window.
func drive(ctx context.Context, cfg Config, conn net.Conn, nodes []*proc) (Result, error) {
	var res Result
	total := int64(cfg.Rate) * int64((cfg.Warmup+cfg.Duration)/time.Millisecond) / 1000
	due := make([]int64, min(total, maxAhead)) // when message i was due, at i % len
	var acked atomic.Int64
	hist := results.NewHistogram()
	t0 := time.Now()
	mFrom := t0.Add(cfg.Warmup).UnixNano()
	mTo := t0.Add(cfg.Warmup + cfg.Duration).UnixNano()
	// errc carries the goroutines' failures, fin their ends.
	errc := make(chan error, 2)
	fin := make(chan struct{}, 2)
	go func() { // sender
		msg := make([]byte, cfg.Size)
		interval := time.Second / time.Duration(cfg.Rate)
		for i := int64(0); i < total; i++ {
			at := t0.Add(time.Duration(i) * interval)
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
			}
			if i-acked.Load() >= int64(len(due)) {
				errc <- fmt.Errorf("floor: %d messages unanswered: the nodes fell behind", i-acked.Load())
				return
			}
			due[i%int64(len(due))] = at.UnixNano()
			binary.LittleEndian.PutUint64(msg, uint64(i))
			if _, err := conn.Write(msg); err != nil {
				errc <- err
				return
			}
		}
		fin <- struct{}{}
	}()
	go func() { // receiver
		ack := make([]byte, ackSize)
		for i := int64(0); i < total; i++ {
			if _, err := io.ReadFull(conn, ack); err != nil {
				errc <- fmt.Errorf("floor: reading answer %d: %w", i, err)
				return
			}
			if seq := int64(binary.LittleEndian.Uint64(ack)); seq != i {
				errc <- fmt.Errorf("floor: answer %d where %d was due", seq, i)
				return
			}
			now := time.Now().UnixNano()
			at := due[i%int64(len(due))]
			if at >= mFrom && at < mTo {
				results.RecordMicros(hist, (now-at)/1000)
			}
			acked.Store(i + 1)
		}
		fin <- struct{}{}
	}()
	snap := func() ([]procstat.Snapshot, int64, time.Time, error) {
		s := make([]procstat.Snapshot, len(nodes))
		for i, p := range nodes {
			var err error
			if s[i], err = (procstat.FS{}).Process(p.cmd.Process.Pid); err != nil {
				return nil, 0, time.Time{}, err
			}
		}
		return s, acked.Load(), time.Now(), nil
	}
	wait := func(until time.Time) error {
		select {
		case <-time.After(time.Until(until)):
			return nil
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(t0.Add(cfg.Warmup)); err != nil {
		return res, err
	}
	a, na, ta, err := snap()
	if err != nil {
		return res, err
	}
	if err := wait(t0.Add(cfg.Warmup + cfg.Duration)); err != nil {
		return res, err
	}
	b, nb, tb, err := snap()
	if err != nil {
		return res, err
	}
	// Both goroutines end: every message answered, or an error.
	for range 2 {
		select {
		case <-fin:
		case err := <-errc:
			return res, err
		case <-time.After(30 * time.Second):
			return res, errors.New("floor: the nodes did not answer every message within 30 s of the end")
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.WindowS = tb.Sub(ta).Seconds()
	res.Messages = nb - na
	if res.Messages <= 0 {
		return res, errors.New("floor: no message answered in the measured window")
	}
	n := float64(res.Messages)
	for i := range nodes {
		cpu := (b[i].CPUSeconds - a[i].CPUSeconds) * 1e6 / n
		cs := float64(b[i].Voluntary+b[i].Involuntary-a[i].Voluntary-a[i].Involuntary) / n
		res.Nodes = append(res.Nodes, Node{Role: nodes[i].role, CPUUsPerMsg: cpu, CtxPerMsg: cs})
		res.CPUUsPerMsg += cpu
		res.CtxPerMsg += cs
	}
	lat := results.Summarize(hist)
	res.P50Ms, res.P99Ms = lat.P50, lat.P99
	return res, nil
}
