package main

import (
	"os"

	"github.com/ringlog/ringlog/examples/offsets"
	"github.com/urfave/cli/v2"
)

// exampleCommand wires `ringlog example offsets` to examples/offsets; the
// walkthrough re-runs this binary as `example offsets consumer` for each
// consumer process, so that it can be killed between write and commit.
func exampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "example",
		Usage: "runnable walkthroughs",
		Subcommands: []*cli.Command{{
			Name:  "offsets",
			Usage: "committed offsets, a consumer crash between write and commit, and an idempotent destination",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Usage: "working directory (default: a new temporary one, removed at the end)"},
			},
			Action: func(c *cli.Context) error {
				if !serveSupported {
					return errServeUnsupported // the walkthrough starts a broker
				}
				bin, err := os.Executable()
				if err != nil {
					return err
				}
				_, err = offsets.Run(c.Context, offsets.Config{Dir: c.String("dir"), Bin: bin,
					ConsumerArgs: []string{"example", "offsets", "consumer"}}, os.Stdout)
				return err
			},
			Subcommands: []*cli.Command{{
				Name:   "consumer",
				Usage:  "(internal) one consumer process of the walkthrough",
				Hidden: true,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "broker", Required: true},
					&cli.StringFlag{Name: "db", Required: true},
					&cli.Int64Flag{Name: "stop-after", Value: -1, Usage: "exit after committing past this offset"},
					&cli.Int64Flag{Name: "crash-at", Value: -1, Usage: "after writing this offset's effect, report and wait to be killed (no commit)"},
				},
				Action: func(c *cli.Context) error {
					return offsets.RunConsumer(c.Context, offsets.ConsumerConfig{Broker: c.String("broker"), DB: c.String("db"),
						StopAfter: c.Int64("stop-after"), CrashAt: c.Int64("crash-at")}, os.Stdout)
				},
			}},
		}},
	}
}
