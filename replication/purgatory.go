package replication

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// Waiter is one acks=all produce partition waiting for the high watermark
// (Add), or one DeleteRecords partition waiting for the low watermark
// (AddLow).
type Waiter struct {
	tp    TopicPartition
	epoch int32 // leader epoch the append (or the log start move) was made under
	// last is the last offset of the append, done when HW > last; for a
	// low waiter the requested log start, done when low watermark >= last.
	last     int64
	low      bool  // a low-watermark waiter (AddLow)
	lw       int64 // the low watermark that answered a low waiter
	added    time.Time
	deadline time.Time
	done     chan struct{}
	err      error
	offIdx   int // index in the partition's offset heap, -1 when out
	dlIdx    int // index in the deadline heap, -1 when out
}

// Done is closed when the waiter completed; Err is valid then.
func (w *Waiter) Done() <-chan struct{} { return w.done }

// Err is nil when the records are committed with enough replicas, else
// ErrNotEnoughReplicasAfterAppend, ErrRequestTimedOut,
// ErrNotLeaderOrFollower (the leader epoch of the append ended: the error
// given to FailPartition, or a newer epoch was seen), or ErrClosed.
func (w *Waiter) Err() error {
	<-w.done
	return w.err
}

// LowWatermark is, for a low waiter answered without error, the low
// watermark that answered it (at least the requested offset); NoOffset
// otherwise. It blocks until the waiter is done.
func (w *Waiter) LowWatermark() int64 {
	<-w.done
	return w.lw
}

// partWaiters is one partition's waiters and progress. Both belong to one
// leader epoch: an offset means nothing across epochs (the new leader may
// have truncated it and written other records there), so a waiter is only
// ever completed by the high watermark of the epoch it was appended in.
type partWaiters struct {
	byOffset offsetHeap // acks=all waiters, by last offset
	byLow    offsetHeap // low-watermark waiters, by requested log start
	// epoch is the leader epoch of the waiters and progress held; ended
	// is the newest epoch FailPartition closed (NoEpoch if none). A
	// waiter of an epoch <= ended, or older than epoch, fails at once.
	epoch int32
	ended int32
	// Last progress reported by Advance, so a waiter added after the HW
	// already covered it completes at once instead of missing its wake-up.
	known      bool
	hw         int64
	maximalISR int
	minISR     int
	// Last low watermark reported by AdvanceLow, for the same reason.
	lowKnown bool
	low      int64
}

// Purgatory holds acks=all waiters and DeleteRecords' low-watermark
// waiters. Each sits in a per-partition min-heap by offset and in one
// min-heap by deadline, so Advance, AdvanceLow and Expire cost O(k log n)
// for k completed waiters and never scan the others. It is safe for
// concurrent use.
//
// Every waiter is answered, by the first of: the HW of its leader epoch
// passes its last offset (Advance), or for a low waiter the low watermark
// of its epoch reaches its offset (AdvanceLow); its epoch ends
// (FailPartition, or an Add or Advance of a newer epoch); its deadline
// (Expire, driven by Run); Cancel or Close. Kafka's delayed produce and
// delayed delete-records complete on the same events.
type Purgatory struct {
	mu        sync.Mutex
	parts     map[TopicPartition]*partWaiters
	deadlines deadlineHeap
	nLow      int // low waiters among deadlines
	closed    bool
	wake      chan struct{} // nudges Run when an earlier deadline arrives
	// armed is the deadline Run's timer is set for (zero: none). A waiter
	// due later needs no nudge: Run wakes at armed anyway and re-arms for
	// the earliest then, so a steady stream of produce waiters, each done
	// long before the request timeout, wakes Run once per timeout instead
	// of once per request.
	armed time.Time
}

// NewPurgatory returns an empty purgatory.
func NewPurgatory() *Purgatory {
	return &Purgatory{parts: map[TopicPartition]*partWaiters{}, wake: make(chan struct{}, 1)}
}

// Add registers a waiter for an append whose last offset is lastOffset,
// made while this broker led tp in leader epoch epoch. Call it after the
// append, from anywhere: if Advance of that epoch already covered the
// offset the waiter completes immediately, and if the epoch already ended
// (the leadership was lost or replaced while the append ran) it fails at
// once with ErrNotLeaderOrFollower. now is when the request arrived (for
// OldestWait).
func (p *Purgatory) Add(tp TopicPartition, epoch int32, lastOffset int64, now, deadline time.Time) *Waiter {
	return p.add(&Waiter{tp: tp, epoch: epoch, last: lastOffset, added: now, deadline: deadline, done: make(chan struct{}), offIdx: -1, dlIdx: -1})
}

// AddLow registers a DeleteRecords wait: the low watermark (the smallest
// log start over the leader and its ISR, LeaderState.LowWatermark) of tp
// must reach target, the log start this broker moved to while leading tp
// in leader epoch epoch. Like Add it completes at once when the last
// AdvanceLow of that epoch already reached target, and fails at once
// with ErrNotLeaderOrFollower when the epoch ended. Report the current
// low watermark before calling it (the leader's own start just moved).
func (p *Purgatory) AddLow(tp TopicPartition, epoch int32, target int64, now, deadline time.Time) *Waiter {
	return p.add(&Waiter{tp: tp, epoch: epoch, last: target, low: true, lw: NoOffset, added: now, deadline: deadline, done: make(chan struct{}), offIdx: -1, dlIdx: -1})
}

// add answers w at once when it can (closed, its epoch ended, the progress
// last reported covers it) and parks it otherwise: in its partition's heap
// of its kind and in the deadline heap, nudging Run when its deadline
// comes before the one Run's timer is set for.
func (p *Purgatory) add(w *Waiter) *Waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.finish(w, ErrClosed)
		return w
	}
	pw := p.enterEpoch(w.tp, w.epoch)
	if pw == nil {
		p.finish(w, fmt.Errorf("%s-%d %s %d: leader epoch %d ended: %w", w.tp.Topic, w.tp.Partition, w.what(), w.last, w.epoch, ErrNotLeaderOrFollower))
		return w
	}
	h := &pw.byOffset
	switch {
	case w.low && pw.lowKnown && pw.low >= w.last:
		w.lw = pw.low
		p.finish(w, nil)
		return w
	case w.low:
		h = &pw.byLow
		p.nLow++
	case pw.known && w.last < pw.hw:
		p.finish(w, afterAppend(w.tp, pw))
		return w
	}
	heap.Push(h, w)
	heap.Push(&p.deadlines, w)
	if p.armed.IsZero() || w.deadline.Before(p.armed) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return w
}

// what names the offset w waits on, for errors.
func (w *Waiter) what() string {
	if w.low {
		return "log start"
	}
	return "offset"
}

// enterEpoch returns tp's waiters for epoch, failing those of an older
// epoch first, or nil when epoch is stale (ended, or older than the
// current one). Lock should be held.
func (p *Purgatory) enterEpoch(tp TopicPartition, epoch int32) *partWaiters {
	pw := p.parts[tp]
	if pw == nil {
		pw = &partWaiters{epoch: epoch, ended: NoEpoch}
		p.parts[tp] = pw
	}
	switch {
	case epoch <= pw.ended || epoch < pw.epoch:
		return nil
	case epoch > pw.epoch:
		// A newer leadership of ours, its predecessor never failed (a
		// missed FailPartition): the old waiters' offsets mean nothing
		// in the new epoch.
		p.failWaiters(pw, fmt.Errorf("%s-%d: leader epoch %d superseded by %d: %w", tp.Topic, tp.Partition, pw.epoch, epoch, ErrNotLeaderOrFollower))
		pw.epoch, pw.known, pw.lowKnown = epoch, false, false
	}
	return pw
}

// failWaiters completes every waiter of pw with err. Lock should be held.
func (p *Purgatory) failWaiters(pw *partWaiters, err error) int {
	n := 0
	for len(pw.byOffset) > 0 {
		p.finish(pw.byOffset[0], err)
		n++
	}
	for len(pw.byLow) > 0 {
		p.finish(pw.byLow[0], err)
		n++
	}
	return n
}

func afterAppend(tp TopicPartition, pw *partWaiters) error {
	if pw.maximalISR < pw.minISR {
		return fmt.Errorf("%s-%d: ISR of %d, min.insync.replicas %d: %w", tp.Topic, tp.Partition, pw.maximalISR, pw.minISR, ErrNotEnoughReplicasAfterAppend)
	}
	return nil
}

// finish completes w. Lock should be held.
func (p *Purgatory) finish(w *Waiter, err error) {
	if w.offIdx >= 0 {
		pw := p.parts[w.tp]
		if w.low {
			heap.Remove(&pw.byLow, w.offIdx)
			p.nLow--
		} else {
			heap.Remove(&pw.byOffset, w.offIdx)
		}
	}
	if w.dlIdx >= 0 {
		heap.Remove(&p.deadlines, w.dlIdx)
	}
	w.err = err
	close(w.done)
}

// Lead reports that this broker leads tp in leader epoch epoch from now
// on, with high watermark hw (LeaderState.HighWatermark) and the maximal
// ISR size: waiters of an older epoch fail, and waiters below hw complete
// as Advance would complete them. A new leader's HW usually starts where
// the log's was and only moves when an append or a follower fetch moves
// it; without Lead a retried produce whose records are already below it
// (an idempotent duplicate, answered with the offsets of the first write)
// would wait for a move that may never come. Leading again in the same
// epoch (the broker dropped the leadership itself: the log was replaced,
// the partition left and came back while the metadata did not move)
// reopens an epoch a local FailPartition ended: the records of one epoch
// have one writer, this broker.
func (p *Purgatory) Lead(tp TopicPartition, epoch int32, hw int64, maximalISR, minISR int) int {
	p.mu.Lock()
	if !p.closed {
		if pw := p.parts[tp]; pw != nil && pw.ended >= epoch {
			pw.ended = epoch - 1
		}
	}
	p.mu.Unlock()
	return p.Advance(tp, epoch, hw, maximalISR, minISR)
}

// Advance reports a partition's leader progress in leader epoch epoch:
// that epoch's waiters whose last offset is below hw complete, with
// ErrNotEnoughReplicasAfterAppend when the maximal ISR
// (LeaderState.MaximalISR) has fewer than minISR members. Progress of an
// ended or older epoch is ignored. It returns how many completed.
func (p *Purgatory) Advance(tp TopicPartition, epoch int32, hw int64, maximalISR, minISR int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	pw := p.progress(tp, epoch)
	if pw == nil {
		return 0
	}
	pw.known, pw.hw, pw.maximalISR, pw.minISR = true, hw, maximalISR, minISR
	n := 0
	for len(pw.byOffset) > 0 && pw.byOffset[0].last < hw {
		p.finish(pw.byOffset[0], afterAppend(tp, pw))
		n++
	}
	return n
}

// progress returns tp's waiters for a progress report of epoch, nil when
// the report is to be ignored (closed, or a stale epoch). Lock should be
// held.
func (p *Purgatory) progress(tp TopicPartition, epoch int32) *partWaiters {
	if p.closed {
		return nil
	}
	return p.enterEpoch(tp, epoch)
}

// AdvanceLow reports a partition's low watermark in leader epoch epoch
// (LeaderState's Update.Low): that epoch's low waiters whose offset it
// reached complete with it. NoOffset (a follower has not reported its
// start yet) completes nothing. The low watermark may also move down (a
// lagging follower rejoined the ISR); later waiters then wait again.
// Reports of an ended or older epoch are ignored. It returns how many
// completed.
func (p *Purgatory) AdvanceLow(tp TopicPartition, epoch int32, low int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	pw := p.progress(tp, epoch)
	if pw == nil {
		return 0
	}
	pw.lowKnown, pw.low = true, low
	n := 0
	for len(pw.byLow) > 0 && pw.byLow[0].last <= low {
		w := pw.byLow[0]
		w.lw = low
		p.finish(w, nil)
		n++
	}
	return n
}

// FailPartition ends leader epoch epoch of tp: its waiters (and any of an
// older epoch) complete with err, its progress is forgotten, and a later
// Add for it or an older epoch fails at once. Call it when this broker
// stops leading tp in that epoch (err wrapping ErrNotLeaderOrFollower) or
// the partition is deleted. Waiters of a newer epoch are left alone.
func (p *Purgatory) FailPartition(tp TopicPartition, epoch int32, err error) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	pw := p.parts[tp]
	if pw == nil {
		pw = &partWaiters{epoch: epoch, ended: NoEpoch}
		p.parts[tp] = pw
	}
	pw.ended = max(pw.ended, epoch)
	if pw.epoch > epoch {
		return 0
	}
	pw.known, pw.lowKnown = false, false
	return p.failWaiters(pw, err)
}

// FailWaiting fails tp's waiters of leader epoch epoch (or older) that
// are parked now, with err, without ending the epoch: a waiter added
// later is answered as usual. The broker uses it while its metadata is
// stale (it may no longer lead, but cannot tell yet): clients go and look
// for the leader instead of waiting out their timeouts, and if the lease
// resumes unchanged the epoch goes on.
func (p *Purgatory) FailWaiting(tp TopicPartition, epoch int32, err error) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	pw := p.parts[tp]
	if p.closed || pw == nil || pw.epoch > epoch {
		return 0
	}
	return p.failWaiters(pw, err)
}

// Expire completes the waiters whose deadline is not after now with
// ErrRequestTimedOut.
func (p *Purgatory) Expire(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(p.deadlines) > 0 && !p.deadlines[0].deadline.After(now) {
		w := p.deadlines[0]
		p.finish(w, fmt.Errorf("%s-%d %s %d: %w", w.tp.Topic, w.tp.Partition, w.what(), w.last, ErrRequestTimedOut))
		n++
	}
	return n
}

// Cancel removes w without completing it normally (its connection went
// away); w's Err is ErrClosed. Completed waiters are left alone.
func (p *Purgatory) Cancel(w *Waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.offIdx >= 0 {
		p.finish(w, ErrClosed)
	}
}

// arm notes the earliest pending deadline as the one Run's timer is set
// for, and returns it.
func (p *Purgatory) arm() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = time.Time{}
	if len(p.deadlines) == 0 {
		return time.Time{}, false
	}
	p.armed = p.deadlines[0].deadline
	return p.armed, true
}

// NextDeadline is the earliest pending deadline.
func (p *Purgatory) NextDeadline() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.deadlines) == 0 {
		return time.Time{}, false
	}
	return p.deadlines[0].deadline, true
}

// OldestWait is how long the longest-waiting pending acks=all waiter has
// waited at now (since the request it belongs to arrived), 0 when none
// waits. It is a scan: call it at scrape time, not per request.
func (p *Purgatory) OldestWait(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest time.Duration
	for _, w := range p.deadlines {
		if !w.low {
			oldest = max(oldest, now.Sub(w.added))
		}
	}
	return oldest
}

// Len is the number of pending acks=all waiters.
func (p *Purgatory) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.deadlines) - p.nLow
}

// LenLow is the number of pending low-watermark (DeleteRecords) waiters.
func (p *Purgatory) LenLow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nLow
}

// Close fails every pending waiter with ErrClosed; later Adds fail at once.
func (p *Purgatory) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for len(p.deadlines) > 0 {
		p.finish(p.deadlines[0], ErrClosed)
	}
	p.parts = map[TopicPartition]*partWaiters{}
}

// Run expires waiters on time until ctx ends, sleeping until the earliest
// deadline (or an earlier one added meanwhile).
func (p *Purgatory) Run(ctx context.Context, clock Clock) {
	for {
		p.Expire(clock.Now())
		var timer <-chan time.Time
		if d, ok := p.arm(); ok {
			timer = clock.After(d.Sub(clock.Now()))
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer:
		}
	}
}

type offsetHeap []*Waiter

func (h offsetHeap) Len() int           { return len(h) }
func (h offsetHeap) Less(i, j int) bool { return h[i].last < h[j].last }
func (h offsetHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].offIdx, h[j].offIdx = i, j
}
func (h *offsetHeap) Push(x any) {
	w := x.(*Waiter)
	w.offIdx = len(*h)
	*h = append(*h, w)
}
func (h *offsetHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.offIdx = -1
	return w
}

type deadlineHeap []*Waiter

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].dlIdx, h[j].dlIdx = i, j
}
func (h *deadlineHeap) Push(x any) {
	w := x.(*Waiter)
	w.dlIdx = len(*h)
	*h = append(*h, w)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.dlIdx = -1
	return w
}
