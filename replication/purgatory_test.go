package replication

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
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
	w5 := p.Add(simTP, 0, 5, t0, dl)
	w2 := p.Add(simTP, 0, 2, t0, dl) // out of order on purpose
	w9 := p.Add(simTP, 0, 9, t0, dl)
	wo := p.Add(other, 0, 0, t0, dl)
	if n := p.Advance(simTP, 0, 3, 3, 2); n != 1 || !done(w2) || done(w5) {
		t.Fatalf("advance to 3 completed %d", n)
	}
	if w2.Err() != nil {
		t.Fatal(w2.Err())
	}
	// The ISR shrank below min.insync while 5 waited.
	if n := p.Advance(simTP, 0, 6, 1, 2); n != 1 || !errors.Is(w5.Err(), ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("after-append: %d %v", n, w5.Err())
	}
	// Added after the HW already covers it: completes at once.
	if w := p.Add(simTP, 0, 4, t0, dl); !done(w) {
		t.Fatal("waiter below a known HW did not complete")
	}
	if n := p.FailPartition(simTP, 0, ErrNotLeaderOrFollower); n != 1 || !errors.Is(w9.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("fail partition: %d %v", n, w9.Err())
	}
	if done(wo) || p.Len() != 1 {
		t.Fatal("other partition disturbed")
	}
}

func TestPurgatoryExpire(t *testing.T) {
	p := NewPurgatory()
	a := p.Add(simTP, 0, 1, t0, t0.Add(2*time.Second))
	b := p.Add(simTP, 0, 2, t0, t0.Add(time.Second))
	c := p.Add(simTP, 0, 3, t0, t0.Add(3*time.Second))
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
	p.Advance(simTP, 0, 10, 3, 2) // heaps stay consistent after removals
	p.Close()
	if w := p.Add(simTP, 0, 20, t0, t0); !errors.Is(w.Err(), ErrClosed) {
		t.Fatal("add after close")
	}
}

// Waiters belong to the leader epoch of their append: an Add
// that arrives after its epoch ended fails at once instead of waiting for
// a high watermark that will never come (or, worse, being answered by the
// HW of a later epoch whose records at that offset differ), and a newer
// epoch of the same leader fails the older one's waiters.
func TestPurgatoryEpochs(t *testing.T) {
	p := NewPurgatory()
	dl := t0.Add(time.Minute)
	w := p.Add(simTP, 3, 10, t0, dl)
	p.Advance(simTP, 3, 5, 3, 2)
	if n := p.FailPartition(simTP, 3, ErrNotLeaderOrFollower); n != 1 || !errors.Is(w.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("fail epoch 3: %d %v", n, w.Err())
	}
	// The produce's local write completed after leadership was lost.
	late := p.Add(simTP, 3, 11, t0, dl)
	if !done(late) || !errors.Is(late.Err(), ErrNotLeaderOrFollower) || p.Len() != 0 {
		t.Fatalf("add to an ended epoch: done %v err %v len %d", done(late), late.Err(), p.Len())
	}
	// This broker leads again in epoch 5; a stale Advance of epoch 3
	// completes nothing and the progress of 5 starts unknown.
	w5 := p.Add(simTP, 5, 11, t0, dl)
	if n := p.Advance(simTP, 3, 100, 3, 2); n != 0 || done(w5) {
		t.Fatal("advance of an ended epoch completed a newer waiter")
	}
	if w := p.Add(simTP, 4, 1, t0, dl); !errors.Is(w.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("add of an epoch older than the current one: %v", w.Err())
	}
	// An epoch bump without a FailPartition (a missed resignation) still
	// ends epoch 5's waiters: their offsets mean nothing in epoch 6.
	if n := p.Advance(simTP, 6, 50, 3, 2); n != 0 || !errors.Is(w5.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("epoch 6 advance: %d %v", n, w5.Err())
	}
	if w := p.Add(simTP, 6, 20, t0, dl); !done(w) || w.Err() != nil {
		t.Fatal("waiter below epoch 6's HW not completed at once")
	}
	// FailPartition of an older epoch leaves a newer epoch's waiters.
	w6 := p.Add(simTP, 6, 60, t0, dl)
	if n := p.FailPartition(simTP, 5, ErrNotLeaderOrFollower); n != 0 || done(w6) {
		t.Fatal("failing epoch 5 touched epoch 6")
	}
	// Dropped locally and led again in the same epoch: open again.
	p.FailPartition(simTP, 6, ErrNotLeaderOrFollower)
	if !errors.Is(w6.Err(), ErrNotLeaderOrFollower) {
		t.Fatal(w6.Err())
	}
	p.Lead(simTP, 6, 50, 3, 2)
	w6 = p.Add(simTP, 6, 70, t0, dl)
	if p.Advance(simTP, 6, 71, 3, 2) != 1 || w6.Err() != nil {
		t.Fatalf("epoch 6 led again: %v", w6.Err())
	}
	w6 = p.Add(simTP, 6, 80, t0, dl)
	p.Close()
	if !errors.Is(w6.Err(), ErrClosed) {
		t.Fatal(w6.Err())
	}
}

// A new leader's HW may never move (nothing new is appended: the only
// producer is stuck retrying a batch that is already below it, which
// deduplication answers with its first offsets). Lead tells the purgatory
// where the HW is, so that retry is acknowledged at once (a partition
// once seen stuck at "log_end=6008 hw=6008").
func TestPurgatoryLeadKnowsTheHighWatermark(t *testing.T) {
	p := NewPurgatory()
	dl := t0.Add(time.Minute)
	if n := p.Lead(simTP, 4, 6008, 3, 2); n != 0 {
		t.Fatalf("lead completed %d", n)
	}
	if w := p.Add(simTP, 4, 6007, t0, dl); !done(w) || w.Err() != nil {
		t.Fatalf("duplicate below the new leader's HW: done %v err %v", done(w), w.Err())
	}
	w := p.Add(simTP, 4, 6008, t0, dl)
	if done(w) {
		t.Fatal("waiter at the HW completed")
	}
	// Waiters added before Lead (an earlier epoch's) are not answered by it.
	old := p.Add(simTP, 3, 100, t0, dl)
	if !errors.Is(old.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("waiter of an older epoch: %v", old.Err())
	}
}

func TestPurgatoryOldestWait(t *testing.T) {
	p := NewPurgatory()
	if d := p.OldestWait(t0); d != 0 {
		t.Fatalf("empty: %v", d)
	}
	a := p.Add(simTP, 0, 5, t0, t0.Add(time.Minute))
	p.Add(simTP, 0, 9, t0.Add(2*time.Second), t0.Add(time.Minute))
	if d := p.OldestWait(t0.Add(3 * time.Second)); d != 3*time.Second {
		t.Fatalf("oldest %v, want 3s", d)
	}
	p.Advance(simTP, 0, 6, 3, 2)
	if !done(a) {
		t.Fatal("a not done")
	}
	if d := p.OldestWait(t0.Add(3 * time.Second)); d != time.Second {
		t.Fatalf("oldest after the first completed: %v, want 1s", d)
	}
}

// Waking must not touch waiters that are not satisfied: with many
// waiters far ahead, an Advance that satisfies one completes exactly one.
func TestPurgatoryManyWaiters(t *testing.T) {
	p := NewPurgatory()
	for i := range 10000 {
		p.Add(simTP, 0, int64(i), t0, t0.Add(time.Duration(i)*time.Millisecond))
	}
	for hw := int64(1); hw <= 10000; hw++ {
		if n := p.Advance(simTP, 0, hw, 3, 2); n != 1 {
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

// TestPurgatoryFailWaiting: the waiters parked when a stale broker gives
// up on them fail with the given error, the epoch goes on (a later waiter
// of it completes with the HW as before), and other partitions and newer
// epochs are left alone.
func TestPurgatoryFailWaiting(t *testing.T) {
	p := NewPurgatory()
	other := TopicPartition{Topic: "u"}
	dl := t0.Add(time.Minute)
	p.Advance(simTP, 3, 0, 3, 2)
	w1 := p.Add(simTP, 3, 1, t0, dl)
	w2 := p.Add(simTP, 3, 2, t0, dl)
	wo := p.Add(other, 3, 0, t0, dl)
	if n := p.FailWaiting(simTP, 2, ErrNotLeaderOrFollower); n != 0 || done(w1) {
		t.Fatalf("an older epoch's call failed %d waiters of epoch 3", n)
	}
	if n := p.FailWaiting(simTP, 3, ErrNotLeaderOrFollower); n != 2 || !errors.Is(w1.Err(), ErrNotLeaderOrFollower) || !errors.Is(w2.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("fail waiting: %d %v %v", n, w1.Err(), w2.Err())
	}
	if done(wo) {
		t.Fatal("other partition disturbed")
	}
	// The lease came back: epoch 3 goes on.
	w3 := p.Add(simTP, 3, 4, t0, dl)
	if done(w3) {
		t.Fatalf("a waiter of the same epoch failed at once: %v", w3.Err())
	}
	if n := p.Advance(simTP, 3, 5, 3, 2); n != 1 || w3.Err() != nil {
		t.Fatalf("advance after the lease resumed: %d %v", n, w3.Err())
	}
	if n := p.FailWaiting(other, 3, ErrNotLeaderOrFollower); n != 1 || !errors.Is(wo.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("other partition: %d %v", n, wo.Err())
	}
}

// TestPurgatoryRunArms: Run sets one timer for the earliest deadline, and
// a waiter due later than that timer does not wake it (a steady stream of
// produce waiters, each done long before its timeout, would otherwise
// wake Run once per request); an earlier one does, and every waiter still
// expires on time.
func TestPurgatoryRunArms(t *testing.T) {
	p := NewPurgatory()
	c := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	defer func() { cancel(); <-stopped }()
	armed := func(want time.Time) {
		t.Helper()
		select {
		case got := <-c.registered:
			if !got.Equal(want) {
				t.Fatalf("Run armed a timer for %v, want %v", got.Sub(t0), want.Sub(t0))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Run armed no timer for %v", want.Sub(t0))
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case got := <-c.registered:
			t.Fatalf("Run re-armed for %v", got.Sub(t0))
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.Advance(simTP, 0, 0, 3, 2)
	w1 := p.Add(simTP, 0, 1, t0, t0.Add(30*time.Second))
	go func() { p.Run(ctx, c); close(stopped) }()
	armed(t0.Add(30 * time.Second))
	// The nudge of w1's Add may still be queued: Run then arms the same
	// deadline once more.
	select {
	case got := <-c.registered:
		if !got.Equal(t0.Add(30 * time.Second)) {
			t.Fatalf("Run armed a timer for %v, want 30s", got.Sub(t0))
		}
	case <-time.After(50 * time.Millisecond):
	}
	w2 := p.Add(simTP, 0, 2, t0, t0.Add(31*time.Second)) // later: no nudge
	quiet()
	w0 := p.Add(simTP, 0, 3, t0, t0.Add(10*time.Second)) // earlier: nudged
	armed(t0.Add(10 * time.Second))
	c.AdvanceTo(t0.Add(10 * time.Second))
	armed(t0.Add(30 * time.Second))
	if !done(w0) || w0.Err() == nil || done(w1) || done(w2) {
		t.Fatalf("at 10s: w0 done %v (%v), w1 done %v, w2 done %v", done(w0), w0.Err(), done(w1), done(w2))
	}
	if n := p.Advance(simTP, 0, 2, 3, 2); n != 1 || w1.Err() != nil {
		t.Fatalf("advance completed %d, w1: %v", n, w1.Err())
	}
	c.AdvanceTo(t0.Add(30 * time.Second)) // nothing due: w2's 31s next
	armed(t0.Add(31 * time.Second))
	c.AdvanceTo(t0.Add(31 * time.Second))
	testwait.Until(10*time.Second, func() bool { return done(w2) })
	if w2.Err() == nil {
		t.Fatal("w2 completed without an error at its deadline")
	}
}
