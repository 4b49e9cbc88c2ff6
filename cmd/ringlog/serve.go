//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/broker/serveflags"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/cpusched"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:   "serve",
		Usage:  "run a broker",
		Flags:  serveflags.Flags(broker.DefaultConfig()),
		Action: runServe,
	}
}

// serveOptions are the build's version for serveflags.Config; the broker
// has its process to itself.
func serveOptions() serveflags.Options {
	return serveflags.Options{Version: version, Commit: commit}
}

// setGCPercent applies --gc-percent unless GOGC is set: the variable is
// Go's own knob, and whoever set it meant it.
func setGCPercent(pct int, log *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("GOGC is set; --gc-percent ignored", "GOGC", v)
		return
	}
	debug.SetGCPercent(pct)
}

// setMaxProcs applies --max-procs unless GOMAXPROCS is set.
func setMaxProcs(n int, log *slog.Logger) error {
	switch {
	case n < 0:
		return fmt.Errorf("--max-procs %d: want 0 (Go's default) or more", n)
	case n == 0:
		return nil
	}
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		log.Info("GOMAXPROCS is set; --max-procs ignored", "GOMAXPROCS", v)
		return nil
	}
	runtime.GOMAXPROCS(n)
	return nil
}

// setSchedPolicy applies --sched-policy to every thread of the process. A
// kernel or sandbox that refuses the call leaves the broker on the default
// policy, with a warning: the policy changes what the broker costs, not
// what it does. An unknown name is an error.
func setSchedPolicy(name string, log *slog.Logger) error {
	if err := cpusched.Check(name); err != nil {
		return fmt.Errorf("--sched-policy: %w", err)
	}
	if err := cpusched.Apply(name); err != nil {
		log.Warn("scheduling policy not applied; threads keep the kernel's default", "sched_policy", name, "err", err)
	}
	return nil
}

func runServe(c *cli.Context) error {
	cfg, err := serveflags.Config(c, serveOptions())
	if err != nil {
		return err
	}
	log := cfg.Logger
	slog.SetDefault(log)
	setGCPercent(c.Int("gc-percent"), log)
	if err := setMaxProcs(c.Int("max-procs"), log); err != nil {
		return err
	}
	if err := setSchedPolicy(c.String("sched-policy"), log); err != nil {
		return err
	}
	// Checked before the data dir is touched.
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Engine.FS != nil {
		log.Warn("fault injection on (--fault-injection): a test facility, do not use in production")
	}
	b, err := broker.New(cfg)
	if errors.Is(err, engine.ErrIOUringUnusable) {
		return fmt.Errorf("--io uring: %w (use --io auto to fall back to the pwrite/fdatasync path, or --io sync)", err)
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runErr := b.Start(ctx)
	switch {
	case runErr == nil:
		<-ctx.Done()
	case ctx.Err() != nil && errors.Is(runErr, ctx.Err()):
		runErr = nil // a signal while joining: a clean stop
	}
	log.Info("shutting down")
	b.Drain(context.Background())
	if err := b.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr == nil {
		log.Info("clean shutdown complete")
	}
	return runErr
}
