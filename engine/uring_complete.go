package engine

import "fmt"

// deliver passes the round's notes to the completer without blocking.
// While the completer has nothing queued or in hand, the owner applies
// the leading notes itself when their partition locks are free: that
// saves a goroutine hand-off per note (two per round, the readable end
// and the durable end), and TryLock keeps the owner from ever waiting
// for a partition lock. The first note it cannot take, and every note
// after it, goes to the completer, in order.
func (q *uringQueue) deliver() {
	if len(q.notes) == 0 {
		return
	}
	q.nmu.Lock()
	k := 0
	if len(q.pendingNotes) == 0 && !q.applying {
		for k < len(q.notes) && q.tryApply(&q.notes[k]) {
			k++
		}
	}
	rest := k < len(q.notes)
	if rest {
		q.pendingNotes = append(q.pendingNotes, q.notes[k:]...)
	}
	q.nmu.Unlock()
	clear(q.notes)
	q.notes = q.notes[:0]
	if rest {
		select {
		case q.notify <- struct{}{}:
		default:
		}
	}
}

// complete is the completer goroutine: it applies notes under the
// partition locks, which the owner must never wait for.
func (q *uringQueue) complete() {
	defer close(q.complDn)
	var batch []ioNote
	for {
		stopping := false
		select {
		case <-q.notify:
		case <-q.stopC:
			stopping = true
		}
		q.nmu.Lock()
		batch, q.pendingNotes = q.pendingNotes, batch[:0]
		q.applying = len(batch) > 0
		q.nmu.Unlock()
		for i := range batch {
			q.apply(&batch[i])
		}
		clear(batch)
		q.nmu.Lock()
		q.applying = false
		q.nmu.Unlock()
		if stopping {
			return
		}
	}
}

// apply updates a partition for one note.
func (q *uringQueue) apply(n *ioNote) {
	p := n.p
	switch n.kind {
	case noteFlushed:
		p.flushed(n.end, n.seg, n.pos, n.gen)
		return
	case noteUndo:
		p.rollBack(n.seg, n.pos, n.end, n.gen, n.err)
		return
	case noteReadable:
		p.mu.Lock()
		p.readableLocked(n.end, n.seg, n.pos, n.gen)
		p.mu.Unlock()
		return
	case noteReject:
		for _, w := range n.waiters {
			w.finish(n.err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q.applyLocked(n)
}

// tryApply applies a readable or advance note if its partition lock is
// free at once, reporting whether it did. Owner only, under nmu.
func (q *uringQueue) tryApply(n *ioNote) bool {
	if n.kind != noteReadable && n.kind != noteAdvance {
		return false
	}
	p := n.p
	if !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	if n.kind == noteReadable {
		p.readableLocked(n.end, n.seg, n.pos, n.gen)
		return true
	}
	q.applyLocked(n)
	return true
}

// applyLocked applies an advance or fail note; the partition lock is
// held.
func (q *uringQueue) applyLocked(n *ioNote) {
	p := n.p
	var err error
	switch {
	case n.kind == noteFail:
		err = p.fail(n.err)
	case p.deleted:
		err = fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx)
	case p.failed != nil:
		err = p.failed
	case n.gen != p.gen:
		// Written before a truncation (TruncateTo): those bytes are gone.
		err = fmt.Errorf("%w: %s-%d was truncated below offset %d", ErrStorage, p.topic.name, p.idx, n.end)
	default:
		moved := n.durable && n.end > p.durable
		if moved {
			p.durable = n.end
		}
		p.setHW(n.end, n.seg, n.pos)
		if moved && p.replicated {
			// The leader's DurableEnd moved (replication's HW input):
			// with the bytes readable since noteReadable, setHW moved
			// nothing that would say so.
			p.notifyChange(changeDurable)
		}
	}
	for _, w := range n.waiters {
		w.finish(err)
	}
}
