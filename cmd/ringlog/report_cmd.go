package main

import (
	"time"

	"github.com/ringlog/ringlog/results"
	"github.com/urfave/cli/v2"
)

// reportCommand returns `ringlog report` with its `html`, `merge`,
// `window` and `compare` subcommands (package results does the work).
func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "print the summary of a result directory, with the broker profiles of a profiled run",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "top", Value: 15, Usage: "functions listed per CPU profile", EnvVars: env("top")},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: ringlog report DIR (or report html|merge|window|compare)", 2)
			}
			return results.Report(c.App.Writer, c.Args().First(), c.Int("top"))
		},
		Subcommands: []*cli.Command{
			{
				Name:      "html",
				Usage:     "write report.html of a result directory again with this version's report (older runs included)",
				ArgsUsage: "DIR",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Usage: "write the page here (default report.html in DIR)", EnvVars: env("out")},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cli.Exit("usage: ringlog report html [--out FILE] DIR", 2)
					}
					return usageExit(results.RenderDir(c.App.Writer, c.Args().First(), c.String("out")))
				},
			},
			{
				Name:      "merge",
				Usage:     "merge the histograms of runs made by several generator processes",
				ArgsUsage: "DIR...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Usage: "directory for the merged result", Required: true, EnvVars: env("out")},
					&cli.StringFlag{Name: "label", Value: "merged", EnvVars: env("label")},
				},
				Action: func(c *cli.Context) error {
					_, err := results.MergeDirs(c.App.Writer, c.App.ErrWriter, c.String("out"), c.String("label"), c.Args().Slice())
					return usageExit(err)
				},
			},
			{
				Name:      "window",
				Usage:     "acknowledgement latency of part of a run (e.g. while a partition move ran), from its interval log",
				ArgsUsage: "DIR",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "from", Usage: "window start, from the start of the measured window (after warmup)", EnvVars: env("from")},
					&cli.DurationFlag{Name: "to", Value: 24 * time.Hour, Usage: "window end (default: the end of the run)", EnvVars: env("to")},
					&cli.BoolFlag{Name: "intervals", Usage: "also print each interval of the window", EnvVars: env("intervals")},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 || c.Duration("to") <= c.Duration("from") {
						return cli.Exit("usage: ringlog report window --from D --to D DIR (flags before DIR; to after from)", 2)
					}
					return usageExit(results.WriteWindow(c.App.Writer, c.Args().First(), c.Duration("from"), c.Duration("to"), c.Bool("intervals")))
				},
			},
			{
				Name:      "compare",
				Usage:     "put runs side by side (table, plus an overlaid percentile plot); prints where it wrote the page",
				ArgsUsage: "DIR DIR...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "html", Usage: "write the comparison page here (default compare.html in the first DIR, replaced if there)", EnvVars: env("html")},
				},
				Action: func(c *cli.Context) error {
					return usageExit(results.CompareDirs(c.App.Writer, c.String("html"), c.Args().Slice()))
				},
			},
		},
	}
}
