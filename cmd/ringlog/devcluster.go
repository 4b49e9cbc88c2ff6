//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/broker"
	"github.com/urfave/cli/v2"
)

// `ringlog dev cluster` runs an N-node cluster on loopback for trying
// things out: every node is a controller voter and a broker (combined
// mode), with its own data dir and log file under --base-dir. It runs until
// SIGINT/SIGTERM, then stops every node with SIGTERM.
//
// Each node is a `ringlog serve` child process, not a broker.Broker in this
// process: a node that fails or is killed takes only itself down, its log
// is its own file, and the process-wide settings (profiling rates, the
// default logger) stay per node. The child's command line is rendered in
// one place (devNode.serveArgs) and parsed here first, through serve's own
// flags into a broker.Config, so a bad extra flag fails before any node
// starts.

func devClusterCommand() *cli.Command {
	return &cli.Command{
		Name:      "cluster",
		Usage:     "run an N-node cluster on 127.0.0.1 until Ctrl-C (extra serve flags after --)",
		ArgsUsage: "[-- serve flags...]",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "number of nodes (all controller voters and brokers)"},
			&cli.StringFlag{Name: "base-dir", Value: "./cluster-data", Usage: "parent of node-N/data and node-N/ringlog.log"},
			&cli.IntFlag{Name: "kafka-port", Value: 9092, Usage: "Kafka port of node 1; node N uses kafka-port+N-1"},
			&cli.IntFlag{Name: "controller-port", Value: 9192, Usage: "controller port of node 1; node N uses controller-port+N-1"},
			&cli.IntFlag{Name: "admin-port", Value: 9644, Usage: "admin (/healthz) port of node 1; node N uses admin-port+N-1"},
		},
		Action: runDevCluster,
	}
}

type devNode struct {
	id                   int
	kafka, admin, ctrl   string
	cmd                  *exec.Cmd
	exited               chan error
	logPath, dataDirPath string
}

func runDevCluster(c *cli.Context) error {
	n := c.Int("nodes")
	if n < 1 || n > 9 {
		return fmt.Errorf("--nodes %d: want 1..9", n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	base := c.String("base-dir")
	nodes := make([]*devNode, n)
	var voters []string
	for i := range nodes {
		id := i + 1
		nd := &devNode{
			id:    id,
			kafka: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Int("kafka-port")+i)),
			admin: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Int("admin-port")+i)),
			ctrl:  net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Int("controller-port")+i)),
		}
		dir := filepath.Join(base, fmt.Sprintf("node-%d", id))
		nd.dataDirPath, nd.logPath = filepath.Join(dir, "data"), filepath.Join(dir, "ringlog.log")
		if err := os.MkdirAll(nd.dataDirPath, 0o755); err != nil {
			return err
		}
		nodes[i] = nd
		voters = append(voters, fmt.Sprintf("%d@%s", id, nd.ctrl))
	}
	for _, nd := range nodes {
		if err := checkServeArgs(nd.serveArgs(voters, c.Args().Slice())); err != nil {
			return fmt.Errorf("node %d: %w", nd.id, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	defer stopDevNodes(nodes)
	for _, nd := range nodes {
		logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer logf.Close()
		nd.cmd = exec.Command(self, nd.serveArgs(voters, c.Args().Slice())...)
		nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
		// Own process group: Ctrl-C in the terminal reaches only us, and
		// we stop the nodes in order.
		nd.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := nd.cmd.Start(); err != nil {
			return err
		}
		nd.exited = make(chan error, 1)
		go func(nd *devNode) { nd.exited <- nd.cmd.Wait() }(nd)
		fmt.Fprintf(c.App.Writer, "node %d: kafka %s  controller %s  admin http://%s/healthz  log %s\n", nd.id, nd.kafka, nd.ctrl, nd.admin, nd.logPath)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, nd := range nodes {
		for {
			if h, err := devHealth(nd.admin); err == nil && h["status"] == "ok" {
				break
			}
			select {
			case err := <-nd.exited:
				nd.exited <- err
				return fmt.Errorf("node %d exited during startup (%v); see %s", nd.id, err, nd.logPath)
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d not ready after 60s; see %s", nd.id, nd.logPath)
			}
		}
	}
	var boot []string
	for _, nd := range nodes {
		boot = append(boot, nd.kafka)
	}
	h, _ := devHealth(nodes[0].admin)
	fmt.Fprintf(c.App.Writer, "cluster ready: bootstrap %s  cluster id %v  controller %v\nCtrl-C stops all nodes\n",
		strings.Join(boot, ","), h["cluster_id"], h["controller_id"])
	// Any node exiting on its own ends the cluster too: a dev cluster
	// with a silently dead node would mislead.
	died := make(chan *devNode, len(nodes))
	for _, nd := range nodes {
		go func(nd *devNode) {
			err := <-nd.exited
			nd.exited <- err
			died <- nd
		}(nd)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(c.App.Writer, "stopping nodes")
		return nil
	case nd := <-died:
		return fmt.Errorf("node %d exited; see %s", nd.id, nd.logPath)
	}
}

// serveArgs is the node's `ringlog serve` command line: its identity,
// listeners and data dir, then the user's extra flags.
func (nd *devNode) serveArgs(voters, extra []string) []string {
	return append([]string{"serve",
		"--node-id", strconv.Itoa(nd.id),
		"--listen", nd.kafka,
		"--admin-listen", nd.admin,
		"--controller-listen", nd.ctrl,
		"--controller-voters", strings.Join(voters, ","),
		"--data-dir", nd.dataDirPath,
	}, extra...)
}

// checkServeArgs parses a serve command line as the child will, into a
// broker.Config, and validates it.
func checkServeArgs(args []string) error {
	cfg, err := parseServeArgs(args)
	if err != nil {
		return err
	}
	return cfg.Validate()
}

// parseServeArgs runs serve's flag parsing (environment included) and
// configFromFlags on args, without starting anything.
func parseServeArgs(args []string) (broker.Config, error) {
	var cfg broker.Config
	parse := serveCommand()
	parse.Action = func(c *cli.Context) (err error) {
		cfg, err = configFromFlags(c)
		return err
	}
	// Flag errors come back as the error, not as a help page.
	parse.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return err }
	app := &cli.App{
		Name:     "ringlog",
		Commands: []*cli.Command{parse},
		Writer:   io.Discard, ErrWriter: io.Discard,
		OnUsageError: parse.OnUsageError,
	}
	err := app.Run(append([]string{"ringlog"}, args...))
	return cfg, err
}

// stopDevNodes sends SIGTERM to every running node and waits up to 30 s for
// each, then SIGKILLs.
func stopDevNodes(nodes []*devNode) {
	for _, nd := range nodes {
		if nd != nil && nd.cmd != nil && nd.cmd.Process != nil {
			nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	var errs []error
	for _, nd := range nodes {
		if nd == nil || nd.exited == nil {
			continue
		}
		select {
		case err := <-nd.exited:
			nd.exited <- err
		case <-time.After(30 * time.Second):
			nd.cmd.Process.Kill()
			errs = append(errs, fmt.Errorf("node %d ignored SIGTERM", nd.id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

func devHealth(admin string) (map[string]any, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + admin + "/healthz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var h map[string]any
	return h, json.NewDecoder(resp.Body).Decode(&h)
}
