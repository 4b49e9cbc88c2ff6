//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/internal/launch"

	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/broker/serveflags"
	"github.com/urfave/cli/v2"
)

// `ringlog dev cluster` runs an N-node cluster on loopback for trying
// things out: every node is a broker, the first --voters of them (default
// all) controller voters too (combined mode), the others brokers that
// follow the metadata log as raft non-voters; each has its own data dir
// and log file under --base-dir. It runs until SIGINT/SIGTERM, then stops
// every node with SIGTERM. `ringlog dev join` starts one more broker (a
// non-voter) that joins the dev cluster running in --base-dir, on the
// same port scheme, until Ctrl-C: the scale-out experiment (add a broker,
// rebalance onto it) without writing serve command lines.
//
// Each node is a `ringlog serve` child process, not a broker.Broker in this
// process: a node that fails or is killed takes only itself down, its log
// is its own file, and the process-wide settings (profiling rates, the
// default logger) stay per node. The child's command line is rendered in
// one place (devNode.serveArgs) and parsed here first, through serve's own
// flags into a broker.Config, so a bad extra flag fails before any node
// starts. dev cluster records the quorum, port bases and extra flags in
// --base-dir/cluster.json, which dev join reads. With --object-store it
// also runs the test S3 server of `ringlog dev s3` in this process (nodes
// are killed and restarted, the store stays up) and adds its
// --object-store-* flags before the extra ones, so dev join's brokers get
// them too and an extra flag can still override them.

func devClusterCommand() *cli.Command {
	return &cli.Command{
		Name:      "cluster",
		Usage:     "run an N-node cluster on 127.0.0.1 until Ctrl-C (extra serve flags after --)",
		ArgsUsage: "[-- serve flags...]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "number of nodes (all brokers)"},
			&cli.IntFlag{Name: "voters", Usage: "nodes 1..voters are controller voters, the rest brokers only (raft non-voters); 0: all nodes"},
			&cli.BoolFlag{Name: "object-store", Usage: "tiered storage: run a test S3 server on loopback (objects in --base-dir/object-store) and point every node at it"},
		}, devPortFlags()...),
		Action: runDevCluster,
	}
}

func devJoinCommand() *cli.Command {
	return &cli.Command{
		Name:      "join",
		Usage:     "start one more broker (not a controller voter) joining the dev cluster of --base-dir, until Ctrl-C (extra serve flags after --)",
		ArgsUsage: "[-- serve flags...]",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "node-id", Required: true, Usage: "the new broker's node id, above the cluster's nodes (ports: base+id-1, as dev cluster)"},
			&cli.StringFlag{Name: "base-dir", Value: "./cluster-data", Usage: "the dev cluster's --base-dir; node-N/data and node-N/ringlog.log go there"},
		},
		Action: runDevJoin,
	}
}

func devPortFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "base-dir", Value: "./cluster-data", Usage: "parent of node-N/data and node-N/ringlog.log"},
		&cli.IntFlag{Name: "kafka-port", Value: 9092, Usage: "Kafka port of node 1; node N uses kafka-port+N-1"},
		&cli.IntFlag{Name: "controller-port", Value: 9192, Usage: "controller port of node 1; node N uses controller-port+N-1"},
		&cli.IntFlag{Name: "admin-port", Value: 9644, Usage: "admin (/healthz) port of node 1; node N uses admin-port+N-1"},
	}
}

// devClusterFile is --base-dir/cluster.json: what dev join needs to join.
const devClusterFile = "cluster.json"

// devLayout is a dev cluster's shape: the port bases, node count, the
// controller quorum and the serve flags given after --.
type devLayout struct {
	Nodes          int      `json:"nodes"`
	KafkaPort      int      `json:"kafka_port"`
	ControllerPort int      `json:"controller_port"`
	AdminPort      int      `json:"admin_port"`
	Voters         []string `json:"voters"` // "id@host:port"
	Extra          []string `json:"extra"`
}

// devMaxNodeID keeps node ports below the next kind's base with the
// default bases (9092+98 < 9192).
const devMaxNodeID = 99

// node returns node id of the layout under base.
func (l devLayout) node(base string, id int) *devNode {
	nd := &devNode{
		id:    id,
		kafka: net.JoinHostPort("127.0.0.1", strconv.Itoa(l.KafkaPort+id-1)),
		admin: net.JoinHostPort("127.0.0.1", strconv.Itoa(l.AdminPort+id-1)),
		ctrl:  net.JoinHostPort("127.0.0.1", strconv.Itoa(l.ControllerPort+id-1)),
	}
	dir := filepath.Join(base, fmt.Sprintf("node-%d", id))
	nd.dataDirPath, nd.logPath = filepath.Join(dir, "data"), filepath.Join(dir, "ringlog.log")
	return nd
}

// devClusterLayout computes the layout dev cluster's flags ask for.
func devClusterLayout(c *cli.Context) (devLayout, error) {
	l := devLayout{Nodes: c.Int("nodes"), KafkaPort: c.Int("kafka-port"), ControllerPort: c.Int("controller-port"),
		AdminPort: c.Int("admin-port"), Extra: c.Args().Slice()}
	if l.Nodes < 1 || l.Nodes > 9 {
		return l, fmt.Errorf("--nodes %d: want 1..9", l.Nodes)
	}
	voters := c.Int("voters")
	if voters == 0 {
		voters = l.Nodes
	}
	if voters < 1 || voters > l.Nodes {
		return l, fmt.Errorf("--voters %d: want 1..%d (--nodes)", voters, l.Nodes)
	}
	for id := 1; id <= voters; id++ {
		l.Voters = append(l.Voters, fmt.Sprintf("%d@%s", id, l.node("", id).ctrl))
	}
	return l, nil
}

type devNode struct {
	id                   int
	kafka, admin, ctrl   string
	proc                 *launch.Broker
	logPath, dataDirPath string
}

func runDevCluster(c *cli.Context) error {
	l, err := devClusterLayout(c)
	if err != nil {
		return err
	}
	base := c.String("base-dir")
	if c.Bool("object-store") {
		s3, err := startDevS3(base)
		if err != nil {
			return fmt.Errorf("--object-store: %w", err)
		}
		// Deferred first, so it stops after the nodes.
		defer s3.Stop()
		l.Extra = append(devS3ServeFlags(s3), l.Extra...)
		fmt.Fprintf(c.App.Writer, "object store: s3 endpoint %s  bucket %s  objects in %s\n", s3.Endpoint(), s3.Bucket(), s3.Dir())
	}
	nodes := make([]*devNode, l.Nodes)
	for i := range nodes {
		nodes[i] = l.node(base, i+1)
		if err := checkServeArgs(nodes[i].serveArgs(l.Voters, l.Extra)); err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(l, "", "  ")
	if err := os.WriteFile(filepath.Join(base, devClusterFile), append(js, '\n'), 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	defer stopDevNodes(nodes)
	for _, nd := range nodes {
		if err := nd.start(l.Voters, l.Extra); err != nil {
			return err
		}
		role := "voter"
		if !slices.ContainsFunc(l.Voters, func(v string) bool { return strings.HasPrefix(v, strconv.Itoa(nd.id)+"@") }) {
			role = "broker only"
		}
		fmt.Fprintf(c.App.Writer, "node %d (%s): kafka %s  controller %s  admin http://%s/healthz  log %s\n", nd.id, role, nd.kafka, nd.ctrl, nd.admin, nd.logPath)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, nd := range nodes {
		if ok, err := nd.waitReady(ctx, deadline); !ok {
			return err
		}
	}
	var boot []string
	for _, nd := range nodes {
		boot = append(boot, nd.kafka)
	}
	h, _ := launch.Health(nodes[0].admin)
	fmt.Fprintf(c.App.Writer, "cluster ready: bootstrap %s  cluster id %v  controller %v\nCtrl-C stops all nodes\n",
		strings.Join(boot, ","), h["cluster_id"], h["controller_id"])
	return waitDevNodes(ctx, c.App.Writer, nodes)
}

// runDevJoin starts one broker joining the dev cluster recorded in
// --base-dir, with the cluster's extra serve flags and then its own.
func runDevJoin(c *cli.Context) error {
	base := c.String("base-dir")
	js, err := os.ReadFile(filepath.Join(base, devClusterFile))
	if err != nil {
		return fmt.Errorf("no dev cluster in %s (start one with ringlog dev cluster --base-dir %s): %w", base, base, err)
	}
	var l devLayout
	if err := json.Unmarshal(js, &l); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(base, devClusterFile), err)
	}
	id := c.Int("node-id")
	if id <= l.Nodes || id > devMaxNodeID {
		return fmt.Errorf("--node-id %d: the dev cluster runs nodes 1..%d; want %d..%d", id, l.Nodes, l.Nodes+1, devMaxNodeID)
	}
	nd := l.node(base, id)
	extra := append(slices.Clone(l.Extra), c.Args().Slice()...)
	if err := checkServeArgs(nd.serveArgs(l.Voters, extra)); err != nil {
		return fmt.Errorf("node %d: %w", id, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	nodes := []*devNode{nd}
	defer stopDevNodes(nodes)
	if err := nd.start(l.Voters, extra); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "node %d (broker only): kafka %s  controller %s  admin http://%s/healthz  log %s\n", nd.id, nd.kafka, nd.ctrl, nd.admin, nd.logPath)
	if ok, err := nd.waitReady(ctx, time.Now().Add(60*time.Second)); !ok {
		return err
	}
	h, _ := launch.Health(nd.admin)
	fmt.Fprintf(c.App.Writer, "broker %d joined: kafka %s  cluster id %v  controller %v\nCtrl-C stops it\n", nd.id, nd.kafka, h["cluster_id"], h["controller_id"])
	return waitDevNodes(ctx, c.App.Writer, nodes)
}

// start launches the node's serve process, its output appended to its
// log file.
func (nd *devNode) start(voters, extra []string) error {
	if err := os.MkdirAll(nd.dataDirPath, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// The child holds its own descriptor once started.
	defer logf.Close()
	nd.proc = &launch.Broker{Bin: self, Args: nd.serveArgs(voters, extra), Addr: nd.kafka, Admin: nd.admin, Output: logf,
		// Own process group: Ctrl-C in the terminal reaches only us,
		// and we stop the nodes in order.
		OwnGroup: true}
	// The nodes share this machine's cores (launch.SplitMaxProcs), unless
	// the serve flags or the environment say otherwise.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && !slices.ContainsFunc(extra, isMaxProcsFlag) {
		nd.proc.Env = launch.MaxProcsEnv(launch.SplitMaxProcs(len(voters)))
	}
	return nd.proc.Start()
}

// isMaxProcsFlag reports whether a serve argument sets --max-procs.
func isMaxProcsFlag(a string) bool {
	a = strings.TrimLeft(a, "-")
	return a == "max-procs" || strings.HasPrefix(a, "max-procs=")
}

// waitReady waits until the node's /healthz reports "ok". false with nil:
// ctx ended (Ctrl-C) first.
func (nd *devNode) waitReady(ctx context.Context, deadline time.Time) (bool, error) {
	_, err := nd.proc.WaitReady(ctx, time.Until(deadline))
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, nil
	case errors.Is(err, launch.ErrExited):
		return false, fmt.Errorf("node %d: %v; see %s", nd.id, err, nd.logPath)
	default:
		return false, fmt.Errorf("node %d not ready after 60s; see %s", nd.id, nd.logPath)
	}
}

// waitDevNodes runs until ctx ends or a node exits on its own, which ends
// the command too: a dev cluster with a silently dead node would mislead.
func waitDevNodes(ctx context.Context, w io.Writer, nodes []*devNode) error {
	died := make(chan *devNode, len(nodes))
	for _, nd := range nodes {
		go func(nd *devNode) {
			<-nd.proc.Exited()
			died <- nd
		}(nd)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(w, "stopping nodes")
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

// parseServeArgs parses a serve command line ("serve" and its flags, the
// environment included) as the child will, without starting anything.
func parseServeArgs(args []string) (broker.Config, error) {
	if len(args) == 0 || args[0] != "serve" {
		return broker.Config{}, fmt.Errorf("not a serve command line: %q", args)
	}
	return serveflags.Parse(args[1:], serveOptions())
}

// stopDevNodes sends SIGTERM to every running node, then waits up to 30 s
// for each, then SIGKILLs.
func stopDevNodes(nodes []*devNode) {
	var started []*devNode
	for _, nd := range nodes {
		if nd != nil && nd.proc != nil && nd.proc.Started() {
			nd.proc.Signal(syscall.SIGTERM)
			started = append(started, nd)
		}
	}
	var errs []error
	for _, nd := range started {
		if err := nd.proc.Stop(30 * time.Second); errors.Is(err, launch.ErrKilled) {
			errs = append(errs, fmt.Errorf("node %d ignored SIGTERM", nd.id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
