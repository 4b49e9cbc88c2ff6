package loadgen

import (
	"math"
	"strconv"
)

// emitter is a client path (lean or kgo) driven by the schedule loop.
type emitter interface {
	// add hands message i over to the client. key < 0 means a null key.
	add(i uint64, intended, now, key int64)
	// tick flushes batches whose linger expired and returns the earliest
	// pending linger deadline (math.MaxInt64 if none).
	tick(now int64) int64
	// finish flushes everything; no add follows.
	finish()
}

// produceLoop sends this producer's share of the schedule. Producer p of n
// takes every n-th slot of the full-rate schedule (offset by p slots), so the
// combined stream is evenly spaced at cfg.Rate.
func (s *runState) produceLoop(p int, em emitter, sendDelay *recorder) {
	n := s.cfg.Producers
	slot := 1e9 / s.cfg.Rate
	sched := NewSchedule(int64(float64(p)*slot), s.cfg.Rate/float64(n))
	var rng uint64 = 0x9E3779B97F4A7C15 ^ uint64(p+1)*0xBF58476D1CE4E5B9
	pending := make([]int64, 0, 4096) // intended times awaiting send-delay recording
	next := uint64(0)
	for {
		now := s.now()
		due := sched.Due(now)
		for next < due {
			intended := sched.Intended(next)
			if intended >= s.endNs {
				break
			}
			// Global message index keeps keys and filler distinct across producers.
			gi := next*uint64(n) + uint64(p)
			em.add(gi, intended, now, s.keyFor(gi, &rng))
			pending = append(pending, intended)
			next++
			if len(pending) == cap(pending) {
				sendDelay.recordSince(now, pending, s.measureNs)
				s.countSent(pending)
				pending = pending[:0]
				now = s.now()
			}
		}
		if len(pending) > 0 {
			sendDelay.recordSince(now, pending, s.measureNs)
			s.countSent(pending)
			pending = pending[:0]
		}
		wake := sched.Intended(next)
		if wake >= s.endNs {
			em.finish()
			return
		}
		if lingerAt := em.tick(s.now()); lingerAt < wake {
			wake = lingerAt
		}
		s.sleepUntil(wake)
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

// appendKey formats key index k as bytes without allocating.
func appendKey(dst []byte, k int64) []byte {
	dst = append(dst[:0], "key-"...)
	return strconv.AppendInt(dst, k, 10)
}

const never = math.MaxInt64
