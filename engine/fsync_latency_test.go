package engine

import (
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
)

func TestLatencyHistogramBuckets(t *testing.T) {
	var h latencyHistogram
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 51 * time.Microsecond, 3 * time.Millisecond, time.Minute} {
		h.observe(d)
	}
	s := h.snapshot()
	want := map[int]uint64{0: 2, 1: 1, 6: 1, len(fsyncBucketBounds): 1}
	for i, c := range s.Counts {
		if c != want[i] {
			t.Errorf("bucket %d (<= %v): %d, want %d", i, s.Bounds[min(i, len(s.Bounds)-1)], c, want[i])
		}
	}
	if s.Count() != 5 || s.Sum != time.Minute+3*time.Millisecond+101*time.Microsecond {
		t.Fatalf("count %d sum %v", s.Count(), s.Sum)
	}
}

// Group-commit fdatasyncs (the journal's, by default) are timed on
// whichever write path runs, and never more often than they are counted.
func TestFsyncLatencyRecorded(t *testing.T) {
	for _, mode := range []string{"sync", "uring"} {
		t.Run(mode, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.IOMode = mode
			if mode == "uring" {
				needUring(t)
			}
			e := mustOpen(t, cfg)
			defer e.Close()
			if _, err := e.CreateTopic("f", 1, nil); err != nil {
				t.Fatal(err)
			}
			p := mustPartition(t, e, "f", 0)
			for i := 0; i < 5; i++ {
				appendWait(t, p, batchtest.Values("x"))
			}
			h := e.FsyncLatency()
			// Under the journal the round's barrier is the journal's
			// fdatasync, one per journal write.
			st := e.Stats()
			if h.Count() == 0 || h.Count() > uint64(st.Fdatasyncs+st.JournalWrites) || h.Sum <= 0 {
				t.Fatalf("%s: %d timed fsyncs (sum %v), %d counted, %d journal writes", e.IOPath(), h.Count(), h.Sum, st.Fdatasyncs, st.JournalWrites)
			}
			if st.JournalWrites == 0 {
				t.Fatalf("%s: no journal writes under fsync always", e.IOPath())
			}
			if _, ok := e.RingStats(); ok != (e.IOPath() == "uring") {
				t.Fatalf("RingStats ok=%v on the %s path", ok, e.IOPath())
			}
		})
	}
}
