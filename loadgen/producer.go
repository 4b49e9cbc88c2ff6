package loadgen

import (
	"context"
	"math"
	"time"
)

// addResult says how an emitter took a message.
type addResult uint8

const (
	// added: taken without waiting.
	added addResult = iota
	// addedAfterWait: taken, but only after waiting (for request memory,
	// a send queue, a full client buffer), so the caller's clock is stale.
	addedAfterWait
	// notAdded: the run was stopped while the emitter waited; the message
	// was not taken.
	notAdded
)

// emitter is a client path (lean or kgo) driven by the schedule loop.
type emitter interface {
	// add hands message i over to the client. key < 0 means a null key.
	// now is the caller's clock reading, possibly older than the call.
	add(i uint64, intended, now, key int64) addResult
	// tick flushes batches whose linger expired and returns the earliest
	// pending linger deadline (math.MaxInt64 if none).
	tick(now int64) int64
	// finish flushes everything; no add follows.
	finish()
}

// produceLoop sends this producer's share of the schedule until its end or
// until ctx is done. Producer p of n takes every n-th slot of the full-rate
// schedule (offset by p slots), so the combined stream is evenly spaced at
// cfg.Rate.
func (s *runState) produceLoop(ctx context.Context, p int, em emitter, sendDelay *recorder) {
	n := s.cfg.Producers
	slot := 1e9 / s.cfg.Rate
	sched := NewSchedule(int64(float64(p)*slot), s.cfg.Rate/float64(n))
	var rng uint64 = 0x9E3779B97F4A7C15 ^ uint64(p+1)*0xBF58476D1CE4E5B9
	pending := make([]int64, 0, 4096) // intended times awaiting send-delay recording
	next := uint64(0)
	done := ctx.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer em.finish()
	for {
		// The clock is read once per chunk, not per message; an add that
		// waited says so, and the clock is read again then.
		now := s.now()
		due := sched.Due(now)
		stopped := false
		for next < due && !stopped {
			intended := sched.Intended(next)
			if intended >= s.endNs {
				break
			}
			// Global message index keeps keys and filler distinct across producers.
			gi := next*uint64(n) + uint64(p)
			res := em.add(gi, intended, now, s.keyFor(gi, &rng))
			if res == notAdded {
				stopped = true
				break
			}
			if res == addedAfterWait {
				// The messages before this one were handed over at now;
				// this one and the rest of the chunk only after the wait.
				s.recordSent(sendDelay, now, pending)
				pending = pending[:0]
				now = s.now()
				stopped = isDone(done)
			}
			pending = append(pending, intended)
			next++
			if len(pending) == cap(pending) {
				s.recordSent(sendDelay, now, pending)
				pending = pending[:0]
				now = s.now()
				stopped = stopped || isDone(done)
			}
		}
		if len(pending) > 0 {
			s.recordSent(sendDelay, now, pending)
			pending = pending[:0]
		}
		if stopped {
			return
		}
		wake := sched.Intended(next)
		if wake >= s.endNs {
			return
		}
		if lingerAt := em.tick(s.now()); lingerAt < wake {
			wake = lingerAt
		}
		if !s.sleepUntil(timer, done, wake) {
			return
		}
	}
}

func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// recordSent records the send delay of messages handed over at now and
// counts them as sent.
func (s *runState) recordSent(sendDelay *recorder, now int64, intended []int64) {
	sendDelay.recordSince(now, intended, s.measureNs)
	s.countSent(intended)
	for last := s.lastSentNs.Load(); now > last && !s.lastSentNs.CompareAndSwap(last, now); last = s.lastSentNs.Load() {
	}
}

func (s *runState) countSent(intended []int64) {
	s.c.sent.Add(int64(len(intended)))
	measured := 0
	for _, t := range intended {
		if t >= s.measureNs {
			measured++
		}
	}
	s.c.measuredSent.Add(int64(measured))
}

const never = math.MaxInt64
