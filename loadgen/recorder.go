package loadgen

import (
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ringlog/ringlog/results"
)

// recorder collects one latency series. Writers lock once per batch, not per
// message; the interval loop swaps the current histogram out every second.
type recorder struct {
	mu  sync.Mutex
	cur *hdr.Histogram
}

func newRecorder() *recorder { return &recorder{cur: results.NewHistogram()} }

// recordSince records now-intended (ns) in µs for each intended time at or
// after measureFromNs (messages scheduled in the warmup are not recorded).
func (r *recorder) recordSince(nowNs int64, intended []int64, measureFromNs int64) {
	r.mu.Lock()
	for _, t := range intended {
		if t >= measureFromNs {
			results.RecordMicros(r.cur, (nowNs-t)/1000)
		}
	}
	r.mu.Unlock()
}

func (r *recorder) recordOne(nowNs, intended, measureFromNs int64) {
	if intended < measureFromNs {
		return
	}
	r.mu.Lock()
	results.RecordMicros(r.cur, (nowNs-intended)/1000)
	r.mu.Unlock()
}

// swap returns the histogram collected since the last swap, stamped with the
// interval's wall-clock bounds.
func (r *recorder) swap(start, end time.Time) *hdr.Histogram {
	fresh := results.NewHistogram()
	r.mu.Lock()
	h := r.cur
	r.cur = fresh
	r.mu.Unlock()
	h.SetStartTimeMs(start.UnixMilli())
	h.SetEndTimeMs(end.UnixMilli())
	return h
}

// counters are the run's message counts. "Measured" counts only messages
// scheduled after the warmup.
type counters struct {
	sent, acked, errors, consumed atomic.Int64
	measuredAcked, measuredSent   atomic.Int64
	measuredConsumed              atomic.Int64
	bytesAcked                    atomic.Int64
	retried                       atomic.Int64 // messages re-sent after a retriable failure
	retries                       atomic.Int64 // batches (produce requests) re-sent
	mix                           errorMix     // failed produce attempts by cause
	firstErr                      atomic.Value // string
}

func (c *counters) fail(n int, err error) {
	c.errors.Add(int64(n))
	if err != nil {
		c.firstErr.CompareAndSwap(nil, err.Error())
	}
}

func (c *counters) firstError() string {
	s, _ := c.firstErr.Load().(string)
	return s
}
