package results

import (
	"bufio"
	"fmt"
	"io"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// WriteIntervalLog writes interval histograms in the HdrHistogram log format
// (v1.3). Each histogram must carry StartTimeMs/EndTimeMs in Unix ms.
//
// The header lines are written here rather than with hdrhistogram-go's
// writer: its OutputBaseTime prints whole seconds (older releases also spelt
// the tag "Basetime", which the Java HistogramLogReader ignores). We emit
// "#[StartTime: <s.mmm> ..." and "#[BaseTime: <s.mmm> ...", the spellings and
// precision the Java reader and hdrhistogram-go's reader both parse, and
// interval timestamps relative to BaseTime. The max column is in ms.
func WriteIntervalLog(w io.Writer, startUnixMs int64, intervals []*hdr.Histogram) error {
	bw := bufio.NewWriter(w)
	start := time.UnixMilli(startUnixMs).UTC()
	secs := float64(startUnixMs) / 1000
	fmt.Fprintf(bw, "#[Histogram log format version 1.3]\n")
	fmt.Fprintf(bw, "#[Values in microseconds; written by ringlog loadgen]\n")
	fmt.Fprintf(bw, "#[StartTime: %.3f (seconds since epoch), %s]\n", secs, start.Format(time.RFC3339Nano))
	fmt.Fprintf(bw, "#[BaseTime: %.3f (seconds since epoch)]\n", secs)
	fmt.Fprintf(bw, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n")
	for _, h := range intervals {
		enc, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
		if err != nil {
			return err
		}
		rel := float64(h.StartTimeMs()-startUnixMs) / 1000
		length := float64(h.EndTimeMs()-h.StartTimeMs()) / 1000
		fmt.Fprintf(bw, "%.3f,%.3f,%.3f,%s\n", rel, length, float64(h.Max())/1000, enc)
	}
	return bw.Flush()
}

// ReadIntervalLog reads a log written by WriteIntervalLog (or any HdrHistogram
// interval log) with hdrhistogram-go's reader. Returned histograms carry
// absolute Unix-ms start and end times.
func ReadIntervalLog(r io.Reader) ([]*hdr.Histogram, error) {
	lr := hdr.NewHistogramLogReader(r)
	var out []*hdr.Histogram
	for {
		h, err := lr.NextIntervalHistogram()
		if err != nil {
			return out, err
		}
		if h == nil {
			return out, nil
		}
		out = append(out, h)
	}
}

// WriteHgrm writes the percentile distribution of h (µs) in the .hgrm text
// format with values in milliseconds, as HdrHistogram's plotter expects.
func WriteHgrm(w io.Writer, h *hdr.Histogram) error {
	_, err := h.PercentilesPrint(w, 5, 1000)
	return err
}
