// Package idletick runs a coordinator's periodic Tick only while it holds
// something that can time out. A coordinator with nothing to expire sleeps
// until told otherwise: an idle broker's timer wake-ups cost it CPU
// (BENCHMARKS.md section 31).
package idletick

import (
	"context"
	"time"
)

// Wake tells a sleeping Run that there may be work again. Its zero value
// is unusable: make one with NewWake.
type Wake chan struct{}

// NewWake returns a Wake.
func NewWake() Wake { return make(Wake, 1) }

// Notify wakes Run if it sleeps, or makes its next sleep end at once. It
// never blocks.
func (w Wake) Notify() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Run calls tick every interval until ctx ends. Whenever busy reports
// false it stops its ticker and sleeps until w is notified (calling
// asleep first, when set: a test seam). busy is asked after every tick
// and every wake, so a Notify after the work appears is never missed.
func Run(ctx context.Context, interval time.Duration, busy func() bool, w Wake, asleep func(), tick func(now time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if !busy() {
			t.Stop()
			if asleep != nil {
				asleep()
			}
			select {
			case <-ctx.Done():
				return
			case <-w:
			}
			t.Reset(interval)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			tick(now)
		}
	}
}
