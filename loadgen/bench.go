package loadgen

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

// LocalBroker is a broker process started on loopback for a benchmark.
type LocalBroker struct {
	Addr, AdminAddr, DataDir string
	cmd                      *exec.Cmd
	exited                   chan error
}

// freePort asks the kernel for an unused loopback port.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// StartLocalBroker runs `bin serve --listen A --data-dir D --admin-listen B`
// and waits until A accepts connections.
func StartLocalBroker(bin, dataDir string, logTo io.Writer) (*LocalBroker, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir, "--admin-listen", admin)
	cmd.Stdout, cmd.Stderr = logTo, logTo
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &LocalBroker{Addr: addr, AdminAddr: admin, DataDir: dataDir, cmd: cmd, exited: make(chan error, 1)}
	go func() { b.exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return b, nil
		}
		select {
		case err := <-b.exited:
			return nil, fmt.Errorf("broker %s exited before listening: %v", bin, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("broker %s: %s not accepting after 20s", bin, addr)
		}
	}
}

// Pid is the broker's process id (tests pause it with SIGSTOP).
func (b *LocalBroker) Pid() int { return b.cmd.Process.Pid }

// Stop sends SIGTERM, and SIGKILL if the broker has not exited in 10 s.
func (b *LocalBroker) Stop() error {
	b.cmd.Process.Signal(syscall.SIGCONT) // a paused broker cannot handle SIGTERM
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-b.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
			return nil
		}
		return err
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
		return fmt.Errorf("broker did not exit on SIGTERM; killed")
	}
}

func benchCommand() *cli.Command {
	d := DefaultConfig()
	d.Duration = 20 * time.Second
	d.Warmup = 3 * time.Second
	d.Rate = 20_000
	d.MessageSize = 1000 // the design sizes 1,000-byte messages
	d.Partitions = 8
	d.Consumers = 1
	d.Topic = "ringlog-bench"
	flags := []cli.Flag{
		&cli.IntFlag{Name: "brokers", Value: 1, Usage: "brokers to start (only 1 until replication lands)", EnvVars: envVar("brokers")},
		&cli.StringFlag{Name: "broker-bin", Usage: "broker binary (default: this ringlog executable)", EnvVars: envVar("broker-bin")},
	}
	for _, f := range workloadFlags(d) {
		switch f.Names()[0] {
		case "bootstrap", "broker-admin":
			continue // bench starts its own broker
		case "out":
			f = &cli.StringFlag{Name: "out", Usage: "report directory (default ./bench-results/<timestamp>)", EnvVars: envVar("out")}
		}
		flags = append(flags, f)
	}
	return &cli.Command{
		Name:   "bench",
		Usage:  "start a local ringlog on loopback, run a default workload, print the report and the p99 verdict",
		Flags:  flags,
		Action: benchAction,
	}
}

func benchAction(c *cli.Context) error {
	if n := c.Int("brokers"); n != 1 {
		return cli.Exit(fmt.Sprintf("bench: --brokers %d: only a 1-broker cluster can be started so far", n), 2)
	}
	bin := c.String("broker-bin")
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "ringlog-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logf, err := os.Create(filepath.Join(tmp, "broker.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	broker, err := StartLocalBroker(bin, filepath.Join(tmp, "data"), logf)
	if err != nil {
		return err
	}
	defer broker.Stop()
	cfg, err := benchConfig(c, broker)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	out := c.String("out")
	if out == "" {
		out = filepath.Join("bench-results", time.Now().Format("20060102-150405"))
	}
	ctx, cancel := signalContext()
	defer cancel()
	fmt.Fprintf(c.App.Writer, "bench: broker %s (admin %s), %.0f msg/s of %d bytes for %v after %v warmup\n",
		broker.Addr, broker.AdminAddr, cfg.Rate, cfg.MessageSize, cfg.Duration, cfg.Warmup)
	run, err := Run(ctx, cfg, c.App.Writer)
	if err != nil {
		return err
	}
	return finish(run, cfg, out, c.App.Writer)
}

// benchConfig reads the workload flags and points them at the local broker.
func benchConfig(c *cli.Context, b *LocalBroker) (Config, error) {
	cfg, err := configFromLookup(c)
	cfg.Bootstrap = []string{b.Addr}
	cfg.BrokerAdmin = b.AdminAddr
	if cfg.Label == "" {
		cfg.Label = "bench"
	}
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}
