package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/records"
)

// Partition is one log. Append, Read and the other methods are safe for
// concurrent use; appends are serialized by the partition lock.
type Partition struct {
	e     *Engine
	topic *topicState
	idx   int32
	dir   string

	mu       sync.RWMutex
	segs     []*segment // ascending base; the last is active
	logStart int64
	logEnd   int64
	// durable is the end offset known flushed; recoveryPoint persists it.
	durable int64
	// hw and its byte limit: reads stop at hwPos in hwSeg.
	hw    int64
	hwSeg *segment
	hwPos int64
	// changed is closed at the next change; nil until someone asks
	// (changedLocked). chMu guards it, since readers make it under the
	// read lock.
	chMu    sync.Mutex
	changed chan struct{}
	// watch holds the Wakers of long-poll readers (watch.go).
	watch watchers
	// dirty are segments written since their last flush, each with a ref.
	dirty   []*segment
	waiters []*waiter // FsyncAlways appends awaiting a flush, by offset
	failed  error     // sticky: set after a write or fsync failure
	deleted bool
	// leaderEpoch is stamped into appended batches (replication sets it).
	leaderEpoch int32
	// rend is the readable end: bytes below it are written (and, under
	// FsyncAlways on the uring path, flushed); rendSeg/rendPos locate it.
	// Without replication the HW follows it; with replication (replicated
	// set) the HW is set from outside (SetHighWatermark) and followers
	// read up to rend. See replica.go.
	rend       int64
	rendSeg    *segment
	rendPos    int64
	replicated bool
	// hwCkpt is the high watermark read from replication-offset-checkpoint
	// at open (hwCkptSet), applied on the first switch to replicated and
	// kept in the checkpoint until then. See replica.go.
	hwCkpt    int64
	hwCkptSet bool
	// gen counts truncations; writes and flushes started before one are
	// ignored when they complete.
	gen    uint64
	epochs *epochcache.Cache
	// ps is the idempotent/transactional producer state (producers.go).
	ps *producerstate.State
	// remote is the remote tier as the broker last reported it
	// (SetRemoteState; remoteKnown false until then, also after every
	// restart). remoteFloor is a log start DeleteRecords set inside the
	// remote range (in memory only, see AdvanceLogStart). remote.go.
	remote      RemoteState
	remoteKnown bool
	remoteFloor int64
	// heldBack is the bytes local retention would delete but may not,
	// for lack of upload (remote.go).
	heldBack atomic.Int64
}

// Topic returns the partition's topic name.
func (p *Partition) Topic() string { return p.topic.name }

// Index returns the partition number.
func (p *Partition) Index() int32 { return p.idx }

func (p *Partition) active() *segment { return p.segs[len(p.segs)-1] }

// Info returns a snapshot of the partition's offsets.
func (p *Partition) Info() PartitionInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return PartitionInfo{LogStartOffset: p.startLocked(), HighWatermark: p.hw, LogEndOffset: p.logEnd}
}

// Changed returns a channel closed at the next high watermark advance.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.changedLocked()
}

// changedLocked returns the channel the next change closes, made on first
// ask: most appends have no one waiting on it, and a channel made at every
// change was one of the write path's most frequent allocations. The
// partition lock must be held (read or write).
func (p *Partition) changedLocked() chan struct{} {
	p.chMu.Lock()
	defer p.chMu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

// setHW is the write path's report that everything below hw is written
// (and durable under FsyncAlways): it advances the readable end and,
// unless replication owns the HW, the high watermark. Lock must be held
// (write).
func (p *Partition) setHW(hw int64, seg *segment, pos int64) {
	if hw > p.rend || p.rendSeg == nil {
		p.rend, p.rendSeg, p.rendPos = hw, seg, pos
		if p.replicated {
			p.notify()
		}
	}
	if p.replicated {
		return
	}
	if hw <= p.hw && p.hwSeg != nil {
		return
	}
	p.hw, p.hwSeg, p.hwPos = hw, seg, pos
	p.notify()
}

// readableLocked moves a replicated partition's readable end (what
// followers fetch) to end, whose last byte is at pos in seg, once the bytes
// are in the file but before they are durable (noteReadable). Writes of an
// older generation (rolled back or truncated since) move nothing. The lock
// must be held (write).
func (p *Partition) readableLocked(end int64, seg *segment, pos int64, gen uint64) {
	if !p.replicated || p.failed != nil || p.deleted || gen != p.gen || end <= p.rend {
		return
	}
	p.rend, p.rendSeg, p.rendPos = end, seg, pos
	p.notifyChange(changeReadable)
}

// notify wakes everything waiting on Changed and every watching Waker.
// Lock must be held (write).
func (p *Partition) notify() { p.notifyChange(changeData) }

// notifyChange is notify for a change of kind k, which Wakers that do not
// want it sleep through (SetWakeOn).
func (p *Partition) notifyChange(k change) {
	p.chMu.Lock()
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
	p.chMu.Unlock()
	p.watch.wakeWatchers(p, k)
}

type waiter struct {
	done chan struct{}
	res  AppendResult
	err  error
}

func (w *waiter) Done() <-chan struct{}         { return w.done }
func (w *waiter) Result() (AppendResult, error) { <-w.done; return w.res, w.err }

func (w *waiter) finish(err error) {
	w.err = err
	close(w.done)
}

// Append validates records (one or more back-to-back batches), assigns
// offsets and writes them. It takes ownership of records: they are
// rewritten in place. Nothing is written if any batch is invalid. While
// the data directory's free space is below the threshold it refuses with
// ErrDiskFull (diskspace.go).
func (p *Partition) Append(b []byte) (AppendWaiter, error) {
	return p.AppendParsed(records.ParseSet(b))
}

// AppendParsed is Append for batches the caller already framed (the
// produce handler parses a partition's records once and hands the view
// down): set.Raw is taken over as Append takes its bytes.
func (p *Partition) AppendParsed(set records.Set) (AppendWaiter, error) {
	if err := p.e.disk.admit(int64(len(set.Raw))); err != nil {
		return nil, err
	}
	if appendAdmitted != nil {
		appendAdmitted(p)
	}
	return p.append(set, true)
}

// appendAdmitted, when set (tests only), runs between a client append's
// free-space admission and its stamping under the partition lock.
var appendAdmitted func(*Partition)

// AppendInternal is Append for the broker's own records (group offsets,
// transaction state): they are small and keep groups and transactions
// working on a full disk, so they draw from the space the threshold
// reserves instead of being refused.
func (p *Partition) AppendInternal(b []byte) (AppendWaiter, error) {
	return p.append(records.ParseSet(b), false)
}

// append stamps and queues set; client says the free-space threshold
// applies (AppendParsed admitted it).
func (p *Partition) append(set records.Set, client bool) (AppendWaiter, error) {
	cfg := p.topic.config()
	hs, err := validateSet(set, cfg.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	if err := checkClientBatches(set.Batches, cfg); err != nil {
		return nil, err
	}
	phs, err := parseProducerHeaders(set.Batches)
	if err != nil {
		return nil, err
	}
	idempotent := false
	for _, ph := range phs {
		if ph.Control {
			// Markers come only through AppendMarker (WriteTxnMarkers).
			return nil, fmt.Errorf("%w: control batch from a client", ErrInvalidRecord)
		}
		idempotent = idempotent || ph.Idempotent()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.appendableLocked(); err != nil {
		return nil, err
	}
	if client {
		// admit ran before the lock. A write that failed with ENOSPC
		// since then degraded the monitor before its rollback took this
		// lock; stamped after the rollback, the append would take the
		// rolled-back offsets and be acknowledged while the appends sent
		// before it failed, reordering a pipelined producer.
		if err := p.e.disk.refusing(); err != nil {
			return nil, err
		}
	}
	if p.leaderEpoch >= 0 && p.epochs != nil && p.epochs.LatestEpoch() < p.leaderEpoch {
		// Stamped with an epoch the cache has not seen (SetLeaderEpoch
		// without AssignLeaderEpoch): record where it starts.
		if err := p.epochs.Assign(p.leaderEpoch, p.logEnd); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	var decisions []producerstate.Decision
	if idempotent {
		// Plain batches need no sequence check (and no allocation for it).
		if decisions, err = p.ps.CheckBatches(phs); err != nil {
			return nil, err
		}
	}
	for i, d := range decisions {
		if d.Duplicate == nil {
			continue
		}
		if len(hs) != 1 {
			// Produce v3+ carries one batch per partition; a retry
			// mixed with new batches is not something clients send.
			return nil, fmt.Errorf("%w: batch %d of %d is a duplicate", ErrInvalidRecord, i, len(hs))
		}
		return p.duplicateWaiter(d.Duplicate), nil
	}
	w, err := p.appendLocked(set.Raw, hs, true)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	for i := range phs {
		p.ps.Update(phs[i], hs[i].baseOffset, hs[i].lastOffset(), now)
	}
	return w, nil
}

// appendableLocked says why nothing may be appended now (engine closed,
// partition deleted or failed), or nil. Lock must be held.
func (p *Partition) appendableLocked() error {
	switch {
	case p.e.closed.Load():
		return ErrClosed
	case p.deleted:
		return fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx)
	case p.failed != nil:
		return p.failed
	}
	return nil
}

// appendLocked writes validated batches at the log end. With assign the
// batches get offsets and the leader epoch; without (replica appends) they
// are kept as they are and must start at the log end. Lock must be held.
func (p *Partition) appendLocked(records []byte, hs []batchHeader, assign bool) (*waiter, error) {
	cfg := p.topic.config()
	var err error
	now := time.Now().UnixMilli()
	last := p.logEnd
	for _, h := range hs {
		last += int64(h.lastOffsetDelta) + 1
	}
	seg := p.active()
	if seg.size > 0 && (seg.size+int64(len(records)) > cfg.SegmentBytes ||
		now-seg.createdMs >= cfg.SegmentMs || last-seg.base > math.MaxUint32) {
		if seg, err = p.roll(now); err != nil {
			if rollingBack(err) {
				return nil, err // an earlier write failed for lack of space
			}
			return nil, p.fail(err)
		}
	}
	if seg.size+int64(len(records)) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d bytes do not fit a segment", ErrMessageTooLarge, len(records))
	}
	logAppendTime := int64(-1)
	if cfg.TimestampTypeLogAppend {
		logAppendTime = now
	}
	next, pos := p.logEnd, 0
	for i := range hs {
		h := &hs[i]
		if !assign {
			// Replica append: the leader's offsets stay; they must
			// follow on from our end (gaps are batches the leader's
			// cleaner removed).
			if h.baseOffset < next {
				return nil, fmt.Errorf("%w: replicated batch at offset %d, log end %d", ErrInvalidRecord, h.baseOffset, next)
			}
			next = h.lastOffset() + 1
			continue
		}
		rewriteBatch(records[pos:pos+int(h.size)], next, p.leaderEpoch, logAppendTime)
		h.baseOffset = next
		if logAppendTime >= 0 {
			h.maxTimestamp = logAppendTime
		}
		next = h.lastOffset() + 1
		pos += int(h.size)
	}
	if !assign {
		logAppendTime = -1
	}
	start := seg.size
	writePos := start
	// The pwrite path writes here, before anything is stamped; the ring
	// writes after submit.
	if err := p.e.wq.write(seg, records, start); err != nil {
		if isNoSpace(err) && errors.Is(err, errWriteUndone) {
			// Out of space, and the file is back where it was:
			// nothing in memory moved yet, so the partition stays
			// usable once space is freed.
			p.e.stats.diskFullRollbacks.Add(1)
			p.e.log.Warn("undid a write that failed for lack of space; the partition stays online",
				"topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "log_end", p.logEnd, "path", seg.path(logSuffix), "pos", start, "err", err)
			return nil, err
		}
		return nil, p.fail(err)
	}
	p.e.disk.note(int64(len(records)))
	for _, h := range hs {
		seg.noteBatch(h, start, cfg.IndexIntervalBytes)
		start += int64(h.size)
	}
	res := AppendResult{BaseOffset: p.logEnd, LastOffset: next - 1, LogAppendTime: logAppendTime, LogStartOffset: p.startLocked()}
	p.logEnd = next
	p.e.stats.appends.Add(1)
	p.e.stats.appendedBytes.Add(int64(len(records)))
	w := &waiter{done: make(chan struct{}), res: res}
	p.markDirty(seg)
	// The queue completes w (and moves the HW) once the append is as
	// durable as the fsync policy asks.
	if err := p.e.wq.submit(p, seg, records, writePos, next, w); err != nil {
		return nil, p.fail(err)
	}
	return w, nil
}

// markDirty notes that seg has unflushed bytes. Lock must be held.
func (p *Partition) markDirty(seg *segment) {
	if n := len(p.dirty); n > 0 && p.dirty[n-1] == seg {
		return
	}
	seg.acquire()
	p.dirty = append(p.dirty, seg)
}

// takeDirty hands the dirty segments and the end offset they cover to a
// flusher, which owns the segment refs from then on.
func (p *Partition) takeDirty() (segs []*segment, end int64, last *segment, lastPos int64, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	segs, p.dirty = p.dirty, nil
	a := p.active()
	return segs, p.logEnd, a, a.size, p.gen
}

// flushed records that everything below end (ending at pos in seg) is
// durable, completing waiters and, under FsyncAlways, advancing the HW.
func (p *Partition) flushed(end int64, seg *segment, pos int64, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil || gen != p.gen || end <= p.durable && p.hwSeg != nil {
		return
	}
	p.durable = max(p.durable, end)
	if p.e.cfg.Fsync == FsyncAlways {
		p.setHW(end, seg, pos)
		if p.replicated {
			p.notifyChange(changeDurable) // the leader's DurableEnd moved (replication's HW input)
		}
	}
	n := 0
	for _, w := range p.waiters {
		if w.res.LastOffset >= end {
			break
		}
		w.finish(nil)
		n++
	}
	p.waiters = p.waiters[n:]
}

// fail makes the partition refuse further appends and fails its waiters:
// after a failed write or fsync the page cache no longer tells what is on
// disk, so only recovery at the next Open can continue. Lock must be held.
func (p *Partition) fail(cause error) error {
	if p.failed == nil {
		p.failed = fmt.Errorf("%w: partition %s-%d: %v", ErrStorage, p.topic.name, p.idx, cause)
		p.e.log.Error("partition offline after a storage error; appends and reads refused until restart", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "err", cause)
		p.e.noteOffline()
	}
	for _, w := range p.waiters {
		w.finish(p.failed)
	}
	p.waiters = nil
	return p.failed
}

// failLocked takes the lock and fails the partition.
func (p *Partition) failLocked(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail(cause)
}

// roll seals the active segment and starts a new one. The sealed segment
// is flushed first so that every non-last segment is fully durable: that
// is what lets recovery call damage in one corruption, not a torn tail.
// Lock must be held.
func (p *Partition) roll(now int64) (*segment, error) {
	old := p.active()
	// fdatasync only covers writes that completed.
	if err := p.e.wq.barrier(p); err != nil {
		return nil, err
	}
	if err := old.log.Datasync(); err != nil {
		return nil, err
	}
	p.e.stats.fdatasyncs.Add(1)
	if err := old.writeIndexes(); err != nil {
		return nil, err
	}
	seg, err := p.e.createSegment(p.dir, p.logEnd, now)
	if err != nil {
		return nil, err
	}
	p.segs = append(p.segs, seg)
	// Everything below the new segment is flushed: a good point for a
	// producer-state snapshot, so recovery replays one segment at most.
	p.writeProducerSnapshot()
	// The old segment is durable now: drop it from the dirty list and let
	// waiters and the HW move up to its end.
	for i, d := range p.dirty {
		if d == old {
			p.dirty = append(p.dirty[:i], p.dirty[i+1:]...)
			old.release()
			break
		}
	}
	moved := old.next > p.durable
	p.durable = max(p.durable, old.next)
	if p.e.cfg.Fsync == FsyncAlways {
		p.setHW(old.next, old, old.size)
		if moved && p.replicated {
			p.notifyChange(changeDurable) // the leader's DurableEnd moved, as in flushed
		}
		n := 0
		for _, w := range p.waiters {
			if w.res.LastOffset >= old.next {
				break
			}
			w.finish(nil)
			n++
		}
		p.waiters = p.waiters[n:]
	}
	p.e.kickCheckpoint()
	return seg, nil
}

// Read returns whole batches from one segment starting with the batch that
// holds offset, at most maxBytes unless minOneBatch and the first batch is
// larger. The caller must Release the result's Data.
func (p *Partition) Read(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	res, err := p.readLocked(offset, maxBytes, minOneBatch, p.hw, p.hwSeg, p.hwPos)
	// read_uncommitted reads to the HW but reports the LSO (Kafka does);
	// computed under the read lock already held.
	res.LastStableOffset = p.ps.LastStableOffset(p.hw)
	return res, err
}

// readLocked reads below end (at endPos in endSeg). Lock must be held.
func (p *Partition) readLocked(offset int64, maxBytes int32, minOneBatch bool, end int64, endSeg *segment, endPos int64) (ReadResult, error) {
	start := p.startLocked()
	res := ReadResult{Data: emptyRange, HighWatermark: p.hw, LastStableOffset: p.hw, LogStartOffset: start}
	if p.deleted {
		return res, fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx)
	}
	if p.failed != nil {
		// Offline: what is on disk is unknown until recovery (Kafka
		// answers KAFKA_STORAGE_ERROR for an offline replica too).
		return res, p.failed
	}
	// read_committed reads end at the LSO; offsets up to the HW are
	// still valid there, just not readable yet.
	inRange := max(end, p.hw)
	if p.replicated {
		// Between the HW and the log end: nothing yet, not out of range.
		inRange = max(end, p.logEnd)
	}
	if offset < start || offset > inRange {
		return res, fmt.Errorf("%w: %d not in [%d, %d] of %s-%d", ErrOffsetOutOfRange, offset, start, inRange, p.topic.name, p.idx)
	}
	if offset < p.logStart {
		// Held by the remote tier only: the caller reads it there.
		return res, &OffsetRemoteError{Topic: p.topic.name, Partition: p.idx, Offset: offset, LogStart: start, LocalLogStart: p.logStart}
	}
	if offset >= end {
		return res, nil
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > offset }) - 1
	seg := p.segs[i]
	limit := seg.size
	if seg == endSeg {
		limit = endPos
	}
	pos := seg.lookup(offset)
	if tp, ok := seg.tailStart(offset); ok && tp > pos {
		pos = tp
	}
	var first batchHeader
	// An emptied producer batch (compaction) is skipped when records
	// follow: a response holding nothing but an empty batch makes some
	// clients (librdkafka) stop with "message too large" instead of moving
	// past it. With nothing after it, it is returned so clients advance.
	var emptySeg *segment
	var emptyI int
	var emptyPos int64
	for {
		if pos >= limit {
			if seg == endSeg || i+1 >= len(p.segs) {
				if emptySeg == nil {
					return res, nil
				}
				seg, i, pos = emptySeg, emptyI, emptyPos
				limit = seg.size
				if seg == endSeg {
					limit = endPos
				}
				var err error
				if first, err = seg.readHeader(pos); err != nil {
					return res, err
				}
				break
			}
			// Compaction removed the batches from offset to the end of
			// this segment: the next batch is in a later one.
			i++
			seg, pos, limit = p.segs[i], 0, p.segs[i].size
			if seg == endSeg {
				limit = endPos
			}
			continue
		}
		h, err := seg.readHeader(pos)
		if err != nil {
			return res, err
		}
		if h.lastOffset() >= offset {
			if !h.empty {
				first = h
				break
			}
			if emptySeg == nil {
				emptySeg, emptyI, emptyPos = seg, i, pos
			}
		}
		pos += int64(h.size)
	}
	stop := limit
	if stop-pos > int64(maxBytes) {
		// Find the last batch ending within maxBytes: jump with the index,
		// then walk the few headers up to the boundary.
		want := pos + int64(max(maxBytes, 0))
		stop = pos
		at := max(seg.lookupPos(want), pos)
		// at is a batch start at or below want: everything before it fits
		// even when the batch at it does not.
		stop = at
		for at < limit {
			h, err := seg.readHeader(at)
			if err != nil {
				return res, err
			}
			if at+int64(h.size) > want {
				break
			}
			at += int64(h.size)
			stop = at
		}
		if stop == pos && minOneBatch {
			stop = pos + int64(first.size)
		}
	}
	if stop == pos {
		return res, nil
	}
	seg.acquire()
	res.Data = &fileRange{seg: seg, pos: pos, n: int32(stop - pos)}
	return res, nil
}

// OffsetForTimestamp answers ListOffsets: TimestampEarliest, TimestampLatest,
// TimestampMax, or the offset and timestamp of the first record stamped ts
// or later (offset -1 when there is none): the time index and batch
// headers find the batch, its records the exact one. The returned
// timestamp is -1 for Earliest/Latest.
func (p *Partition) OffsetForTimestamp(ts int64) (int64, int64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.deleted {
		return -1, -1, fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx)
	}
	if p.failed != nil {
		return -1, -1, p.failed
	}
	switch ts {
	case TimestampEarliest:
		return p.startLocked(), -1, nil
	case TimestampEarliestLocal:
		return p.logStart, -1, nil
	case TimestampLatest:
		return p.hw, -1, nil
	case TimestampMax:
		best, at := int64(-1), int64(-1)
		for _, s := range p.segs {
			if s.maxTs > best && s.maxTsAt < p.hw {
				best, at = s.maxTs, s.maxTsAt
			}
		}
		return at, best, nil
	}
	if ts < 0 {
		return -1, -1, fmt.Errorf("%w: timestamp %d", ErrInvalidRecord, ts)
	}
	for _, s := range p.segs {
		if s.maxTs < ts || s.base >= p.hw {
			continue
		}
		limit := s.size
		if s == p.hwSeg {
			limit = p.hwPos
		}
		// Start from the last time index entry below ts.
		j := sort.Search(len(s.tindex), func(j int) bool { return s.tindex[j].ts >= ts })
		pos := int64(0)
		if j > 0 {
			pos = s.lookup(s.base + int64(s.tindex[j-1].rel))
		}
		for pos < limit {
			h, err := s.readHeader(pos)
			if err != nil {
				return -1, -1, err
			}
			if h.maxTimestamp >= ts && !h.empty {
				return s.firstRecordAtOrAfter(pos, h, ts)
			}
			pos += int64(h.size)
		}
	}
	return -1, -1, nil
}

// firstRecordAtOrAfter answers ListOffsets by timestamp inside the batch at
// pos (whose max timestamp is >= ts), as Kafka does: the offset and
// timestamp of its first record stamped ts or later. With LogAppendTime
// every record carries the batch's time; control batches hold no data
// and answer for their base offset.
func (s *segment) firstRecordAtOrAfter(pos int64, h batchHeader, ts int64) (int64, int64, error) {
	b := make([]byte, h.size)
	if _, err := s.log.ReadAt(b, pos); err != nil {
		return -1, -1, fmt.Errorf("%w: read %s at %d: %v", ErrStorage, s.path(logSuffix), pos, err)
	}
	off, at, err := FirstRecordAtOrAfter(b, ts)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: %s at byte %d: %v", ErrCorruptLog, s.path(logSuffix), pos, err)
	}
	return off, at, nil
}

// FirstRecordAtOrAfter returns the offset and timestamp of the first
// record of batch b (one whole batch, whose max timestamp is >= ts)
// stamped ts or later; the batch's base offset and max timestamp when
// none is (control batches). The remote tier uses it on batches read
// from the object store.
func FirstRecordAtOrAfter(b []byte, ts int64) (int64, int64, error) {
	bh, err := records.ParseHeader(b)
	if err != nil {
		return -1, -1, err
	}
	if bh.Size() != int64(len(b)) {
		return -1, -1, fmt.Errorf("batch of %d bytes in %d", bh.Size(), len(b))
	}
	h := headerOf(bh)
	base := bh.BaseTimestamp
	found := false
	off, at := h.baseOffset, h.maxTimestamp
	_, err = eachRecord(b, nil, func(o int64, r record) error {
		if found {
			return nil
		}
		rts := base + r.timestampDelta
		if bh.IsLogAppendTime() {
			rts = h.maxTimestamp
		}
		if rts >= ts {
			off, at, found = o, rts, true
		}
		return nil
	})
	if err != nil {
		return -1, -1, err
	}
	return off, at, nil
}

// deleteSegments removes the first n segments (never the active one),
// advancing the log start. Open FileRanges keep their files readable.
// Lock must be held.
func (p *Partition) deleteSegments(n int) {
	n = min(n, len(p.segs)-1)
	for _, s := range p.segs[:n] {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := p.e.fs.Remove(s.path(suffix)); err != nil && !os.IsNotExist(err) {
				p.e.log.Warn("removing segment file", "path", s.path(suffix), "err", err)
			}
		}
		s.release()
	}
	if n > 0 {
		p.segs = append([]*segment(nil), p.segs[n:]...)
		p.logStart = max(p.logStart, p.segs[0].base)
		p.e.fs.SyncDir(p.dir)
		if err := p.epochs.TruncateFromStart(p.logStart); err != nil {
			p.e.log.Warn("trimming leader-epoch-checkpoint", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "err", err)
		}
	}
}

// applyRetention deletes whole sealed segments below the HW that are too
// old (by their largest timestamp) or beyond retention.bytes. On a
// remote-storage topic (remote.go) it applies local.retention.* instead,
// deletes only segments wholly below the upload watermark, and also
// those below the remote log start (remote retention passed them); what
// the watermark holds back is counted in heldBack.
func (p *Partition) applyRetention(cfg TopicConfig, nowMs int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted || len(p.segs) < 2 {
		p.heldBack.Store(0)
		return 0
	}
	tiered := p.tieredLocked(cfg)
	retMs, retBytes := cfg.RetentionMs, cfg.RetentionBytes
	uploaded, remoteStart := int64(math.MaxInt64), int64(-1)
	if tiered {
		retMs, retBytes = cfg.LocalRetention()
		uploaded = p.uploadedNextLocked()
		if p.remoteKnown && p.remote.Enabled {
			remoteStart = p.remote.LogStart
		}
	}
	var total int64
	for _, s := range p.segs {
		total += s.size
	}
	n := 0
	var held int64
	for _, s := range p.segs[:len(p.segs)-1] {
		if s.next > p.hw {
			break
		}
		byTime := retMs >= 0 && s.maxTs >= 0 && nowMs-s.maxTs > retMs
		bySize := retBytes >= 0 && total-s.size >= retBytes
		byRemoteStart := s.next <= remoteStart
		if !byTime && !bySize && !byRemoteStart {
			break
		}
		total -= s.size
		if held > 0 || s.next > uploaded {
			// Not in the object store yet: kept, and so is
			// everything after it (the log stays contiguous).
			held += s.size
			continue
		}
		n++
	}
	p.heldBack.Store(held)
	p.deleteSegments(n)
	p.ps.DropAbortedBefore(p.logStart)
	p.ps.RemoveExpired(nowMs)
	return n
}
