package engine

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
)

// Retiring the ring's groups (owner only): acknowledging the completed
// prefix, taking the partition offline after a fatal failure, and rolling
// it back after its writes failed for lack of space.
//
// On the io_uring path appends are stamped (offsets, segment size, index
// entries, producer state, epoch cache) under the partition lock before
// their writes reach the kernel, so when a write fails with ENOSPC, EDQUOT
// or short, later appends have already moved the partition on. Instead of
// taking the partition offline, the owner:
//
//  1. retires the groups before the first failed one as usual (those
//     appends are acknowledged), and fails the waiters of the failed group
//     and every later one with a retriable storage error (noteReject);
//  2. refuses every append, and answers every barrier, stamped in the same
//     truncation generation with that error: they lie past the failed write;
//  3. once none of the partition's writes is in the kernel, hands the
//     completer a rollback note (noteUndo): under the partition lock it
//     truncates the segment and the in-memory state back to the failed
//     write's start with the machinery of a follower truncation
//     (Partition.rollBack, truncateAt) and bumps the generation;
//  4. forgets the undo at the first request of a later generation.
//
// Offsets stay dense (the next append gets the failed write's first
// offset), nothing acknowledged is lost (acknowledged writes all lie
// below it), and the HW and readable end never passed it: they only cover
// the retired prefix. A failed fdatasync, or a write failing with any other
// errno, still takes the partition offline (failPart): the page cache
// cannot be trusted after those.

// retire hands the contiguous done prefix of p's groups to the completer.
// A fatal failure fails p; writes that failed for lack of space start or
// continue its rollback (undo) once the prefix before them is retired.
func (q *uringQueue) retire(p *Partition, pio *partIO) {
	if pio.failed != nil {
		return
	}
	if pio.fatal != nil {
		q.failPart(p, pio, pio.fatal)
		return
	}
	q.advance(p, pio)
	q.undo(p, pio)
}

// advance retires the contiguous prefix of groups written (and synced)
// without error.
func (q *uringQueue) advance(p *Partition, pio *partIO) {
	i := 0
	n := ioNote{kind: noteAdvance, p: p, durable: q.always}
	for ; i < len(pio.groups)-pio.unsent; i++ {
		g := pio.groups[i]
		if !g.done() || g.err != nil {
			break
		}
		n.end, n.seg, n.pos, n.gen = g.end, g.seg, g.pos+g.n, g.gen
		if n.waiters == nil {
			n.waiters = g.waiters // the usual one group: no copy
		} else {
			n.waiters = append(n.waiters, g.waiters...)
		}
		g.waiters = nil
	}
	if i == 0 {
		return
	}
	// Moved to the front rather than resliced past, so the list keeps
	// its room: an append per round outgrew it otherwise.
	k := copy(pio.groups, pio.groups[i:])
	clear(pio.groups[k:])
	pio.groups = pio.groups[:k]
	q.note(n)
}

// failPart fails p: every waiter of an unretired group fails with err and
// later appends are refused. Groups still in the kernel keep their buffers
// pinned until their completions arrive.
func (q *uringQueue) failPart(p *Partition, pio *partIO, err error) {
	if pio.failed != nil {
		return
	}
	pio.failed = err
	q.note(ioNote{kind: noteFail, p: p, err: err, waiters: pio.dropGroups(0)})
	q.finishDropped(pio)
	q.touch(p) // answers its barriers and drops its flushes
	if pio.out == 0 && pio.torn != nil {
		q.cutTorn(p, pio)
	}
}

// noteTorn remembers where a failed write started: part of it (and of
// writes after it) may be in the file. Out of space (ENOSPC, EDQUOT, or a
// short write: the kernel running out of room) is undone by a rollback;
// any other errno is fatal. Owner only.
func (q *uringQueue) noteTorn(g *ioGroup, res int32, err error) {
	pio := q.parts[g.p]
	if res == -int32(syscall.ENOSPC) || res == -int32(syscall.EDQUOT) || res >= 0 {
		q.e.disk.noSpace()
	} else if pio.fatal == nil {
		pio.fatal = err
	}
	switch {
	case pio.torn == nil:
		g.seg.acquire()
		pio.torn, pio.tornPos, pio.tornOff = g.seg, g.pos, g.base
	case pio.torn == g.seg && g.pos < pio.tornPos:
		pio.tornPos, pio.tornOff = g.pos, g.base
	}
}

// cutTorn truncates the segment a write failed on back to the end of its
// last whole batch at once, instead of leaving the torn tail (and the
// space it holds) to the next Open, when the partition goes offline
// (a fatal failure; out of space is rolled back instead, uring_undo.go).
// Owner only; no write of the partition is in the kernel.
func (q *uringQueue) cutTorn(p *Partition, pio *partIO) {
	seg, pos := pio.torn, pio.tornPos
	pio.torn = nil
	if err := seg.log.Truncate(pos); err != nil {
		q.e.log.Error("truncating the torn tail after a failed write", "path", seg.path(logSuffix), "to", pos, "err", err)
	} else {
		q.e.log.Warn("truncated the torn tail after a failed write", "topic", p.topic.name, "partition", p.idx, "path", seg.path(logSuffix), "to", pos)
	}
	seg.release()
}

// undoState is a partition's rollback in the owner.
type undoState struct {
	gen  uint64 // appends and barriers of this generation are refused
	err  error  // what they are refused with
	sent bool   // the rollback note went to the completer
}

// errRollingBack marks the storage error of appends refused while their
// partition is rolled back after a write failed for lack of space: the
// partition stays online and takes the same offsets again afterwards.
var errRollingBack = errors.New("appends rolled back to the last whole batch; retry")

// rollingBack reports whether err is errRollingBack's: the partition is
// not failed, only the appends.
func rollingBack(err error) bool { return errors.Is(err, errRollingBack) }

// undo fails the failed group and every later one, and sends the rollback
// note once nothing of the partition is in the kernel and the groups
// before the failed one are retired. Owner only.
func (q *uringQueue) undo(p *Partition, pio *partIO) {
	k := -1
	for i, g := range pio.groups {
		if g.err != nil {
			k = i
			break
		}
	}
	if k >= 0 {
		if pio.undo == nil {
			pio.undo = &undoState{gen: pio.groups[k].gen, err: fmt.Errorf("%w (%w)", pio.groups[k].err, errRollingBack)}
		}
		q.note(ioNote{kind: noteReject, p: p, err: pio.undo.err, waiters: pio.dropGroups(k)})
		q.finishDropped(pio)
	}
	if pio.undo == nil || pio.undo.sent || pio.out > 0 || len(pio.groups) > 0 {
		return
	}
	if pio.torn == nil {
		// A failed group always noted where it tore.
		q.failPart(p, pio, fmt.Errorf("%w: no position to roll back to", ErrStorage))
		return
	}
	pio.undo.sent = true
	q.note(ioNote{kind: noteUndo, p: p, seg: pio.torn, pos: pio.tornPos, end: pio.tornOff, gen: pio.undo.gen, err: pio.undo.err})
	pio.torn = nil // the note holds the ref now; settle's checkWaits
	// then starts the generation's flushes, behind the note
}

// rollBack is the completer's half of an undo: it truncates the partition
// back to offset, whose write began at pos in seg, after writes from there
// on failed for lack of space (the owner sent the note once none of them
// was in the kernel, and refuses later appends of generation gen until
// this bumps it). The removed bytes were never readable (the HW and the
// readable end stay below a failed write), so the file is shrunk in
// place even while fetches send from it. cause is the write's error.
func (p *Partition) rollBack(seg *segment, pos, offset int64, gen uint64, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer seg.release()
	i := slices.Index(p.segs, seg)
	switch {
	case p.deleted || gen != p.gen || i < 0:
		return // nothing of that log is left to repair
	case p.failed != nil:
		// Offline meanwhile: no rollback, but the torn tail is still cut
		// at once.
		if err := seg.log.Truncate(pos); err != nil {
			p.e.log.Error("truncating the torn tail after a failed write", "path", seg.path(logSuffix), "to", pos, "err", err)
		}
		return
	}
	from := p.logEnd
	if err := p.truncateAt(i, pos, offset, false); err != nil {
		p.fail(fmt.Errorf("rolling back to offset %d after %v: %w", offset, cause, err))
		return
	}
	p.e.stats.diskFullRollbacks.Add(1)
	p.e.log.Warn("rolled back appends after a write failed for lack of space; the partition stays online",
		"topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "to", offset, "log_end_was", from, "path", seg.path(logSuffix), "pos", pos, "err", cause)
}

// finishDropped finishes the journal groups dropGroups dropped whose
// writes completed: they wait for nothing more (done).
func (q *uringQueue) finishDropped(pio *partIO) {
	for _, g := range pio.dropped {
		q.finished(g)
	}
	clear(pio.dropped)
	pio.dropped = pio.dropped[:0]
}

// dropGroups forgets the groups from index k on (every unsent group among
// them: they follow the sent ones) and returns their waiters. Groups still
// in the kernel keep their buffers pinned and their segment refs until
// their completions arrive.
func (pio *partIO) dropGroups(k int) []*waiter {
	var ws []*waiter
	for _, g := range pio.groups[k:] {
		ws = append(ws, g.waiters...)
		g.waiters = nil
		g.dropped = true
		if g.sent && g.jrnl {
			pio.dropped = append(pio.dropped, g)
		}
		if !g.sent {
			for ; g.refs > 0; g.refs-- {
				g.seg.release()
			}
			g.bufs = nil
		}
	}
	clear(pio.groups[k:])
	pio.groups, pio.unsent = pio.groups[:k], 0
	return ws
}
