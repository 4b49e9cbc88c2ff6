// Package results turns latency histograms and run counters into report files
// (result.json, .hgrm, .hlog, report.html) and reads them back for summaries,
// merges and comparisons.
//
// All histograms hold microseconds; reports print milliseconds.
package results

import (
	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

const (
	// LowestMicros and HighestMicros bound every latency histogram: 1 µs
	// resolution, 10 minutes of range so a long broker stall is still recorded.
	LowestMicros  = 1
	HighestMicros = 10 * 60 * 1000 * 1000
	// SigFigs is three significant digits (0.1% value error).
	SigFigs = 3
)

// NewHistogram returns an empty microsecond latency histogram with the
// project's standard range.
func NewHistogram() *hdr.Histogram {
	return hdr.New(LowestMicros, HighestMicros, SigFigs)
}

// RecordMicros records v, clamping into the trackable range so an outlier is
// kept as "at least the maximum" rather than silently dropped.
func RecordMicros(h *hdr.Histogram, v int64) {
	if v < LowestMicros {
		v = LowestMicros
	} else if v > HighestMicros {
		v = HighestMicros
	}
	_ = h.RecordValue(v)
}

// Percentiles summarises a histogram in milliseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Summarize converts a microsecond histogram into millisecond percentiles.
func Summarize(h *hdr.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Percentiles{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// MergeAll returns one histogram holding every value of hs.
func MergeAll(hs []*hdr.Histogram) *hdr.Histogram {
	total := NewHistogram()
	for _, h := range hs {
		if h != nil {
			total.Merge(h)
		}
	}
	return total
}
