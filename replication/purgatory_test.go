package replication

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func done(w *Waiter) bool {
	select {
	case <-w.Done():
		return true
	default:
		return false
	}
}

func TestPurgatoryAdvance(t *testing.T) {
	p := NewPurgatory()
	other := TopicPartition{Topic: "u"}
	dl := t0.Add(time.Minute)
	w5 := p.Add(simTP, 5, dl)
	w2 := p.Add(simTP, 2, dl) // out of order on purpose
	w9 := p.Add(simTP, 9, dl)
	wo := p.Add(other, 0, dl)
	if n := p.Advance(simTP, 3, 3, 2); n != 1 || !done(w2) || done(w5) {
		t.Fatalf("advance to 3 completed %d", n)
	}
	if w2.Err() != nil {
		t.Fatal(w2.Err())
	}
	// The ISR shrank below min.insync while 5 waited.
	if n := p.Advance(simTP, 6, 1, 2); n != 1 || !errors.Is(w5.Err(), ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("after-append: %d %v", n, w5.Err())
	}
	// Added after the HW already covers it: completes at once.
	if w := p.Add(simTP, 4, dl); !done(w) {
		t.Fatal("waiter below a known HW did not complete")
	}
	if n := p.FailPartition(simTP, ErrNotLeaderOrFollower); n != 1 || !errors.Is(w9.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("fail partition: %d %v", n, w9.Err())
	}
	if done(wo) || p.Len() != 1 {
		t.Fatal("other partition disturbed")
	}
}

func TestPurgatoryExpire(t *testing.T) {
	p := NewPurgatory()
	a := p.Add(simTP, 1, t0.Add(2*time.Second))
	b := p.Add(simTP, 2, t0.Add(time.Second))
	c := p.Add(simTP, 3, t0.Add(3*time.Second))
	if d, _ := p.NextDeadline(); !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("next deadline %v", d)
	}
	if n := p.Expire(t0.Add(2 * time.Second)); n != 2 || !errors.Is(a.Err(), ErrRequestTimedOut) || !errors.Is(b.Err(), ErrRequestTimedOut) {
		t.Fatalf("expired %d", n)
	}
	p.Cancel(c)
	if !errors.Is(c.Err(), ErrClosed) || p.Len() != 0 {
		t.Fatal("cancel")
	}
	p.Advance(simTP, 10, 3, 2) // heaps stay consistent after removals
	p.Close()
	if w := p.Add(simTP, 20, t0); !errors.Is(w.Err(), ErrClosed) {
		t.Fatal("add after close")
	}
}

// Waking must not touch waiters that are not satisfied: with many
// waiters far ahead, an Advance that satisfies one completes exactly one.
func TestPurgatoryManyWaiters(t *testing.T) {
	p := NewPurgatory()
	for i := range 10000 {
		p.Add(simTP, int64(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	for hw := int64(1); hw <= 10000; hw++ {
		if n := p.Advance(simTP, hw, 3, 2); n != 1 {
			t.Fatalf("advance to %d completed %d", hw, n)
		}
	}
}

// fakeClock fires timers only when the test advances it. registered
// receives the deadline of every timer created, so a test can wait until
// the goroutine under test is asleep.
type fakeClock struct {
	mu         sync.Mutex
	now        time.Time
	timers     []fakeTimer
	registered chan time.Time
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0, registered: make(chan time.Time, 64)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	c.registered <- c.now.Add(d)
	return ch
}

// AdvanceTo moves time and fires the timers that are due.
func (c *fakeClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(t) {
			keep = append(keep, tm)
			continue
		}
		tm.ch <- t
	}
	c.timers = keep
}
