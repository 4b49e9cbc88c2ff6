package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/ringlog/ringlog/internal/vfs"
)

// The pwrite path's journal rounds. Appends are pwritten in the caller as
// ever; under the journal their waiters wait for the flusher's next round,
// which writes every append queued since the previous one into the
// journal (one pwritev of headers and the appends' own buffers) and
// fdatasyncs the journal once. Completions (Partition.flushed, which
// takes the partition lock) go to a completer goroutine: the flusher
// never waits for a partition lock, because a truncation holding one
// waits for the flusher (drainJournal).

// syncRec is one append waiting for the journal.
type syncRec struct {
	p        *Partition
	seg      *segment // holds a ref until the round is done
	pos      int64
	data     []byte
	end      int64 // offset after the append
	segEnd   int64 // seg's size after it
	gen      uint64
	dataSize int64
}

// queueRecord files a written append for the next round. Partition lock
// held.
func (q *syncQueue) queueRecord(p *Partition, seg *segment, data []byte, pos, end int64) {
	seg.acquire()
	r := syncRec{p: p, seg: seg, pos: pos, data: data, end: end, segEnd: seg.size, gen: p.gen, dataSize: int64(len(data))}
	q.mu.Lock()
	q.jrecs = append(q.jrecs, r)
	q.jSubmitted++
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// drainJournal waits until every append queued so far went through a
// journal round.
func (q *syncQueue) drainJournal() error {
	if q.j == nil {
		return nil
	}
	q.mu.Lock()
	target := q.jSubmitted
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.jDone < target {
		q.jcond.Wait()
	}
	return q.j.err()
}

// journalRound writes recs (queued up to target) to the journal and hands
// their completions to the completer. Flusher only.
func (q *syncQueue) journalRound(recs []syncRec, target uint64) {
	j := q.j
	failed := map[*Partition]error{}
	// The fault seam (tests, --fault-injection): an injected fdatasync
	// fault of a partition's segment stands for its durability barrier,
	// which the journal write now is; consulted once per partition and
	// round, as the per-partition fdatasync was.
	if faults, ok := q.e.fs.(*vfs.ErrorFS); ok {
		seen := map[*Partition]bool{}
		for i := range recs {
			r := &recs[i]
			if seen[r.p] {
				continue
			}
			seen[r.p] = true
			path := r.seg.path(logSuffix)
			d, err := faults.Check(vfs.OpSync, path)
			time.Sleep(d)
			if err != nil {
				failed[r.p] = fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, path, err)
			}
		}
	}
	// Appends too large for a journal write are made durable in their
	// segment, in the same round so completions keep their order.
	synced := map[*segment]bool{}
	var batch []jrec
	var batchN int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch, batchN = nil, 0 }()
		for {
			if err := j.err(); err != nil {
				return err
			}
			w := j.plan(batch)
			if w != nil {
				t0 := time.Now()
				err := j.writeSync(w)
				q.e.stats.fsyncLatency.observe(time.Since(t0))
				if err != nil {
					j.fail(err)
					return err
				}
				j.settle(w)
				return nil
			}
			if err := j.waitSpace(); err != nil {
				return err
			}
		}
	}
	var jerr error
	for i := range recs {
		r := &recs[i]
		if failed[r.p] != nil {
			continue
		}
		rec := jrec{p: r.p, name: r.p.dirName(), seg: r.seg, pos: r.pos, bufs: [][]byte{r.data}, n: r.dataSize}
		if !j.fits(rec.size()) {
			if !synced[r.seg] {
				synced[r.seg] = true
				q.e.stats.fdatasyncs.Add(1)
				if err := r.seg.log.Datasync(); err != nil {
					failed[r.p] = fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, r.seg.path(logSuffix), err)
				}
			}
			continue
		}
		if batchN+rec.size() > j.maxWrite {
			if jerr = flush(); jerr != nil {
				break
			}
		}
		batch = append(batch, rec)
		batchN += rec.size()
	}
	if jerr == nil {
		jerr = flush()
	}
	q.mu.Lock()
	q.jDone = target
	q.jcond.Broadcast()
	q.mu.Unlock()
	// One completion per partition: its last append of the round.
	last := map[*Partition]int{}
	for i := range recs {
		last[recs[i].p] = i
	}
	notes := make([]syncNote, 0, len(last))
	for i := range recs {
		r := &recs[i]
		if last[r.p] == i {
			n := syncNote{p: r.p, end: r.end, seg: r.seg, pos: r.segEnd, gen: r.gen, err: failed[r.p]}
			if n.err == nil {
				n.err = jerr
			}
			notes = append(notes, n)
			continue
		}
		r.seg.release()
	}
	q.compl.add(notes...)
}

// syncNote is a completion for the completer: flush (an interval or close
// flush of the partition), or the journal round's outcome for appends up
// to end.
type syncNote struct {
	p     *Partition
	flush bool
	end   int64
	seg   *segment // holds a ref
	pos   int64
	gen   uint64
	err   error
}

// syncCompleter applies journal completions under partition locks, in
// the order the rounds produced them.
type syncCompleter struct {
	e     *Engine
	mu    sync.Mutex
	notes []syncNote
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

func newSyncCompleter(e *Engine) *syncCompleter {
	c := &syncCompleter{e: e, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *syncCompleter) add(ns ...syncNote) {
	c.mu.Lock()
	c.notes = append(c.notes, ns...)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *syncCompleter) run() {
	defer close(c.done)
	for {
		stopping := false
		select {
		case <-c.kick:
		case <-c.stop:
			stopping = true
		}
		c.mu.Lock()
		ns := c.notes
		c.notes = nil
		c.mu.Unlock()
		for _, n := range ns {
			switch {
			case n.flush:
				flushPartition(c.e, n.p)
				continue
			case n.err != nil:
				n.p.failLocked(n.err)
			default:
				n.p.flushed(n.end, n.seg, n.pos, n.gen)
			}
			n.seg.release()
		}
		if stopping {
			return
		}
	}
}

// close applies what is queued and stops.
func (c *syncCompleter) close() {
	close(c.stop)
	<-c.done
}
