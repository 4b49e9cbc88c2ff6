package replication

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Throttle is a replication byte-rate limit (KIP-73's
// leader/follower.replication.throttled.rate): one per broker and side,
// shared by every fetch on that side. It is a token bucket that may go
// into debt: bytes are recorded after they were served (a fetch's size
// is known only then), and while the bucket is in debt the rate counts as
// exceeded. At most ThrottleBurst worth of the rate accumulates while
// idle, so a catch-up starts at the limit rather than with a burst.
//
// Kafka measures the rate over sampled windows (11 x 1 s) that count at
// least 10 s from the first sample, which lets a fresh catch-up through
// at up to ten times the rate for its first seconds; the bucket has no
// such burst. Safe for concurrent use; time is passed in.
type Throttle struct {
	mu     sync.Mutex
	rate   int64 // bytes per second; Unlimited when none
	tokens float64
	last   time.Time

	limited         atomic.Bool // rate != Unlimited, read without mu
	bytes, withheld atomic.Uint64
}

// Unlimited is the rate of a throttle that throttles nothing (Kafka's
// default, Long.MaxValue).
const Unlimited = math.MaxInt64

// ThrottleBurst is how much of the rate an idle throttle saves up.
const ThrottleBurst = time.Second

// NewThrottle returns an unlimited throttle.
func NewThrottle() *Throttle { return &Throttle{rate: Unlimited} }

// SetRate changes the limit (bytes per second; Unlimited for none). A
// debt carries over, so lowering the rate applies to what comes next.
func (t *Throttle) SetRate(rate int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rate < 0 {
		rate = 0
	}
	if rate == t.rate {
		return
	}
	t.refill(now)
	t.rate = rate
	t.limited.Store(rate != Unlimited)
	if t.tokens > t.capacity() {
		t.tokens = t.capacity()
	}
}

// Rate is the limit in bytes per second (Unlimited when none).
func (t *Throttle) Rate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rate
}

// Limited reports whether a rate is set (lock-free: the fetch paths ask
// per partition).
func (t *Throttle) Limited() bool { return t.limited.Load() }

func (t *Throttle) capacity() float64 {
	return float64(t.rate) * ThrottleBurst.Seconds()
}

// refill adds the tokens earned since the last call. t.mu should be held.
func (t *Throttle) refill(now time.Time) {
	if !t.last.IsZero() && now.After(t.last) {
		t.tokens = min(t.tokens+float64(t.rate)*now.Sub(t.last).Seconds(), t.capacity())
	}
	if t.last.IsZero() || now.After(t.last) {
		t.last = now
	}
}

// Record charges n bytes served to throttled replicas.
func (t *Throttle) Record(n int64, now time.Time) {
	if n <= 0 {
		return
	}
	t.bytes.Add(uint64(n))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == Unlimited {
		return
	}
	t.refill(now)
	t.tokens -= float64(n)
}

// Delay is how long throttled replicas must wait before the next bytes:
// 0 while the rate is not exceeded.
func (t *Throttle) Delay(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate == Unlimited {
		return 0
	}
	t.refill(now)
	if t.tokens >= 0 {
		return 0
	}
	if t.rate == 0 {
		// Nothing is ever earned back: held until the rate changes.
		return time.Hour
	}
	// Rounded up, so whoever waits this long finds the debt paid.
	return time.Duration(math.Ceil(-t.tokens/float64(t.rate)*float64(time.Second))) + time.Millisecond
}

// CountWithheld counts one fetch that left out or returned no records for
// a throttled partition.
func (t *Throttle) CountWithheld() { t.withheld.Add(1) }

// ThrottleStats are a throttle's counters.
type ThrottleStats struct {
	// Bytes were served to throttled replicas; Withheld fetches had a
	// throttled partition's records held back.
	Bytes, Withheld uint64
}

// Stats returns the counters.
func (t *Throttle) Stats() ThrottleStats {
	return ThrottleStats{Bytes: t.bytes.Load(), Withheld: t.withheld.Load()}
}

// FollowerThrottle is the follower side of the replication throttle,
// handed to Fetchers: Limit is the broker's
// follower.replication.throttled.rate, and Throttled says whether this
// broker's fetches of a partition are throttled (listed in its
// follower.replication.throttled.replicas or being added to it by a
// reassignment, and this broker out of its ISR: an in-sync follower is
// never throttled, the high watermark waits on it). The Follower also
// never throttles a partition whose last answer found it at the leader's
// high watermark, which covers the moment between joining the ISR and
// the metadata saying so. Throttled must be cheap and safe for concurrent
// use.
type FollowerThrottle struct {
	Limit     *Throttle
	Throttled func(TopicPartition) bool
}

// delay is how long throttled partitions are held back from now (0: not
// at all).
func (ft *FollowerThrottle) delay(now time.Time) time.Duration {
	if ft == nil || ft.Limit == nil || ft.Throttled == nil || !ft.Limit.Limited() {
		return 0
	}
	return ft.Limit.Delay(now)
}

// record charges the records of a throttled partition.
func (ft *FollowerThrottle) record(tp TopicPartition, n int, now time.Time) {
	if ft == nil || ft.Limit == nil || ft.Throttled == nil || n == 0 || !ft.Limit.Limited() || !ft.Throttled(tp) {
		return
	}
	ft.Limit.Record(int64(n), now)
}
