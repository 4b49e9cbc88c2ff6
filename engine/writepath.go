package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ringlog/ringlog/iouring"
)

// writeQueue is the seam between partitions and the I/O that makes their
// bytes durable, with two implementations: syncQueue (pwrite in the caller,
// fdatasync on a flusher goroutine) and uringQueue (uring.go: one ring
// owner batching every partition's writes, with linked fdatasyncs).
// Partitions call write, submit and barrier under their lock, so one
// partition's appends arrive in offset order.
type writeQueue interface {
	// name is the IOPath: "sync" or "uring".
	name() string
	// write lands an append's bytes at pos in seg before the append is
	// stamped, so a failed write leaves nothing in memory to undo (the
	// pwrite path). The ring writes stamped appends instead (submit) and
	// returns nil here.
	write(seg *segment, data []byte, pos int64) error
	// submit hands over a stamped append (offsets end before end, bytes at
	// pos in seg): the queue completes w, and moves the HW, once the
	// append is as durable as Config.Fsync asks. data belongs to the
	// queue until then. An error means nothing was queued.
	submit(p *Partition, seg *segment, data []byte, pos, end int64, w *waiter) error
	// barrier returns once every write of p submitted so far completed:
	// rolls fdatasync the sealed segment and truncations cut the file, and
	// neither covers writes still in flight. An error wrapping
	// errRollingBack (rollingBack) leaves p online.
	barrier(p *Partition) error
	// requestFlush asks for p's dirty segments to be fdatasynced, after
	// which the queue calls Partition.flushed (or failLocked).
	requestFlush(p *Partition)
	// ringStats reports the io_uring ring's counters; false on the
	// pwrite path.
	ringStats() (iouring.Stats, bool)
	// drainJournal returns once every append submitted so far that goes
	// through the journal is in a completed journal write (or failed):
	// a checkpoint after it covers them. It takes no partition lock.
	drainJournal() error
	// close flushes what was requested, completes every waiter and stops
	// the queue.
	close()
}

// syncQueue writes with pwrite in the caller and flushes with fdatasync on
// one flusher goroutine. Flushes are shared: each round takes every
// partition that asked since the last round, so many waiting appends cost
// one fdatasync per dirty segment (group commit), and appends keep landing
// while a round is in flight.
//
// With the journal (FsyncAlways and Config.Journal) a round is one journal
// write of every append since the previous round plus one fdatasync of
// the journal instead (syncjournal.go).
type syncQueue struct {
	e       *Engine
	mu      sync.Mutex
	pending map[*Partition]struct{}
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// Journal mode: guarded by mu.
	j          *journal
	jrecs      []syncRec
	jSubmitted uint64 // appends queued for the journal so far
	jDone      uint64 // of those, written (or failed)
	jcond      *sync.Cond
	compl      *syncCompleter
}

func newSyncQueue(e *Engine) *syncQueue {
	q := &syncQueue{
		e:       e,
		pending: map[*Partition]struct{}{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		j:       e.j,
	}
	q.jcond = sync.NewCond(&q.mu)
	if q.j != nil {
		q.compl = newSyncCompleter(e)
	}
	go q.run()
	return q
}

func (q *syncQueue) name() string { return "sync" }

// submit completes an append written by write: at once under FsyncNever
// and FsyncInterval, after the next flush round under FsyncAlways.
func (q *syncQueue) submit(p *Partition, seg *segment, data []byte, pos, end int64, w *waiter) error {
	if p.replicated && end > p.rend {
		// pwrite done: followers may read it before the flush, as in
		// Kafka (leader and follower fsyncs overlap).
		p.rend, p.rendSeg, p.rendPos = end, seg, seg.size
		if q.e.cfg.Fsync == FsyncAlways {
			p.notifyChange(changeReadable) // flushed says when it is durable
		} else {
			p.notify() // the written end is the durable end (DurableEnd)
		}
	}
	if q.j != nil {
		p.waiters = append(p.waiters, w)
		q.queueRecord(p, seg, data, pos, end)
		return nil
	}
	if q.e.cfg.Fsync == FsyncAlways {
		p.waiters = append(p.waiters, w)
		q.requestFlush(p)
		return nil
	}
	p.setHW(end, seg, seg.size)
	w.finish(nil)
	return nil
}

// barrier has nothing to wait for: every pwrite completed in its caller.
func (q *syncQueue) barrier(*Partition) error { return nil }

func (q *syncQueue) ringStats() (iouring.Stats, bool) { return iouring.Stats{}, false }

func (q *syncQueue) write(seg *segment, data []byte, pos int64) error {
	n, err := seg.log.WriteAt(data, pos)
	if err == nil && n != len(data) {
		err = fmt.Errorf("short write %d of %d", n, len(data))
	}
	if err == nil {
		return nil
	}
	if isNoSpace(err) {
		q.e.disk.noSpace()
	}
	err = fmt.Errorf("%w: write %s at %d: %w", ErrStorage, seg.path(logSuffix), pos, err)
	// Part of the batch may have landed: cut the segment back to the end
	// of the last whole batch now rather than leave a torn tail for the
	// next Open (and, on a full disk, the space it holds).
	if terr := seg.log.Truncate(pos); terr != nil {
		return fmt.Errorf("%w; truncating the torn tail back to %d failed too: %v", err, pos, terr)
	}
	return fmt.Errorf("%w (%w)", err, errWriteUndone)
}

// errWriteUndone marks a failed segment write whose bytes were truncated
// away again: the file ends where the partition thinks it does.
var errWriteUndone = errors.New("segment truncated back to its last whole batch")

func (q *syncQueue) requestFlush(p *Partition) {
	if q.compl != nil {
		// Not on the flusher: it must never wait for a partition lock
		// (truncations wait for it holding one, drainJournal).
		q.compl.add(syncNote{p: p, flush: true})
		return
	}
	q.mu.Lock()
	q.pending[p] = struct{}{}
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *syncQueue) run() {
	defer close(q.done)
	var pacer commitPacer
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	for {
		select {
		case <-q.kick:
			if d := pacer.wait(q.e.cfg.JournalCommitInterval, q.pendingBytes, time.Now()); d > 0 {
				pace.Reset(d)
				select {
				case <-pace.C:
				case <-q.stop:
					q.round()
					return
				}
			}
			pacer.started(time.Now())
			n := q.round()
			q.mu.Lock()
			pacer.written(n, len(q.jrecs) > 0)
			q.mu.Unlock()
		case <-q.stop:
			q.round()
			return
		}
	}
}

// pendingBytes is the appends' bytes waiting for the next journal round.
func (q *syncQueue) pendingBytes() (n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.jrecs {
		n += q.jrecs[i].dataSize
	}
	return n
}

// round flushes every partition that asked since the previous round and
// reports how many records its journal write carried.
func (q *syncQueue) round() int {
	q.mu.Lock()
	batch := q.pending
	q.pending = make(map[*Partition]struct{}, len(batch))
	recs, target := q.jrecs, q.jSubmitted
	q.jrecs = nil
	q.mu.Unlock()
	if len(recs) > 0 {
		q.e.stats.flushRounds.Add(1)
		q.journalRound(recs, target)
	}
	if len(batch) == 0 {
		return len(recs)
	}
	q.e.stats.flushRounds.Add(1)
	for p := range batch {
		flushPartition(q.e, p)
	}
	return len(recs)
}

// flushPartition fdatasyncs p's dirty segments and reports the result.
func flushPartition(e *Engine, p *Partition) {
	segs, end, last, lastPos, gen := p.takeDirty()
	var err error
	for _, s := range segs {
		if err == nil {
			t0 := time.Now()
			if err = s.log.Datasync(); err != nil {
				err = fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, s.path(logSuffix), err)
			}
			e.stats.fsyncLatency.observe(time.Since(t0))
			e.stats.fdatasyncs.Add(1)
		}
		s.release()
	}
	if err != nil {
		p.failLocked(err)
		return
	}
	p.flushed(end, last, lastPos, gen)
}

func (q *syncQueue) close() {
	close(q.stop)
	<-q.done
	if q.compl != nil {
		q.compl.close()
	}
}
