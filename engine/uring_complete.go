package engine

import "fmt"

// deliver passes the round's notes to the completer without blocking.
func (q *uringQueue) deliver() {
	if len(q.notes) == 0 {
		return
	}
	q.nmu.Lock()
	if len(q.pendingNotes) == 0 {
		q.pendingNotes, q.notes = q.notes, q.pendingNotes[:0]
	} else {
		q.pendingNotes = append(q.pendingNotes, q.notes...)
		clear(q.notes)
		q.notes = q.notes[:0]
	}
	q.nmu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
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
		q.nmu.Unlock()
		for i := range batch {
			q.apply(&batch[i])
		}
		clear(batch)
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
		p.readable(n.end, n.seg, n.pos, n.gen)
		return
	case noteReject:
		for _, w := range n.waiters {
			w.finish(n.err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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
