package engine

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/ringlog/ringlog/iouring"
)

// The ring's journal rounds (owner only). Under the journal a group's
// segment write goes out without an fsync; once it completed, and every
// earlier group of its partition completed without error, the group is
// queued for the journal (queueJournal). With no journal write in flight
// the owner takes the queue (up to one write's worth) into one journal
// write (fillJournal): the groups' records copied into the journal's
// aligned buffer, one WRITE with RWF_DSYNC through the O_DIRECT
// descriptor, or on the buffered fallback a WRITE linked to one
// FSYNC(DATASYNC). Its completion makes every group in it done, and the
// usual in-order retirement acknowledges them. A group that failed is
// never journaled, nor anything of its partition after it, so a rollback
// (uring_undo.go) never cuts bytes a replay would bring back.

// jwIO is a journal write in the kernel.
type jwIO struct {
	w       *jwrite
	groups  []*ioGroup
	pending int
	err     error
	pin     runtime.Pinner
	sentAt  time.Time
}

// jdrain is a drainJournal waiting for the groups queued up to target.
type jdrain struct {
	target uint64
	reply  chan error
}

// drainJournal asks the owner to answer once every group queued for the
// journal so far is in a completed journal write.
func (q *uringQueue) drainJournal() error {
	if q.j == nil {
		return nil
	}
	reply := make(chan error, 1)
	if err := q.put(ioReq{kind: reqDrain, reply: reply}); err != nil {
		return err
	}
	return <-reply
}

// answerDrains answers the drains the journal has caught up with.
func (q *uringQueue) answerDrains() {
	n := 0
	for _, d := range q.drains {
		if d.target <= q.jDone {
			d.reply <- q.j.err()
			continue
		}
		q.drains[n] = d
		n++
	}
	clear(q.drains[n:])
	q.drains = q.drains[:n]
}

// queueJournal queues pio's groups whose segment writes completed, in
// order, stopping at the first one not written or failed.
func (q *uringQueue) queueJournal(pio *partIO) {
	if pio == nil || pio.failed != nil || pio.fatal != nil || pio.undo != nil {
		return
	}
	for _, g := range pio.groups[:len(pio.groups)-pio.unsent] {
		if g.err != nil || !g.wrote {
			return
		}
		if !g.jrnl || g.jq {
			continue
		}
		g.jq = true
		if g.syncErr != 0 {
			// An injected fdatasync fault of the segment: the
			// partition's barrier failed, as a failed fdatasync would.
			err := fmt.Errorf("%w: fdatasync %s: %w", ErrStorage, g.seg.path(logSuffix), g.syncErr)
			g.journaled, g.err = true, err
			pio.fatal = err
			q.touch(g.p)
			q.finished(g)
			return
		}
		q.jQueued++
		g.jseq = q.jQueued
		q.jPending = append(q.jPending, g)
	}
}

// fillJournal starts the next journal write when none is in flight.
func (q *uringQueue) fillJournal() {
	if q.jio != nil || len(q.jPending) == 0 {
		return
	}
	if err := q.j.err(); err != nil {
		gs := q.jPending
		q.jPending = nil
		q.failJournal(gs, err)
		q.settle() // outside reap: retire the failed partitions now
		q.deliver()
		return
	}
	if q.holdJournal(time.Now()) {
		return
	}
	// The journal's write, its records and the groups it carries are
	// reused round to round: one write is in flight at a time (q.jio),
	// and plan reuses its buffer on the same terms. Fresh ones cost four
	// allocations per round on every broker.
	clear(q.jRecs)
	recs := q.jRecs[:0]
	var n int64
	k := 0
	for ; k < len(q.jPending); k++ {
		g := q.jPending[k]
		r := jrec{p: g.p, name: g.p.dirName(), seg: g.seg, pos: g.pos, bufs: g.bufs, n: g.n}
		if k > 0 && n+r.size() > q.j.maxWrite {
			break
		}
		recs = append(recs, r)
		n += r.size()
	}
	q.jRecs = recs
	const need = 3 // wrap marker, records, fdatasync
	if need > int(q.ring.SQSpace()) || q.inflight+need > q.maxInfl {
		return // next round
	}
	w := q.j.plan(recs)
	if w == nil {
		q.j.kickCheckpoint() // its completion wakes the owner (journal.wake)
		return
	}
	jio := &q.jioSlot
	clear(jio.groups)
	*jio = jwIO{w: w, groups: append(jio.groups[:0], q.jPending[:k]...), sentAt: time.Now()}
	rest := copy(q.jPending, q.jPending[k:])
	clear(q.jPending[rest:])
	q.jPending = q.jPending[:rest]
	q.jio = jio
	q.jPacer.started(jio.sentAt)
	fd := q.j.f.Fd()
	if q.faults != nil {
		// The journal file's own faults: a failed write fails the round.
		if _, _, err := q.faults.CheckWrite(q.j.path); err != nil {
			q.injected = append(q.injected, injectedCQE{opRef{jw: jio, want: w.n}, -int32(errnoOf(err))})
			jio.pending++
			return
		}
	}
	direct := q.j.direct()
	if direct {
		fd = q.j.dfd
		if q.journalWriteFd != nil {
			fd = q.journalWriteFd()
		}
	}
	// Direct: each write carries RWF_DSYNC and is its own barrier; the
	// kernel issues it inline and completes it from the block layer, no
	// io-wq worker involved. Buffered: the writes are linked to one
	// fdatasync, which runs only after every write of the chain succeeded
	// in full (a failed or short one cancels it).
	if w.wrapPos >= 0 {
		jio.pin.Pin(&w.wrapHdr[0])
		sqe := q.sqe(opRef{jw: jio, want: int64(len(w.wrapHdr))})
		iouring.PrepWrite(sqe, fd, w.wrapHdr, uint64(w.wrapPos))
		if direct {
			sqe.SetRWFlags(iouring.RWFDsync)
		} else {
			sqe.SetFlags(iouring.SQEIOLink)
		}
		jio.pending++
	}
	jio.pin.Pin(&w.buf[0])
	sqe := q.sqe(opRef{jw: jio, want: w.n})
	iouring.PrepWrite(sqe, fd, w.buf, uint64(w.pos))
	jio.pending++
	if direct {
		sqe.SetRWFlags(iouring.RWFDsync)
		return
	}
	sqe.SetFlags(iouring.SQEIOLink)
	if q.journalSyncFd != nil {
		fd = q.journalSyncFd()
	}
	iouring.PrepFsync(q.sqe(opRef{jw: jio, sync: true}), fd, true)
	jio.pending++
}

// intakeWaiting reports whether appends wait in the intake, not yet
// drained by the owner.
func (q *uringQueue) intakeWaiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.intake) > 0
}

// holdJournal reports whether the next journal write waits for more
// appends (commitPacer.wait), and arms a timer that wakes the owner when the
// wait ends. Closing never waits.
func (q *uringQueue) holdJournal(now time.Time) bool {
	d := q.jPacer.wait(q.e.cfg.JournalCommitInterval, func() (n int64) {
		for _, g := range q.jPending {
			n += g.n
		}
		return n
	}, now)
	if d <= 0 {
		return false
	}
	q.mu.Lock()
	closing := q.closing
	q.mu.Unlock()
	if closing {
		return false
	}
	if now.Before(q.jWakeAt) {
		return true // armed: the wait ends at the same time
	}
	q.jWakeAt = now.Add(d)
	if q.jTimer == nil {
		q.jTimer = time.AfterFunc(d, q.kick) // kick is a no-op once the ring is gone
	} else {
		q.jTimer.Reset(d)
	}
	return true
}

// journalCompleted applies one completion of the journal write in flight.
func (q *uringQueue) journalCompleted(ref opRef, res int32) {
	jio := ref.jw
	jio.pending--
	var err error
	switch {
	case res == -int32(syscall.ECANCELED):
		// Behind a failed write of the chain, which says what went wrong.
	case res < 0:
		err = syscall.Errno(-res)
	case ref.sync:
		q.e.stats.fsyncLatency.observe(time.Since(jio.sentAt))
		err = vfs.Synced(q.j.f) // a crashable FS counts the journal durable now
	case int64(res) != ref.want:
		err = fmt.Errorf("short write %d of %d", res, ref.want)
	}
	if err != nil && jio.err == nil {
		op := "write"
		if ref.sync {
			op = "fdatasync"
		}
		jio.err = fmt.Errorf("%w: %s %s: %v", ErrStorage, op, q.j.path, err)
	}
	if jio.pending > 0 {
		return
	}
	jio.pin.Unpin()
	q.jio = nil
	q.jPacer.written(len(jio.groups), len(q.jPending) > 0 || q.intakeWaiting())
	if jio.err == nil && q.j.direct() {
		// The writes were the barrier.
		q.e.stats.fsyncLatency.observe(time.Since(jio.sentAt))
		if err := vfs.Synced(q.j.f); err != nil {
			jio.err = fmt.Errorf("%w: write %s: %v", ErrStorage, q.j.path, err)
		}
	}
	if jio.err != nil {
		q.j.fail(jio.err)
		gs := append(jio.groups, q.jPending...)
		q.jPending = nil
		q.failJournal(gs, jio.err)
		return
	}
	q.j.settle(jio.w)
	for _, g := range jio.groups {
		g.journaled = true
		q.touch(g.p)
		q.finished(g)
	}
	q.jDone = max(q.jDone, jio.groups[len(jio.groups)-1].jseq)
	q.answerDrains()
}

// failJournal fails groups whose journal write failed (or cannot be
// made): fatal for their partitions, as a failed fdatasync is.
func (q *uringQueue) failJournal(gs []*ioGroup, err error) {
	for _, g := range gs {
		g.journaled = true
		if g.err == nil {
			g.err = err
		}
		if pio := q.parts[g.p]; pio.fatal == nil {
			pio.fatal = err
		}
		q.touch(g.p)
		q.finished(g)
		q.jDone = max(q.jDone, g.jseq)
	}
	q.answerDrains()
}
