package results

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// A run's percentiles over the whole measured window hide what happened
// during part of it (a partition move, a failover). WriteWindow reads a
// result directory's interval log and reports the acknowledgement
// latency of the intervals that overlap [from, to), counted from the start
// of the measured window, so a phase and the time before it compare side
// by side within one run.

// Window is the latency of the intervals in one time window.
type Window struct {
	From, To       time.Duration
	Count          int64
	P50, P99, Max  float64 // ms
	P999           float64 // ms
	Intervals      int
	PerInterval    []WindowInterval
	IntervalLength time.Duration
}

// WindowInterval is one interval of a window.
type WindowInterval struct {
	Start         time.Duration // from the start of the measured window
	Count         int64
	P50, P99, Max float64 // ms
}

// ReadWindow merges the intervals of the interval log at path that
// overlap [from, to).
func ReadWindow(path string, from, to time.Duration) (Window, error) {
	w := Window{From: from, To: to}
	f, err := os.Open(path)
	if err != nil {
		return w, err
	}
	defer f.Close()
	hs, err := ReadIntervalLog(f)
	if err != nil {
		return w, fmt.Errorf("%s: %w", path, err)
	}
	if len(hs) == 0 {
		return w, fmt.Errorf("%s: no intervals", path)
	}
	t0 := hs[0].StartTimeMs()
	var m *hdr.Histogram
	for _, h := range hs {
		start := time.Duration(h.StartTimeMs()-t0) * time.Millisecond
		end := time.Duration(h.EndTimeMs()-t0) * time.Millisecond
		if end <= from || start >= to {
			continue
		}
		if m == nil {
			m = hdr.New(h.LowestTrackableValue(), h.HighestTrackableValue(), int(h.SignificantFigures()))
			w.IntervalLength = end - start
		}
		m.Merge(h)
		w.Intervals++
		w.PerInterval = append(w.PerInterval, WindowInterval{Start: start, Count: h.TotalCount(),
			P50: us(h.ValueAtQuantile(50)), P99: us(h.ValueAtQuantile(99)), Max: us(h.Max())})
	}
	if m == nil {
		return w, fmt.Errorf("%s: no interval overlaps %v-%v", path, from, to)
	}
	w.Count = m.TotalCount()
	w.P50, w.P99, w.P999, w.Max = us(m.ValueAtQuantile(50)), us(m.ValueAtQuantile(99)), us(m.ValueAtQuantile(99.9)), us(m.Max())
	return w, nil
}

// us converts a histogram value (µs) to ms.
func us(v int64) float64 { return float64(v) / 1000 }

// WriteWindow prints the acknowledgement latency of dir's run in
// [from, to), with one line per interval when perInterval is set.
func WriteWindow(out io.Writer, dir string, from, to time.Duration, perInterval bool) error {
	w, err := ReadWindow(filepath.Join(dir, AckLogFile), from, to)
	if err != nil {
		return err
	}
	if perInterval {
		for _, iv := range w.PerInterval {
			fmt.Fprintf(out, "%8.1fs  acks %6d  p50 %8.3f  p99 %8.3f  max %8.3f ms\n", iv.Start.Seconds(), iv.Count, iv.P50, iv.P99, iv.Max)
		}
	}
	fmt.Fprintf(out, "window %v-%v (%d intervals): acks %d  p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f ms\n",
		w.From, w.To, w.Intervals, w.Count, w.P50, w.P99, w.P999, w.Max)
	return nil
}
