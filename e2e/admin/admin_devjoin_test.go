package admin

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
)

// devProc is a `ringlog dev ...` command under test: its stdout lines
// arrive on lines; SIGINT (Ctrl-C) stops it, at the latest on cleanup.
type devProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	exited chan error
	stderr harness.SyncBuffer
}

func startDev(t *testing.T, args ...string) *devProc {
	t.Helper()
	d := &devProc{t: t, cmd: exec.Command(harness.RinglogBin, append([]string{"dev"}, args...)...), lines: make(chan string, 64), exited: make(chan error, 1)}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
		d.exited <- d.cmd.Wait()
	}()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.interrupt(40 * time.Second)
		}
	})
	return d
}

// waitLine returns the rest of the first stdout line starting with prefix.
func (d *devProc) waitLine(prefix string, limit time.Duration) string {
	d.t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("dev %v ended before printing %q: %v\n%s", d.cmd.Args[2:], prefix, <-d.exited, d.stderr.String())
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest
			}
		case <-timeout:
			d.t.Fatalf("dev %v: no %q after %v\n%s", d.cmd.Args[2:], prefix, limit, d.stderr.String())
		}
	}
}

// interrupt sends SIGINT and waits for the exit status.
func (d *devProc) interrupt(limit time.Duration) error {
	d.cmd.Process.Signal(syscall.SIGINT)
	go func() {
		for range d.lines { // keep the pipe drained
		}
	}()
	select {
	case err := <-d.exited:
		return err
	case <-time.After(limit):
		d.cmd.Process.Kill()
		return fmt.Errorf("still running %v after SIGINT", limit)
	}
}

// TestAdminDevJoin: the scale-out experiment from the README. `ringlog dev
// cluster --nodes 3` runs, `ringlog dev join --node-id 4` adds a broker on
// the same port scheme that every node then lists; Ctrl-C stops the joined
// broker alone (the cluster drops it from its live brokers) and then the
// cluster.
func TestAdminDevJoin(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // dev join's serve processes
	kafka, ctrl, admin := harness.FreePortRun(t, 4), harness.FreePortRun(t, 4), harness.FreePortRun(t, 4)
	base := t.TempDir()
	cluster := startDev(t, "cluster", "--nodes", "3", "--base-dir", base,
		"--kafka-port", fmt.Sprint(kafka), "--controller-port", fmt.Sprint(ctrl), "--admin-port", fmt.Sprint(admin),
		"--", "--io", harness.IOMode(), "--broker-session-timeout", harness.SessionTimeout.String())
	cluster.waitLine("cluster ready: ", 90*time.Second)

	// Ids the cluster runs are refused before anything starts.
	if out, err := exec.Command(harness.RinglogBin, "dev", "join", "--base-dir", base, "--node-id", "2").CombinedOutput(); err == nil || !strings.Contains(string(out), "--node-id 2") {
		t.Fatalf("dev join --node-id 2 into a 3-node cluster: %v\n%s", err, out)
	}

	join := startDev(t, "join", "--base-dir", base, "--node-id", "4")
	join.waitLine("broker 4 joined: ", 60*time.Second)
	c := &harness.Cluster{T: t}
	for i := range 4 {
		c.Nodes = append(c.Nodes, &harness.BrokerProc{T: t, Addr: fmt.Sprintf("127.0.0.1:%d", kafka+i)})
	}
	// Every node, asked itself, lists the four brokers.
	listed := func(want []int32) func() (bool, string) {
		return func() (bool, string) {
			for i, b := range c.Nodes[:len(want)] {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				meta, described, err := liveBrokers(ctx, b)
				cancel()
				if err != nil || !slices.Equal(meta, want) || !slices.Equal(described, want) {
					return false, fmt.Sprintf("node %d: Metadata %v DescribeCluster %v %v", i+1, meta, described, err)
				}
			}
			return true, ""
		}
	}
	harness.Eventually(t, 20*time.Second, "four brokers listed everywhere", listed([]int32{1, 2, 3, 4}))
	if _, err := os.Stat(filepath.Join(base, "node-4", "data")); err != nil {
		t.Fatalf("joined broker's data dir: %v", err)
	}

	if err := join.interrupt(40 * time.Second); err != nil {
		t.Fatalf("dev join after Ctrl-C: %v\n%s", err, join.stderr.String())
	}
	harness.Eventually(t, 3*harness.SessionTimeout, "the stopped broker no longer listed", listed([]int32{1, 2, 3}))
	if err := cluster.interrupt(40 * time.Second); err != nil {
		t.Fatalf("dev cluster after Ctrl-C: %v\n%s", err, cluster.stderr.String())
	}
}
