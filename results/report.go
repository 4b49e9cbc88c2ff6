package results

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The `ringlog report` operations on result directories; cmd/ringlog
// wires them to flags.

// ErrNoDirs: merge and compare need at least one result directory.
var ErrNoDirs = errors.New("need at least one result directory")

// Report writes the summary of the result directory dir to w and, for a
// profiled run, its broker profiles with the top functions of each CPU
// profile.
func Report(w io.Writer, dir string, top int) error {
	run, err := Load(dir)
	if err != nil {
		return err
	}
	res := run.Result
	res.Label = RunName(&res, dir) // an unlabelled run by its directory's name
	WriteSummary(w, &res)
	WriteEnvironment(w, &run.Result)
	WriteProfiles(w, run.Dir, &run.Result, nil, top)
	return nil
}

// MergeDirs merges the histograms of runs made by several generator
// processes, labels the merged run and writes it to out. Each reason the
// runs may not fit together goes to warn ("warning: ...") as well as into
// result.json; the merged summary goes to w.
func MergeDirs(w, warn io.Writer, out, label string, dirs []string) (*Run, error) {
	runs, err := LoadAll(dirs)
	if err != nil {
		return nil, err
	}
	merged, err := Merge(runs)
	if err != nil {
		return nil, err
	}
	merged.Result.Label = label
	for _, m := range merged.Result.Warnings {
		fmt.Fprintf(warn, "warning: %s\n", m)
	}
	if err := merged.Write(out); err != nil {
		return nil, err
	}
	WriteSummary(w, &merged.Result)
	return merged, nil
}

// CompareDirs puts the runs in dirs side by side on w and writes the
// comparison page to html ("": compare.html in the first directory),
// saying where, and whether it replaced an earlier page there.
func CompareDirs(w io.Writer, html string, dirs []string) error {
	runs, err := LoadAll(dirs)
	if err != nil {
		return err
	}
	WriteCompare(w, runs)
	if html == "" {
		html = filepath.Join(runs[0].Dir, "compare.html")
	}
	_, statErr := os.Stat(html)
	if err := os.WriteFile(html, RenderCompareHTML(runs), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(w, wroteLine("comparison page", html, statErr == nil))
	return nil
}

// wroteLine says what was written where: "wrote NAME: PATH", or
// "overwrote the earlier NAME: PATH". The path is absolute when it can
// be, so it can be opened from anywhere.
func wroteLine(what, path string, existed bool) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if existed {
		return fmt.Sprintf("overwrote the earlier %s: %s", what, path)
	}
	return fmt.Sprintf("wrote %s: %s", what, path)
}

// RenderDir writes report.html of the result directory dir again, with
// this version's report (html "": dir/report.html), and says where on w.
// Result directories of earlier versions render too.
func RenderDir(w io.Writer, dir, html string) error {
	run, err := Load(dir)
	if err != nil {
		return err
	}
	page, err := RenderHTML(run)
	if err != nil {
		return err
	}
	if html == "" {
		html = filepath.Join(dir, HTMLFile)
	}
	_, statErr := os.Stat(html)
	if err := os.WriteFile(html, page, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(w, wroteLine("report page", html, statErr == nil))
	return nil
}

// LoadAll loads every result directory in dirs, at least one.
func LoadAll(dirs []string) ([]*Run, error) {
	if len(dirs) == 0 {
		return nil, ErrNoDirs
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
