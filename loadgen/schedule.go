package loadgen

import (
	"math"
	"math/bits"
)

// Schedule is an open-loop fixed-rate send schedule. Message i is intended
// to be sent at Start + i/rate, computed from i directly in 128-bit integer
// arithmetic, so the schedule never drifts however long the run and however
// late the generator is.
type Schedule struct {
	// StartNs is the intended time of message 0 (ns on the run's clock).
	StartNs int64
	// rateMilli is the rate in messages per 1000 s, so fractional rates
	// stay exact.
	rateMilli uint64
}

const nsPerKilosecond = 1_000_000_000_000

// NewSchedule makes a schedule of ratePerSec messages per second from startNs.
func NewSchedule(startNs int64, ratePerSec float64) Schedule {
	rm := math.Round(ratePerSec * 1000)
	if rm < 1 {
		rm = 1
	}
	return Schedule{StartNs: startNs, rateMilli: uint64(rm)}
}

// Rate returns the schedule's rate in messages per second.
func (s Schedule) Rate() float64 { return float64(s.rateMilli) / 1000 }

// Intended returns the intended send time of message i: StartNs + floor(i*1e12/rateMilli).
func (s Schedule) Intended(i uint64) int64 {
	hi, lo := bits.Mul64(i, nsPerKilosecond)
	if hi >= s.rateMilli {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, s.rateMilli)
	return s.StartNs + int64(q)
}

// Due returns how many messages are due at nowNs: the number of i with
// Intended(i) <= nowNs.
func (s Schedule) Due(nowNs int64) uint64 {
	if nowNs < s.StartNs {
		return 0
	}
	// Intended(i) <= now  <=>  floor(i*1e12/r) <= d  <=>  i*1e12 < (d+1)*r
	// <=> i < ceil((d+1)*r/1e12), so the count is ceil((d+1)*r/1e12).
	d := uint64(nowNs - s.StartNs)
	hi, lo := bits.Mul64(d+1, s.rateMilli)
	if hi >= nsPerKilosecond {
		return math.MaxUint64
	}
	q, rem := bits.Div64(hi, lo, nsPerKilosecond)
	if rem != 0 {
		q++
	}
	return q
}
