package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Ten 1 s intervals: 100 acks of 10 ms each, except seconds 4 and 5 with
// 100 acks of 500 ms. The window over seconds 4-6 must show the slow
// ones and the windows around it must not.
func TestReadWindow(t *testing.T) {
	dir := t.TempDir()
	const base = int64(1_700_000_000_000)
	var ivs []*hdr.Histogram
	for s := range int64(10) {
		h := hdr.New(1, 60_000_000, 3)
		v := int64(10_000)
		if s == 4 || s == 5 {
			v = 500_000
		}
		for range 100 {
			h.RecordValue(v)
		}
		h.SetStartTimeMs(base + s*1000)
		h.SetEndTimeMs(base + (s+1)*1000)
		ivs = append(ivs, h)
	}
	var buf bytes.Buffer
	if err := WriteIntervalLog(&buf, base, ivs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, AckLogFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(from, to time.Duration, n int64, p99 float64) {
		t.Helper()
		w, err := ReadWindow(filepath.Join(dir, AckLogFile), from, to)
		if err != nil {
			t.Fatal(err)
		}
		if w.Count != n || w.P99 < p99*0.99 || w.P99 > p99*1.01 {
			t.Fatalf("window %v-%v: %d acks p99 %.3f ms, want %d and %.3f", from, to, w.Count, w.P99, n, p99)
		}
	}
	check(0, 4*time.Second, 400, 10)
	check(4*time.Second, 6*time.Second, 200, 500)
	check(4500*time.Millisecond, 5*time.Second, 100, 500) // an overlapped interval counts whole
	check(6*time.Second, time.Hour, 400, 10)
	if _, err := ReadWindow(filepath.Join(dir, AckLogFile), 20*time.Second, 30*time.Second); err == nil {
		t.Fatal("a window past the run: no error")
	}
	var out bytes.Buffer
	if err := WriteWindow(&out, dir, 4*time.Second, 6*time.Second, true); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Count(s, "\n") != 3 || !strings.Contains(s, "acks 200") {
		t.Fatalf("WriteWindow output:\n%s", s)
	}
}
