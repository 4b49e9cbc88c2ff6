package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// devProc is a `ringlog dev ...` command under test: its stdout lines
// arrive on lines; SIGINT (Ctrl-C) stops it, at the latest on cleanup.
type devProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	exited chan error
	stderr syncBuffer
}

func startDev(t *testing.T, args ...string) *devProc {
	t.Helper()
	d := &devProc{t: t, cmd: exec.Command(ringlogBin, append([]string{"dev"}, args...)...), lines: make(chan string, 64), exited: make(chan error, 1)}
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
	kafka, ctrl, admin := freePortRun(t, 4), freePortRun(t, 4), freePortRun(t, 4)
	base := t.TempDir()
	cluster := startDev(t, "cluster", "--nodes", "3", "--base-dir", base,
		"--kafka-port", fmt.Sprint(kafka), "--controller-port", fmt.Sprint(ctrl), "--admin-port", fmt.Sprint(admin),
		"--", "--io", ioMode(), "--broker-session-timeout", testSessionTimeout.String())
	cluster.waitLine("cluster ready: ", 90*time.Second)

	// Ids the cluster runs are refused before anything starts.
	if out, err := exec.Command(ringlogBin, "dev", "join", "--base-dir", base, "--node-id", "2").CombinedOutput(); err == nil || !strings.Contains(string(out), "--node-id 2") {
		t.Fatalf("dev join --node-id 2 into a 3-node cluster: %v\n%s", err, out)
	}

	join := startDev(t, "join", "--base-dir", base, "--node-id", "4")
	join.waitLine("broker 4 joined: ", 60*time.Second)
	c := &testCluster{t: t}
	for i := range 4 {
		c.nodes = append(c.nodes, &brokerProc{t: t, addr: fmt.Sprintf("127.0.0.1:%d", kafka+i)})
	}
	// Every node, asked itself, lists the four brokers.
	listed := func(want []int32) func() (bool, string) {
		return func() (bool, string) {
			for i, b := range c.nodes[:len(want)] {
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
	eventually(t, 20*time.Second, "four brokers listed everywhere", listed([]int32{1, 2, 3, 4}))
	if _, err := os.Stat(filepath.Join(base, "node-4", "data")); err != nil {
		t.Fatalf("joined broker's data dir: %v", err)
	}

	if err := join.interrupt(40 * time.Second); err != nil {
		t.Fatalf("dev join after Ctrl-C: %v\n%s", err, join.stderr.String())
	}
	eventually(t, 3*testSessionTimeout, "the stopped broker no longer listed", listed([]int32{1, 2, 3}))
	if err := cluster.interrupt(40 * time.Second); err != nil {
		t.Fatalf("dev cluster after Ctrl-C: %v\n%s", err, cluster.stderr.String())
	}
}

// TestDevClusterVoters: --voters N makes nodes 1..N the controller quorum
// and the others brokers that join it with their own controller address;
// dev join reads the same quorum back from cluster.json.
func TestDevClusterVoters(t *testing.T) {
	layout := func(args ...string) (devLayout, error) {
		var l devLayout
		var lerr error
		cmd := devClusterCommand()
		cmd.Action = func(c *cli.Context) error {
			l, lerr = devClusterLayout(c)
			return nil
		}
		app := &cli.App{Name: "ringlog", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
		if err := app.Run(append([]string{"ringlog", "cluster"}, args...)); err != nil {
			return l, err
		}
		return l, lerr
	}
	l, err := layout("--nodes", "3")
	if err != nil || !slices.Equal(l.Voters, []string{"1@127.0.0.1:9192", "2@127.0.0.1:9193", "3@127.0.0.1:9194"}) {
		t.Fatalf("default: %+v %v", l, err)
	}
	l, err = layout("--nodes", "4", "--voters", "3", "--controller-port", "7000", "--", "--io", "sync")
	if err != nil || !slices.Equal(l.Voters, []string{"1@127.0.0.1:7000", "2@127.0.0.1:7001", "3@127.0.0.1:7002"}) || !slices.Equal(l.Extra, []string{"--io", "sync"}) {
		t.Fatalf("--voters 3 of 4: %+v %v", l, err)
	}
	// Node 4 is a broker: not among the voters, with a controller address
	// of its own, and its command line parses as serve's.
	args := l.node("/d", 4).serveArgs(l.Voters, l.Extra)
	if i := slices.Index(args, "--controller-listen"); i < 0 || args[i+1] != "127.0.0.1:7003" {
		t.Fatalf("node 4 args %v", args)
	}
	if err := checkServeArgs(args); err != nil {
		t.Fatalf("node 4 args %v: %v", args, err)
	}
	// The layout survives the trip through cluster.json.
	js, _ := json.Marshal(l)
	var back devLayout
	if err := json.Unmarshal(js, &back); err != nil || !slices.Equal(back.Voters, l.Voters) || back.ControllerPort != 7000 || back.Nodes != 4 {
		t.Fatalf("cluster.json round trip: %+v %v", back, err)
	}
	for _, bad := range [][]string{{"--nodes", "3", "--voters", "4"}, {"--nodes", "3", "--voters", "-1"}, {"--nodes", "10"}} {
		if _, err := layout(bad...); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}
