package engine

import (
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/iouring"
)

// fsyncBucketBounds are the upper bounds of the fsync latency histogram.
// They span a page-cache-only fdatasync (tens of µs) to a stalled disk
// (seconds); group commit makes every append wait for one of these.
var fsyncBucketBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
}

// latencyHistogram is a fixed-bucket histogram of atomics: recording costs
// a short scan and two atomic adds, with no lock and no allocation, so the
// flusher and the ring owner can record every fdatasync.
type latencyHistogram struct {
	counts [len(fsyncBucketBounds) + 1]atomic.Uint64 // last: above every bound
	sumNs  atomic.Uint64
}

func (h *latencyHistogram) observe(d time.Duration) {
	i := 0
	for i < len(fsyncBucketBounds) && d > fsyncBucketBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(max(d, 0)))
}

// LatencyHistogram is a snapshot of a latency histogram: Counts[i] is the
// number of observations at or below Bounds[i] and above Bounds[i-1] (not
// cumulative); Counts[len(Bounds)] counts those above the last bound.
type LatencyHistogram struct {
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// Count is the number of observations.
func (h LatencyHistogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

func (h *latencyHistogram) snapshot() LatencyHistogram {
	s := LatencyHistogram{Bounds: fsyncBucketBounds[:], Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sumNs.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// FsyncLatency is the histogram of group-commit fdatasync latencies: on the
// sync path the fdatasync call itself; on the io_uring path from the
// submission of the write (or flush) to the fdatasync's completion, since
// the linked fsync starts only when its write has completed. The
// fdatasyncs of segment rolls, recovery and truncation are counted in
// Stats.Fdatasyncs but not timed.
func (e *Engine) FsyncLatency() LatencyHistogram { return e.stats.fsyncLatency.snapshot() }

// RingStats returns the io_uring ring's counters, and false on the sync
// path.
func (e *Engine) RingStats() (iouring.Stats, bool) { return e.wq.ringStats() }
