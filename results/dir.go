package results

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Run is a complete result: the JSON summary plus the interval histograms
// (µs, with Unix-ms start/end times) the percentiles were computed from.
type Run struct {
	Dir       string
	Result    Result
	Ack       []*hdr.Histogram
	E2E       []*hdr.Histogram
	SendDelay []*hdr.Histogram
	// Files are further files of the run (profiles), by path relative to
	// the directory; Write stores them. Load leaves this nil: they stay
	// on disk.
	Files map[string][]byte
}

// Finalize recomputes the latency fields and the SLA verdict of r.Result from
// the interval histograms. Counters and rates are left to the caller.
func (r *Run) Finalize() {
	res := &r.Result
	res.AckLatencyMs = Summarize(MergeAll(r.Ack))
	res.SendDelayMs = Summarize(MergeAll(r.SendDelay))
	res.E2ELatencyMs = nil
	if len(r.E2E) > 0 {
		p := Summarize(MergeAll(r.E2E))
		res.E2ELatencyMs = &p
	}
	res.SLA.Pass = res.Errors == 0 && res.AckLatencyMs.Count > 0 &&
		res.AckLatencyMs.P99 <= res.SLA.TargetP99Ms
}

// startUnixMs is the earliest interval start, the log's base time.
func (r *Run) startUnixMs() int64 {
	if !r.Result.StartedAt.IsZero() {
		return r.Result.StartedAt.UnixMilli()
	}
	var min int64
	for _, set := range [][]*hdr.Histogram{r.Ack, r.E2E, r.SendDelay} {
		for _, h := range set {
			if min == 0 || h.StartTimeMs() < min {
				min = h.StartTimeMs()
			}
		}
	}
	return min
}

// Write stores the run in dir: result.json, .hgrm and .hlog per series, and
// report.html.
func (r *Run) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.Dir = dir
	if err := WriteJSON(dir, &r.Result); err != nil {
		return err
	}
	base := r.startUnixMs()
	series := []struct {
		hs         []*hdr.Histogram
		hgrm, hlog string
		always     bool
	}{
		{r.Ack, AckHgrmFile, AckLogFile, true},
		{r.E2E, E2EHgrmFile, E2ELogFile, false},
		{r.SendDelay, SendDelayHgrmFile, SendDelayLogFile, true},
	}
	for _, s := range series {
		if len(s.hs) == 0 && !s.always {
			continue
		}
		var buf bytes.Buffer
		if err := WriteHgrm(&buf, MergeAll(s.hs)); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, s.hgrm), buf.Bytes(), 0o644); err != nil {
			return err
		}
		buf.Reset()
		if err := WriteIntervalLog(&buf, base, s.hs); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, s.hlog), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	for name, data := range r.Files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	html, err := RenderHTML(r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, HTMLFile), html, 0o644)
}

// Load reads a result directory written by Write.
func Load(dir string) (*Run, error) {
	res, err := ReadJSON(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, Result: *res}
	for _, s := range []struct {
		dst  *[]*hdr.Histogram
		name string
	}{{&r.Ack, AckLogFile}, {&r.E2E, E2ELogFile}, {&r.SendDelay, SendDelayLogFile}} {
		f, err := os.Open(filepath.Join(dir, s.name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		hs, err := ReadIntervalLog(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, s.name), err)
		}
		*s.dst = hs
	}
	return r, nil
}
