package results

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
)

// Commands returns the `report` command with its `merge` and `compare`
// subcommands, for cmd/ringlog.
func Commands() []*cli.Command {
	return []*cli.Command{{
		Name:      "report",
		Usage:     "print the summary of a result directory, with the broker profiles of a profiled run",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "top", Value: 15, Usage: "functions listed per CPU profile", EnvVars: []string{"RINGLOG_TOP"}},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: ringlog report DIR (or report merge|compare)", 2)
			}
			run, err := Load(c.Args().First())
			if err != nil {
				return err
			}
			WriteSummary(c.App.Writer, &run.Result)
			WriteProfiles(c.App.Writer, run.Dir, &run.Result, nil, c.Int("top"))
			return nil
		},
		Subcommands: []*cli.Command{
			{
				Name:      "merge",
				Usage:     "merge the histograms of runs made by several generator processes",
				ArgsUsage: "DIR...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Usage: "directory for the merged result", Required: true, EnvVars: []string{"RINGLOG_OUT"}},
					&cli.StringFlag{Name: "label", Value: "merged", EnvVars: []string{"RINGLOG_LABEL"}},
				},
				Action: func(c *cli.Context) error {
					runs, err := loadAll(c.Args().Slice())
					if err != nil {
						return err
					}
					merged, err := Merge(runs)
					if err != nil {
						return err
					}
					merged.Result.Label = c.String("label")
					for _, w := range merged.Result.Warnings {
						fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w)
					}
					if err := merged.Write(c.String("out")); err != nil {
						return err
					}
					WriteSummary(c.App.Writer, &merged.Result)
					return nil
				},
			},
			{
				Name:      "compare",
				Usage:     "put runs side by side (table, plus an overlaid percentile plot)",
				ArgsUsage: "DIR DIR...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "html", Usage: "write the overlay page here (default compare.html in the first DIR)", EnvVars: []string{"RINGLOG_HTML"}},
				},
				Action: func(c *cli.Context) error {
					runs, err := loadAll(c.Args().Slice())
					if err != nil {
						return err
					}
					WriteCompare(c.App.Writer, runs)
					out := c.String("html")
					if out == "" {
						out = filepath.Join(runs[0].Dir, "compare.html")
					}
					if err := os.WriteFile(out, RenderCompareHTML(runs), 0o644); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "overlay: %s\n", out)
					return nil
				},
			},
		},
	}}
}

func loadAll(dirs []string) ([]*Run, error) {
	if len(dirs) == 0 {
		return nil, cli.Exit("need at least one result directory", 2)
	}
	runs := make([]*Run, 0, len(dirs))
	for _, d := range dirs {
		r, err := Load(d)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}
