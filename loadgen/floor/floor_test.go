//go:build linux

package floor

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary is also the nodes' binary: Run re-executes it with
// this variable set.
const nodeEnv = "RINGLOG_FLOOR_TEST_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "1" {
		if err := NodeMain(os.Args[1:], os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// nodeCommand runs a node from the test binary, and records each one.
type nodeCommand struct {
	mu   sync.Mutex
	cmds []*exec.Cmd
}

func (n *nodeCommand) command(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), nodeEnv+"=1")
	n.mu.Lock()
	n.cmds = append(n.cmds, cmd)
	n.mu.Unlock()
	return cmd
}

func testConfig(t *testing.T, mode string) Config {
	cfg := DefaultConfig()
	cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Mode, cfg.Dir = 300, time.Second, 200*time.Millisecond, mode, t.TempDir()
	cfg.Command = (&nodeCommand{}).command
	return cfg
}

// directWorks says whether dir's file system takes O_DIRECT.
func directWorks(t *testing.T, dir string) bool {
	fd, err := unix.Open(filepath.Join(dir, "probe"), unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT, 0o600)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// skipWithoutUring skips the uring mode's case where the kernel refuses
// io_uring (the floor's other modes need nothing of it).
func skipWithoutUring(t *testing.T, mode string) {
	if mode != ModeUring {
		return
	}
	if why := UringUnavailable(); why != "" {
		t.Skipf("io_uring unavailable here: %s", why)
	}
}

func TestRunEveryMode(t *testing.T) {
	for _, mode := range Modes {
		t.Run(mode, func(t *testing.T) {
			skipWithoutUring(t, mode)
			cfg := testConfig(t, mode)
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			// About rate × window answers were counted: every message of
			// the window, and not those of the warmup. That holds while
			// the nodes keep up with the rate; on a machine busy enough
			// that they fall behind or stall (answers later than keepUp;
			// the p99 shows a stall the p50 hides: one of 400 ms in a
			// 1.2 s window under a parallel make test), fewer come back
			// within the window, and the count says nothing about the
			// counting.
			const keepUp = 50 * time.Millisecond
			want := float64(cfg.Rate) * res.WindowS
			if lag := time.Duration(res.P99Ms * float64(time.Millisecond)); lag > keepUp {
				t.Logf("the nodes fell behind (ack p99 %v): the machine is busy, the count is not checked", lag)
			} else if got := float64(res.Messages); got < 0.8*want || got > 1.2*want {
				t.Errorf("%d messages in %.2f s at %d/s", res.Messages, res.WindowS, cfg.Rate)
			}
			if len(res.Nodes) != 3 || res.Nodes[0].Role != "leader" {
				t.Fatalf("nodes %+v", res.Nodes)
			}
			for _, n := range res.Nodes {
				// Every node handled every message: a node's own CPU
				// time and thread sleeps cannot be zero.
				if n.CPUUsPerMsg <= 0 || n.CtxPerMsg <= 0 {
					t.Errorf("%s: CPU %.1f µs, %.2f context switches per message", n.Role, n.CPUUsPerMsg, n.CtxPerMsg)
				}
			}
			if res.P50Ms <= 0 || res.P99Ms < res.P50Ms {
				t.Errorf("p50 %.3f ms, p99 %.3f ms", res.P50Ms, res.P99Ms)
			}
			if res.Direct != directWorks(t, cfg.Dir) {
				t.Errorf("direct_io %v, but O_DIRECT works there: %v", res.Direct, !res.Direct)
			}
		})
	}
}

// A node that dies fails the run promptly: the leader's read from it
// ends, the leader exits, and the client's read of the next answer ends.
func TestKilledFollowerFailsRun(t *testing.T) {
	for _, mode := range Modes {
		t.Run(mode, func(t *testing.T) {
			skipWithoutUring(t, mode)
			cfg := testConfig(t, mode)
			cfg.Duration = time.Minute
			nc := &nodeCommand{}
			cfg.Command = nc.command
			go func() {
				// Into the measured window: the nodes start in well
				// under a second.
				time.Sleep(time.Second)
				nc.mu.Lock()
				defer nc.mu.Unlock()
				nc.cmds[0].Process.Kill() // follower 1, started first
			}()
			start := time.Now()
			_, err := Run(context.Background(), cfg)
			if err == nil {
				t.Fatal("the run succeeded with a follower killed")
			}
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("the run took %v to fail", el)
			}
			t.Log(err)
			if strings.Contains(err.Error(), "did not start") {
				t.Fatalf("killed before the run began: %v", err)
			}
			if !strings.Contains(err.Error(), "follower 1") {
				t.Errorf("error %q does not name the follower that died", err)
			}
			if !strings.Contains(err.Error(), "floor:") {
				t.Errorf("error %q does not say where it comes from", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Replicas = 0 },
		func(c *Config) { c.Replicas = 6 },
		func(c *Config) { c.Rate = 0 },
		func(c *Config) { c.Duration = 0 },
		func(c *Config) { c.Duration = 11 * time.Minute },
		func(c *Config) { c.Warmup = -time.Second },
		func(c *Config) { c.Size = minSize - 1 },
		func(c *Config) { c.Size = maxSize + 1 },
		func(c *Config) { c.Mode = "spin" },
		func(c *Config) { c.SchedPolicy = "fifo" },
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, c)
		}
	}
}

func TestNodeRejectsBadArgs(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-file", filepath.Join(dir, "x"), "-mode", "spin"},
		{"-file", filepath.Join(dir, "x"), "-size", "1"},
		{"-mode", ModeThread},
		{"-file", filepath.Join(dir, "x"), "-peers", "127.0.0.1:1"}, // nothing listens there
	} {
		var out strings.Builder
		if err := NodeMain(args, &out); err == nil {
			t.Errorf("%v accepted", args)
		}
		if out.Len() != 0 {
			t.Errorf("%v printed %q before failing", args, out.String())
		}
	}
}

// scriptedUp is an upstream link that delivers n messages, then EOF, and
// records how each answer left: written, or handed to the next read.
type scriptedUp struct {
	n              int
	written, armed int
}

func (u *scriptedUp) readFull(p []byte) error {
	if u.n == 0 {
		return io.EOF
	}
	u.n--
	return nil
}
func (u *scriptedUp) write([]byte) error { u.written++; return nil }
func (u *scriptedUp) sendWithNextRead([]byte) bool {
	u.armed++
	return true
}

type nopLog struct{}

func (nopLog) start([]byte) error { return nil }
func (nopLog) wait() error        { return nil }

// A follower hands each answer to its next read (which sends it before
// reading, saving the read that would find nothing); a leader, whose
// client sends open loop, writes its answers.
func TestFollowerAnswersWithNextRead(t *testing.T) {
	for _, follower := range []bool{true, false} {
		up := &scriptedUp{n: 3}
		if err := serve(up, nil, nopLog{}, 100, follower); err != nil {
			t.Fatal(err)
		}
		if follower && (up.armed != 3 || up.written != 0) || !follower && (up.armed != 0 || up.written != 3) {
			t.Fatalf("follower=%v: %d answers handed to the next read, %d written", follower, up.armed, up.written)
		}
	}
}
