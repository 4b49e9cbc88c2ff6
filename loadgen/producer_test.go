package loadgen

import (
	"context"
	"testing"
	"time"
)

// blockingEmitter takes messages at once except message blockAt, on which
// it sleeps as an emitter waiting for request memory does, and reports it.
type blockingEmitter struct {
	st       *runState
	blockAt  uint64
	block    time.Duration
	intended []int64 // as handed over, to check they are the schedule's
	nows     []int64
}

func (e *blockingEmitter) add(i uint64, intended, now, key int64) addResult {
	e.intended = append(e.intended, intended)
	e.nows = append(e.nows, now)
	if i == e.blockAt {
		time.Sleep(e.block) // real time: the send delay must include this block
		return addedAfterWait
	}
	return added
}
func (e *blockingEmitter) tick(int64) int64 { return never }
func (e *blockingEmitter) finish()          {}

// TestSendDelayCountsBlockedAdds starts the schedule 100 ms in the past, so
// the first chunk holds ~1,000 due messages, and blocks 200 ms on message
// 10 of it. Messages 10 onwards were handed over after the block: their
// send delay must include it, not be measured from the clock reading taken
// before the chunk.
func TestSendDelayCountsBlockedAdds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rate, cfg.Warmup, cfg.Duration = 10_000, 0, 150*time.Millisecond
	st := newRunState(cfg)
	st.start(time.Now().Add(-100 * time.Millisecond))
	const block = 200 * time.Millisecond
	em := &blockingEmitter{st: st, blockAt: 10, block: block}
	rec := newRecorder()
	st.produceLoop(context.Background(), 0, em, rec)

	want := int(cfg.Rate * cfg.Duration.Seconds())
	if len(em.intended) != want || st.c.sent.Load() != int64(want) {
		t.Fatalf("handed over %d, counted %d, want %d", len(em.intended), st.c.sent.Load(), want)
	}
	sched := NewSchedule(0, cfg.Rate)
	for i, it := range em.intended {
		if it != sched.Intended(uint64(i)) {
			t.Fatalf("message %d handed over with intended %d, schedule says %d", i, it, sched.Intended(uint64(i)))
		}
	}
	// The add after the block got a fresh clock: ack latency and linger run
	// from the intended time and a current clock, not a stale one.
	if d := em.nows[11] - em.nows[10]; d < int64(block) {
		t.Fatalf("clock after the blocking add advanced %v, want >= %v", time.Duration(d), block)
	}
	h := rec.swap(time.Now(), time.Now())
	if h.TotalCount() != int64(want) {
		t.Fatalf("recorded %d send delays, want %d", h.TotalCount(), want)
	}
	// Only messages 0-9 (and none after the block) can be under 150 ms
	// late: each one after the block was handed over >= 300 ms into the
	// run and intended before 150 ms.
	var under int64
	for _, bar := range h.Distribution() {
		if bar.To < 150_000 {
			under += bar.Count
		}
	}
	if under > 10 {
		t.Fatalf("%d of %d send delays under 150 ms: the block was not counted", under, want)
	}
}

// A generator that falls behind hands messages over after the planned
// end: the measured window stretches to the last hand-over, so the
// achieved rate shows the shortfall instead of the plan.
func TestAchievedRateCountsLateSends(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rate, cfg.Warmup, cfg.Duration, cfg.Quiet = 10_000, 0, 150*time.Millisecond, true
	st := newRunState(cfg)
	st.start(time.Now())
	const block = 300 * time.Millisecond
	em := &blockingEmitter{st: st, blockAt: 10, block: block}
	st.produceLoop(context.Background(), 0, em, newRecorder())
	want := int64(cfg.Rate * cfg.Duration.Seconds())
	st.c.acked.Store(want)
	st.c.measuredAcked.Store(want)
	run := st.result(newIntervals(st, nil, nil))
	// Message 10 waited 300 ms; the rest went right after it.
	if run.Result.DurationS < block.Seconds() {
		t.Fatalf("measured %.3f s, want >= %.3f s (the sends ended after the block)", run.Result.DurationS, block.Seconds())
	}
	if max := float64(want) / block.Seconds(); run.Result.AchievedRate > max {
		t.Fatalf("achieved %.0f msg/s, want <= %.0f: the late sends were credited to the planned window", run.Result.AchievedRate, max)
	}
}
