package main

import (
	"github.com/ringlog/ringlog/results"
	"github.com/urfave/cli/v2"
)

// reportCommand returns `ringlog report` with its `merge` and `compare`
// subcommands (package results does the work).
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
				return cli.Exit("usage: ringlog report DIR (or report merge|compare)", 2)
			}
			return results.Report(c.App.Writer, c.Args().First(), c.Int("top"))
		},
		Subcommands: []*cli.Command{
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
				Name:      "compare",
				Usage:     "put runs side by side (table, plus an overlaid percentile plot)",
				ArgsUsage: "DIR DIR...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "html", Usage: "write the overlay page here (default compare.html in the first DIR)", EnvVars: env("html")},
				},
				Action: func(c *cli.Context) error {
					return usageExit(results.CompareDirs(c.App.Writer, c.String("html"), c.Args().Slice()))
				},
			},
		},
	}
}
