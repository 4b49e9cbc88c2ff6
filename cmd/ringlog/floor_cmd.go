package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ringlog/ringlog/loadgen/floor"
)

// floorCommand is `ringlog floor`: the machine's own cost of a replicated
// round, the yardstick for bench's per-message CPU and context switches.
func floorCommand() *cli.Command {
	d := floor.DefaultConfig()
	return &cli.Command{
		Name:  "floor",
		Usage: "measure the cheapest replicated round this machine allows (minimal nodes on loopback: receive, durable write, forward, answer), to read bench's per-message CPU against",
		Description: "Starts --replicas minimal processes (a leader and its followers) and sends them fixed-size messages at --rate, open loop.\n" +
			"Per message each node writes it to its log (O_DIRECT|O_DSYNC with --fsync always) and the leader waits for every follower.\n" +
			"Prints CPU-µs and context switches per message, summed over the nodes and per node, and the latency.\n" +
			"--mode netpoll waits the way Go servers do (the netpoller, and a blocking write); --mode uring waits on the netpoller\n" +
			"too but writes through an io_uring as the broker's storage engine does; --mode thread blocks one thread per node in its\n" +
			"own system calls, as a C server would; all runs the three back to back. Compare with\n" +
			"`ringlog bench --brokers N --rate R --client kgo --linger 0` on the same machine.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "replicas", Value: d.Replicas, Usage: "nodes in the round (1: a single durable server)", EnvVars: env("replicas")},
			&cli.IntFlag{Name: "rate", Value: d.Rate, Usage: "messages per second", EnvVars: env("rate")},
			&cli.DurationFlag{Name: "duration", Value: d.Duration, Usage: "measured time", EnvVars: env("duration")},
			&cli.DurationFlag{Name: "warmup", Value: d.Warmup, Usage: "sent before measuring", EnvVars: env("warmup")},
			&cli.IntFlag{Name: "message-size", Value: d.Size, Usage: "bytes per message", EnvVars: env("message-size")},
			&cli.StringFlag{Name: "mode", Value: "all", Usage: strings.Join(floor.Modes, " | ") + " | all", EnvVars: env("mode")},
			&cli.StringFlag{Name: "fsync", Value: "always", Usage: "always (a durable write per message on every node) | never (a page-cache write)", EnvVars: env("fsync")},
			&cli.StringFlag{Name: "dir", Usage: "directory for the nodes' logs, on the disk to measure (default: a temporary directory)", EnvVars: env("dir")},
			&cli.StringFlag{Name: "node-max-procs", Value: "auto", Usage: "GOMAXPROCS of each node: auto (the cores split among the nodes, as bench's --broker-max-procs) | N | 0 (Go's default)", EnvVars: env("node-max-procs")},
			&cli.StringFlag{Name: "node-sched-policy", Value: d.SchedPolicy, Usage: "scheduling policy of each node's threads: batch (serve's default for brokers) | normal", EnvVars: env("node-sched-policy")},
			&cli.StringFlag{Name: "json-file", Usage: "also write the results to this file as JSON", EnvVars: env("json-file")},
		},
		Action: func(c *cli.Context) error {
			if runtime.GOOS != "linux" {
				return cli.Exit("floor: Linux only", 1)
			}
			cfg := d
			cfg.Replicas, cfg.Rate, cfg.Duration, cfg.Warmup = c.Int("replicas"), c.Int("rate"), c.Duration("duration"), c.Duration("warmup")
			cfg.Size, cfg.Dir, cfg.SchedPolicy = c.Int("message-size"), c.String("dir"), c.String("node-sched-policy")
			if v := c.String("node-max-procs"); v != "auto" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return cli.Exit(fmt.Sprintf("floor: --node-max-procs %q: want auto, 0 (Go's default) or a count of threads", v), 2)
				}
				cfg.MaxProcs = n
			}
			switch c.String("fsync") {
			case "always":
				cfg.Fsync = true
			case "never":
				cfg.Fsync = false
			default:
				return cli.Exit(fmt.Sprintf("floor: --fsync %q is not always or never", c.String("fsync")), 2)
			}
			modes := []string{c.String("mode")}
			if modes[0] == "all" {
				modes = slices.Clone(floor.Modes)
				// Where the kernel refuses io_uring, "all" measures the
				// others and says why it left one out.
				if why := floor.UringUnavailable(); why != "" {
					fmt.Fprintf(c.App.ErrWriter, "floor: leaving out --mode %s: io_uring unavailable here: %s\n", floor.ModeUring, why)
					modes = slices.DeleteFunc(modes, func(m string) bool { return m == floor.ModeUring })
				}
			}
			for _, m := range modes {
				cfg.Mode = m
				if err := cfg.Validate(); err != nil {
					return cli.Exit(err.Error(), 2)
				}
			}
			// Ctrl-C stops the nodes and removes their logs' directory.
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			var all []floor.Result
			for _, m := range modes {
				cfg.Mode = m
				r, err := floor.Run(ctx, cfg)
				if err != nil {
					return err
				}
				fmt.Fprint(c.App.Writer, r)
				all = append(all, r)
			}
			if p := c.String("json-file"); p != "" {
				b, err := json.MarshalIndent(all, "", "  ")
				if err != nil {
					return err
				}
				return os.WriteFile(p, append(b, '\n'), 0o644)
			}
			return nil
		},
		Subcommands: []*cli.Command{{
			Name:            "node",
			Usage:           "(internal) one node of the round",
			Hidden:          true,
			SkipFlagParsing: true,
			Action: func(c *cli.Context) error {
				return floor.NodeMain(c.Args().Slice(), os.Stdout)
			},
		}},
	}
}
