package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// writeQueue is the seam between partitions and the I/O that makes their
// bytes durable. Partitions call write under their lock, so submissions
// arrive in offset order per partition; requestFlush asks for the
// partition's dirty segments to be flushed, after which the queue calls
// Partition.flushed (or failLocked). The io_uring ring owner will implement
// this by batching writes from all partitions into one submission with
// linked fdatasyncs.
type writeQueue interface {
	name() string
	write(seg *segment, data []byte, pos int64) error
	requestFlush(p *Partition)
	// close flushes what was requested and stops the queue.
	close()
}

// syncQueue writes with pwrite in the caller and flushes with fdatasync on
// one flusher goroutine. Flushes are shared: each round takes every
// partition that asked since the last round, so many waiting appends cost
// one fdatasync per dirty segment (group commit), and appends keep landing
// while a round is in flight.
type syncQueue struct {
	e       *Engine
	mu      sync.Mutex
	pending map[*Partition]struct{}
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newSyncQueue(e *Engine) *syncQueue {
	q := &syncQueue{
		e:       e,
		pending: map[*Partition]struct{}{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go q.run()
	return q
}

func (q *syncQueue) name() string { return "sync" }

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
	for {
		select {
		case <-q.kick:
			q.round()
		case <-q.stop:
			q.round()
			return
		}
	}
}

// round flushes every partition that asked since the previous round.
func (q *syncQueue) round() {
	q.mu.Lock()
	batch := q.pending
	q.pending = make(map[*Partition]struct{}, len(batch))
	q.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	q.e.stats.flushRounds.Add(1)
	for p := range batch {
		flushPartition(q.e, p)
	}
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
}
