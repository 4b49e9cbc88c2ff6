package replication

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// DeleteRecords waits: the purgatory's low-watermark waiters
// and LeaderState's Update.Low that wakes them.

func TestPurgatoryLowWaiters(t *testing.T) {
	p := NewPurgatory()
	dl := t0.Add(time.Minute)
	p.Lead(simTP, 2, 100, 3, 2)
	w40 := p.AddLow(simTP, 2, 40, t0, dl)
	w30 := p.AddLow(simTP, 2, 30, t0, dl)
	hw := p.Add(simTP, 2, 150, t0, dl)
	if p.Len() != 1 || p.LenLow() != 2 {
		t.Fatalf("len %d low %d, want 1 and 2", p.Len(), p.LenLow())
	}
	// Unknown and lower low watermarks answer nothing; HW progress does
	// not touch low waiters, nor low progress acks=all waiters.
	if n := p.AdvanceLow(simTP, 2, NoOffset); n != 0 {
		t.Fatalf("NoOffset completed %d", n)
	}
	if n := p.AdvanceLow(simTP, 2, 29); n != 0 || done(w30) {
		t.Fatalf("low 29 completed %d", n)
	}
	if n := p.Advance(simTP, 2, 140, 3, 2); n != 0 || done(w30) || done(w40) {
		t.Fatal("HW advance answered a low waiter")
	}
	if n := p.AdvanceLow(simTP, 2, 35); n != 1 || w30.Err() != nil || w30.LowWatermark() != 35 || done(w40) {
		t.Fatalf("low 35: completed %d, w30 %v %d", n, w30.Err(), w30.LowWatermark())
	}
	if done(hw) {
		t.Fatal("low advance answered an acks=all waiter")
	}
	// Added below a known low watermark: answered at once with it.
	if w := p.AddLow(simTP, 2, 35, t0, dl); !done(w) || w.Err() != nil || w.LowWatermark() != 35 {
		t.Fatalf("at the known low: done %v err %v lw %d", done(w), w.Err(), w.LowWatermark())
	}
	// The low watermark may move down (a follower back in the ISR): a
	// new waiter at the old value waits again.
	p.AdvanceLow(simTP, 2, 20)
	w35 := p.AddLow(simTP, 2, 35, t0, dl)
	if done(w35) {
		t.Fatal("waiter above a lowered low watermark answered")
	}
	// The leadership ends: every waiter of the epoch, both kinds, fails.
	if n := p.FailPartition(simTP, 2, ErrNotLeaderOrFollower); n != 3 {
		t.Fatalf("fail partition completed %d, want 3", n)
	}
	for _, w := range []*Waiter{w40, w35, hw} {
		if !errors.Is(w.Err(), ErrNotLeaderOrFollower) {
			t.Fatalf("after FailPartition: %v", w.Err())
		}
	}
	if w40.LowWatermark() != NoOffset {
		t.Fatalf("failed waiter carries low watermark %d", w40.LowWatermark())
	}
	// Added after the epoch ended (the leadership was dropped while the
	// log start moved): fails at once.
	if w := p.AddLow(simTP, 2, 1, t0, dl); !done(w) || !errors.Is(w.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("add to an ended epoch: %v", w.Err())
	}
	if p.Len() != 0 || p.LenLow() != 0 {
		t.Fatalf("left len %d low %d", p.Len(), p.LenLow())
	}
	// A newer epoch forgets the old low watermark and supersedes the
	// waiters of an older one.
	p.Lead(simTP, 3, 100, 3, 2)
	w := p.AddLow(simTP, 3, 10, t0, dl)
	if done(w) {
		t.Fatal("new epoch answered from the old epoch's low watermark")
	}
	p.AdvanceLow(simTP, 4, NoOffset)
	if !errors.Is(w.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("superseded epoch: %v", w.Err())
	}
}

func TestPurgatoryLowExpireCancelClose(t *testing.T) {
	p := NewPurgatory()
	p.Lead(simTP, 0, 100, 3, 2)
	a := p.AddLow(simTP, 0, 10, t0, t0.Add(time.Second))
	b := p.Add(simTP, 0, 200, t0, t0.Add(2*time.Second))
	c := p.AddLow(simTP, 0, 20, t0, t0.Add(3*time.Second))
	if d, _ := p.NextDeadline(); !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("next deadline %v", d)
	}
	if n := p.Expire(t0.Add(time.Second)); n != 1 || !errors.Is(a.Err(), ErrRequestTimedOut) || done(b) {
		t.Fatalf("expire: %d %v", n, a.Err())
	}
	p.Cancel(c)
	if !errors.Is(c.Err(), ErrClosed) || p.LenLow() != 0 || p.Len() != 1 {
		t.Fatalf("cancel: %v low %d len %d", c.Err(), p.LenLow(), p.Len())
	}
	p.Cancel(c) // twice: nothing happens
	p.AdvanceLow(simTP, 0, 50)
	d := p.AddLow(simTP, 0, 60, t0, t0.Add(time.Minute))
	if p.OldestWait(t0.Add(10*time.Second)) != 10*time.Second {
		t.Fatal("oldest wait")
	}
	p.Close()
	if !errors.Is(d.Err(), ErrClosed) || !errors.Is(b.Err(), ErrClosed) || p.LenLow() != 0 {
		t.Fatalf("close: %v %v", d.Err(), b.Err())
	}
	if w := p.AddLow(simTP, 0, 1, t0, t0); !errors.Is(w.Err(), ErrClosed) {
		t.Fatal("add after close")
	}
}

// lowHarness glues a LeaderState to a Purgatory the way broker.apply does
// and counts how often the purgatory is asked to re-check low waiters.
type lowHarness struct {
	t       *testing.T
	l       *LeaderState
	log     *memLog
	p       *Purgatory
	reports int // AdvanceLow calls
}

func (h *lowHarness) apply(u Update) {
	if u.LowChanged {
		h.reports++
		h.p.AdvanceLow(simTP, h.l.LeaderEpoch(), u.Low)
	}
}

func (h *lowHarness) fetch(id int32, start int64) {
	h.t.Helper()
	out, err := h.l.OnFollowerFetch(FollowerFetch{ReplicaID: id, CurrentLeaderEpoch: h.l.LeaderEpoch(), FetchOffset: 10, LastFetchedEpoch: NoEpoch, LogStartOffset: start}, t0)
	if err != nil {
		h.t.Fatal(err)
	}
	h.apply(out.Update)
}

// deleteRecords is the leader's side of DeleteRecords: move its own start,
// report it, park the wait.
func (h *lowHarness) deleteRecords(target int64, deadline time.Time) *Waiter {
	h.t.Helper()
	if _, err := h.log.AdvanceLogStart(target); err != nil {
		h.t.Fatal(err)
	}
	h.apply(h.l.OnLogStart())
	return h.p.AddLow(simTP, h.l.LeaderEpoch(), target, t0, deadline)
}

func newLowHarness(t *testing.T) *lowHarness {
	l, log := leaderFixture(t)
	log.hw = 10
	h := &lowHarness{t: t, l: l, log: log, p: NewPurgatory()}
	h.p.Lead(simTP, l.LeaderEpoch(), l.HighWatermark(), 3, 2)
	return h
}

// A DeleteRecords wait is answered by the follower fetch that brings the
// last ISR member's start up, and only then: fetches that change no start
// never reach the purgatory, so nothing is polled and nothing is re-checked
// per fetch.
func TestDeleteRecordsWokenByFollowerStarts(t *testing.T) {
	h := newLowHarness(t)
	h.fetch(2, 0)
	h.fetch(3, 0)
	if h.reports != 1 {
		t.Fatalf("%d low reports while followers reported their first starts, want 1 (NoOffset -> 0)", h.reports)
	}
	w := h.deleteRecords(6, t0.Add(time.Minute))
	if done(w) || h.reports != 1 {
		t.Fatalf("answered %v with followers at 0 (reports %d)", done(w), h.reports)
	}
	for range 100 { // fetches at unchanged starts: no re-check at all
		h.fetch(2, 0)
		h.fetch(3, 0)
	}
	if h.reports != 1 || done(w) {
		t.Fatalf("%d reports after 200 unchanged fetches, want 1", h.reports)
	}
	h.fetch(2, 6)
	if done(w) || h.reports != 1 {
		t.Fatalf("one follower at 6: done %v reports %d", done(w), h.reports)
	}
	h.fetch(3, 6)
	if !done(w) || w.Err() != nil || w.LowWatermark() != 6 || h.reports != 2 {
		t.Fatalf("both followers at 6: done %v err %v lw %d reports %d", done(w), w.Err(), w.LowWatermark(), h.reports)
	}
	// Asking again for what is already there answers at once.
	if w := h.deleteRecords(6, t0.Add(time.Minute)); !done(w) || w.LowWatermark() != 6 {
		t.Fatal("repeated DeleteRecords not answered at once")
	}
}

// A follower that stops fetching holds the wait until its deadline
// (REQUEST_TIMED_OUT); once the follower leaves the ISR the low watermark
// no longer counts it and the next wait is answered by that change.
func TestDeleteRecordsStoppedFollower(t *testing.T) {
	h := newLowHarness(t)
	h.fetch(2, 0)
	h.fetch(3, 0)
	dl := t0.Add(800 * time.Millisecond)
	w := h.deleteRecords(4, dl)
	h.fetch(2, 4) // 3 is stopped
	if done(w) {
		t.Fatal("answered while follower 3 is at 0")
	}
	if n := h.p.Expire(dl.Add(-time.Millisecond)); n != 0 {
		t.Fatal("expired early")
	}
	if n := h.p.Expire(dl); n != 1 || !errors.Is(w.Err(), ErrRequestTimedOut) || w.LowWatermark() != NoOffset {
		t.Fatalf("deadline: %d %v %d", n, w.Err(), w.LowWatermark())
	}
	w = h.deleteRecords(5, t0.Add(time.Minute))
	h.fetch(2, 5)
	if done(w) {
		t.Fatal("answered while follower 3 is in the ISR at 0")
	}
	// The controller takes 3 out of the ISR.
	u, err := h.l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8}, t0)
	if err != nil {
		t.Fatal(err)
	}
	h.apply(u)
	if !done(w) || w.Err() != nil || w.LowWatermark() != 5 {
		t.Fatalf("after the ISR shrank: done %v %v %d", done(w), w.Err(), w.LowWatermark())
	}
	// Leader alone in the ISR: its own move answers at once.
	if _, err := h.l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9}, t0); err != nil {
		t.Fatal(err)
	}
	if w := h.deleteRecords(7, t0.Add(time.Minute)); !done(w) || w.LowWatermark() != 7 {
		t.Fatalf("leader alone: done %v lw %d", done(w), w.LowWatermark())
	}
	// The leadership moves: a parked wait fails with NOT_LEADER_OR_FOLLOWER.
	if u, err = h.l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10}, t0); err != nil {
		t.Fatal(err)
	}
	h.apply(u)
	h.fetch(2, 7)
	w = h.deleteRecords(8, t0.Add(time.Minute))
	if done(w) {
		t.Fatal("answered with follower 2 at 7")
	}
	if _, err := h.l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 11}, t0); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatal(err)
	}
	h.p.FailPartition(simTP, 5, ErrNotLeaderOrFollower)
	if !errors.Is(w.Err(), ErrNotLeaderOrFollower) {
		t.Fatalf("after the leadership ended: %v", w.Err())
	}
}

// Concurrent adds, advances, cancels and expiries: every waiter is
// answered exactly once (a double close would panic) and the counts end
// at zero.
func TestPurgatoryLowConcurrent(t *testing.T) {
	p := NewPurgatory()
	p.Lead(simTP, 1, 0, 3, 2)
	var wg sync.WaitGroup
	const workers, per = 4, 300
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range per {
				target := int64(r.IntN(50))
				w := p.AddLow(simTP, 1, target, t0, t0.Add(time.Duration(r.IntN(100))*time.Millisecond))
				switch i % 3 {
				case 0:
					p.Cancel(w)
				case 1:
					p.AdvanceLow(simTP, 1, int64(r.IntN(60)))
				default:
					p.Expire(t0.Add(time.Duration(r.IntN(100)) * time.Millisecond))
				}
			}
		}()
	}
	wg.Wait()
	p.Expire(t0.Add(time.Hour))
	if p.LenLow() != 0 || p.Len() != 0 {
		t.Fatalf("left low %d len %d", p.LenLow(), p.Len())
	}
}

// Random follower fetches, ISR changes, leader start moves and ticks:
// after every event no parked waiter is covered by the LeaderState's
// current low watermark (no input change went unreported to the
// purgatory), and every answered waiter got a low watermark at least its
// target. Seeded, so a failure replays.
func TestDeleteRecordsLowWatermarkModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 18))
		h := newLowHarness(t)
		var parked []*Waiter
		partEpoch := int32(7)
		for step := range 300 {
			switch r.IntN(5) {
			case 0, 1:
				h.fetch(int32(2+r.IntN(2)), int64(r.IntN(11)))
			case 2:
				isr := []int32{1}
				for _, id := range []int32{2, 3} {
					if r.IntN(2) == 0 {
						isr = append(isr, id)
					}
				}
				partEpoch++
				u, err := h.l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: isr, Leader: 1, LeaderEpoch: 5, PartitionEpoch: partEpoch}, t0)
				if err != nil {
					t.Fatal(err)
				}
				h.apply(u)
			case 3:
				target := h.log.LogStartOffset() + int64(r.IntN(int(11-h.log.LogStartOffset())))
				parked = append(parked, h.deleteRecords(target, t0.Add(time.Hour)))
			default:
				h.apply(h.l.Tick(t0))
			}
			low := h.l.LowWatermark()
			keep := parked[:0]
			for _, w := range parked {
				if !done(w) {
					if low != NoOffset && w.last <= low {
						t.Fatalf("seed %d step %d: waiter for %d parked with low watermark %d", seed, step, w.last, low)
					}
					keep = append(keep, w)
					continue
				}
				if w.Err() != nil || w.LowWatermark() < w.last {
					t.Fatalf("seed %d step %d: waiter for %d answered %d, %v", seed, step, w.last, w.LowWatermark(), w.Err())
				}
			}
			parked = keep
		}
	}
}
