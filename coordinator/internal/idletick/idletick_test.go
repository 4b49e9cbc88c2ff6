package idletick

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
)

// TestRun: no tick while there is no work (Run goes to sleep at once),
// ticks after a Notify once there is, and sleeps again when the work is
// gone.
func TestRun(t *testing.T) {
	var work atomic.Bool
	var ticks atomic.Int64
	asleep := make(chan struct{}, 4)
	w := NewWake()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, work.Load, w, func() { asleep <- struct{}{} }, func(time.Time) { ticks.Add(1) })
	}()
	defer func() { cancel(); <-done }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-asleep:
		case <-time.After(10 * time.Second):
			t.Fatalf("Run did not go to sleep %s", what)
		}
	}
	wait("with no work")
	// Asleep, Run cannot tick until notified; the window only gives a
	// broken Run the chance to show it (20 intervals).
	time.Sleep(20 * time.Millisecond)
	if n := ticks.Load(); n != 0 {
		t.Fatalf("%d ticks with no work", n)
	}
	work.Store(true)
	w.Notify()
	if !testwait.Until(10*time.Second, func() bool { return ticks.Load() >= 3 }) {
		t.Fatalf("%d ticks after work appeared", ticks.Load())
	}
	work.Store(false)
	wait("once the work was gone")
	n := ticks.Load()
	time.Sleep(20 * time.Millisecond)
	if m := ticks.Load(); m != n {
		t.Fatalf("%d ticks while asleep", m-n)
	}
}
