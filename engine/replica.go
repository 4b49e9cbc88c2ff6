package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/internal/vfs"
)

// This file is the engine's side of replication: the methods package
// replication's Log interface needs (netpath adapts them), and the
// leader-epoch cache each partition keeps in its directory.
//
// # High watermark
//
// A partition is "replicated" once the broker calls SetReplicated(true)
// (it has more than one replica). From then on the write path only moves
// the readable end (rend: written, and flushed under FsyncAlways on the
// uring path); the high watermark comes from replication through
// SetHighWatermark. Consumer reads stop at the HW; follower reads
// (ReadReplica) stop at the readable end. A consumer offset between the HW
// and the log end is not out of range: it gets an empty answer, as in
// Kafka, so a new leader whose HW still lags does not reset consumers.
//
// The HW survives restarts through <data dir>/replication-offset-checkpoint
// (Kafka's text format: version 0, a count, "<topic> <partition> <hw>"
// lines), written every HWCheckpointInterval and at Close. On open a
// partition's HW starts at the log end as before (so RF=1 partitions and
// engine-only users read their whole recovered log), and the checkpointed
// value, capped at the log end, is remembered; the first SetReplicated(true)
// lowers the HW to it. A restarted broker elected leader therefore does not
// expose records above the old HW until its followers hold them (Kafka
// initialises the HW from this file the same way). A data dir without the
// file (written by an older ringlog) keeps the log end; a file without the
// partition (created and crashed before the first write) means the log
// start.
//
// # Leader epochs
//
// <partition dir>/leader-epoch-checkpoint is epochcache's file. After
// recovery it is trimmed to the recovered log (TruncateFromEnd/Start):
// the checkpoint may be durable while the bytes it describes were not.

// ReplicaPending completes when a replica append is durable per the fsync
// policy; Err is then its outcome.
type ReplicaPending interface {
	Done() <-chan struct{}
	Err() error
}

type replicaPending struct{ w *waiter }

func (r replicaPending) Done() <-chan struct{} { return r.w.done }
func (r replicaPending) Err() error            { <-r.w.done; return r.w.err }

// openEpochs loads the partition's leader-epoch checkpoint and trims it to
// the log. Called from Open/create before the partition is shared.
func (p *Partition) openEpochs() error {
	c, err := epochcache.Open(p.e.fs, filepath.Join(p.dir, layout.LeaderEpochCheckpoint))
	if err != nil {
		return err
	}
	if err := c.TruncateFromEnd(p.logEnd); err != nil {
		return err
	}
	if err := c.TruncateFromStart(p.logStart); err != nil {
		return err
	}
	p.epochs = c
	return nil
}

// SetReplicated hands the high watermark to replication (true) or back to
// the write path (false: the HW jumps to the readable end). On the switch
// to replicated the HW stays where it is: replication only moves it up
// from there once the ISR has the records.
//
// The first call after open applies the checkpointed HW: true lowers the
// HW to it, false drops it (the write path owns the HW again).
func (p *Partition) SetReplicated(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hwCkptSet {
		p.hwCkptSet = false
		if on && p.hwCkpt < p.hw {
			if seg, pos, err := p.posOf(p.hwCkpt); err == nil {
				p.e.log.Info("high watermark from checkpoint", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "hw", p.hwCkpt, "log_end", p.logEnd)
				p.hw, p.hwSeg, p.hwPos = p.hwCkpt, seg, pos
			} else {
				p.e.log.Warn("positioning checkpointed high watermark", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "hw", p.hwCkpt, "err", err)
			}
		}
	}
	p.replicated = on
	if !on && p.rend > p.hw {
		p.hw, p.hwSeg, p.hwPos = p.rend, p.rendSeg, p.rendPos
		p.notify()
	}
}

func (e *Engine) readHWCheckpoint() (map[string]int64, error) {
	return e.readOffsetsFile(hwCheckpointName)
}

// initHWCheckpoint remembers the checkpointed HW (see the file comment);
// hws is nil when the data dir has no checkpoint file. Called from load
// before the partition is shared.
func (p *Partition) initHWCheckpoint(hws map[string]int64) {
	if hws == nil {
		return
	}
	hw, ok := hws[partitionDirName(p.topic.name, p.idx)]
	if !ok {
		hw = p.logStart
	}
	p.hwCkpt, p.hwCkptSet = max(min(hw, p.logEnd), p.logStart), true
}

// checkpointHW is the HW to persist: a checkpointed value not yet applied
// stays in force. Lock must be held (read).
func (p *Partition) checkpointHW() int64 {
	if p.hwCkptSet {
		return min(p.hw, p.hwCkpt)
	}
	return p.hw
}

// writeHWCheckpoint persists every partition's HW (atomic replace).
func (e *Engine) writeHWCheckpoint() error {
	e.ckMu.Lock()
	defer e.ckMu.Unlock()
	ps := e.allPartitions()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(ps))
	for _, p := range ps {
		p.mu.RLock()
		fmt.Fprintf(&buf, "%s %d %d\n", p.topic.name, p.idx, p.checkpointHW())
		p.mu.RUnlock()
	}
	err := vfs.WriteFileAtomic(e.fs, filepath.Join(e.cfg.Dir, hwCheckpointName), buf.Bytes(), 0o644)
	if !e.closed.Load() {
		e.hwFail.Report(err)
	}
	return err
}

// Replicated reports whether replication owns the HW.
func (p *Partition) Replicated() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.replicated
}

// LogStartOffset is the first offset in the log as clients see it: on
// remote-storage topics the remote tier's start when it holds data below
// the local log (remote.go), else the local log start.
func (p *Partition) LogStartOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.startLocked()
}

// LogEndOffset is the next offset to be assigned.
func (p *Partition) LogEndOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.logEnd
}

// Ends is LogEndOffset, DurableEnd and LogStartOffset under one lock: a
// follower reads all three for each partition of every fetch it builds.
func (p *Partition) Ends() (logEnd, durableEnd, logStart int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.logEnd, p.durableEndLocked(), p.startLocked()
}

// DurableEnd is the end this replica may count as held: the flushed end
// under FsyncAlways, the written end otherwise.
func (p *Partition) DurableEnd() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.durableEndLocked()
}

// durableEndLocked is DurableEnd; the lock is held.
func (p *Partition) durableEndLocked() int64 {
	if p.e.cfg.Fsync == FsyncAlways {
		return min(p.durable, p.logEnd)
	}
	return p.rend
}

// HighWatermark is the consumer-visible end.
func (p *Partition) HighWatermark() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.hw
}

// LatestEpoch is the newest leader epoch in the epoch cache (-1: none).
func (p *Partition) LatestEpoch() int32 { return p.epochs.LatestEpoch() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch (epochcache semantics).
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return p.epochs.EndOffsetFor(epoch, p.LogEndOffset())
}

// EpochEntries returns the epoch cache (tests, debugging).
func (p *Partition) EpochEntries() []epochcache.Entry { return p.epochs.Entries() }

// AssignLeaderEpoch makes the partition a leader's in epoch: the cache gets
// (epoch, log end) and later appends are stamped with epoch.
func (p *Partition) AssignLeaderEpoch(epoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.epochs.Assign(epoch, p.logEnd); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.leaderEpoch = epoch
	return nil
}

// AppendReplicated appends whole batches as the leader wrote them (offsets
// and leader epochs kept; the first must start at the log end) and records
// their epochs in the cache.
func (p *Partition) AppendReplicated(b []byte) (ReplicaPending, error) {
	set := records.ParseSet(b)
	hs, err := validateSet(set, max(p.topic.config().MaxMessageBytes, 1<<30))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.appendableLocked(); err != nil {
		return nil, err
	}
	// The cache first: an entry above the log end is trimmed by recovery,
	// while a batch without its entry would be misplaced by epoch.
	if err := p.epochs.AssignFromBatches(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	w, err := p.appendLocked(b, hs, false)
	if err != nil {
		return nil, err
	}
	// The leader checked these batches; a follower only records them so
	// it can take over deduplication and transactions as a leader.
	for _, bt := range set.Batches {
		if ph, err := producerstate.FromBatch(bt); err == nil {
			p.ps.ApplyBatch(ph)
		} else {
			p.e.log.Warn("replicated batch without a readable producer header", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "offset", bt.BaseOffset, "err", err)
		}
	}
	return replicaPending{w}, nil
}

// ReadReplica is Read for a follower: bounded by the readable end instead
// of the high watermark.
func (p *Partition) ReadReplica(offset int64, maxBytes int32) (ReadResult, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.readLocked(offset, maxBytes, true, p.rend, p.rendSeg, p.rendPos)
}

// SetHighWatermark sets the consumer-visible end (replication's). It is
// capped at the readable end and may go down (a follower after truncation).
func (p *Partition) SetHighWatermark(hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hw = max(min(hw, p.rend), p.logStart)
	if hw == p.hw && p.hwSeg != nil {
		return
	}
	seg, pos, err := p.posOf(hw)
	if err != nil {
		p.e.log.Warn("setting high watermark", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "hw", hw, "err", err)
		return
	}
	p.hw, p.hwSeg, p.hwPos = hw, seg, pos
	p.ps.OnHighWatermark(hw)
	p.notifyChange(changeHW)
}

// posOf returns the segment and byte position where offset's batch starts
// (a batch straddling offset is left out). Lock must be held.
func (p *Partition) posOf(offset int64) (*segment, int64, error) {
	if offset >= p.rend {
		return p.rendSeg, p.rendPos, nil
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > offset }) - 1
	i = max(i, 0)
	seg := p.segs[i]
	pos := seg.lookup(offset)
	for pos < seg.size {
		h, err := seg.readHeader(pos)
		if err != nil {
			return nil, 0, err
		}
		if h.lastOffset() >= offset {
			break
		}
		pos += int64(h.size)
	}
	return seg, pos, nil
}

// TruncateTo removes every offset >= offset (the whole batch holding it,
// as Kafka does), trims the epoch cache from min(offset, log end) even
// when nothing is removed, and lowers the HW and durable end.
func (p *Partition) TruncateTo(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return p.failed
	}
	if offset < p.logStart {
		return p.truncateFullyLocked(offset)
	}
	if offset >= p.logEnd {
		if err := p.epochs.TruncateFromEnd(p.logEnd); err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		return nil
	}
	if err := p.e.wq.barrier(p); err != nil {
		if rollingBack(err) {
			return err // a write failed for lack of space; retry later
		}
		return p.fail(err)
	}
	// A replay after a crash must not write the removed bytes back.
	if err := p.e.checkpointJournal(); err != nil {
		return p.fail(err)
	}
	i := max(sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > offset })-1, 0)
	seg := p.segs[i]
	pos := seg.lookup(offset)
	newEnd := seg.base
	for pos < seg.size {
		h, err := seg.readHeader(pos)
		if err != nil {
			return p.fail(err)
		}
		if h.lastOffset() >= offset {
			newEnd = h.baseOffset
			break
		}
		pos += int64(h.size)
		newEnd = h.lastOffset() + 1
	}
	p.e.log.Info("truncating replica log", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "to", newEnd, "log_end", p.logEnd)
	return p.truncateAt(i, pos, newEnd, true)
}

// truncateAt removes everything from byte pos of p.segs[i] on, where the
// batch starting offset newEnd begins, and rebuilds what the removed
// batches had moved: segment indexes, log end, readable end, HW, durable
// end, epoch cache and producer state. It starts a new generation, so
// writes and flushes started before it are ignored when they complete.
// With shared, a segment file that a FileRange is being sent from is
// replaced by a copy of its prefix instead of shrunk in place (the
// removed bytes may be in such a send); without, the caller knows no
// reader ever saw them. No write of p may be in flight. Lock must be held.
func (p *Partition) truncateAt(i int, pos, newEnd int64, shared bool) error {
	seg := p.segs[i]
	p.gen++
	// Later segments go entirely.
	for _, s := range p.segs[i+1:] {
		p.dropDirty(s)
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := p.e.fs.Remove(s.path(suffix)); err != nil && !os.IsNotExist(err) {
				return p.fail(err)
			}
		}
		s.release()
	}
	p.segs = p.segs[:i+1]
	if shared && seg.refs.Load() > 1 {
		// A FileRange of this file is being sent (a fetch served while we
		// led): shrinking the file in place would cut the send short, or
		// let the next appends' bytes into it. The kept prefix goes to a
		// new file renamed over the old name instead; the senders keep the
		// old inode until they release it. No new range can be taken while
		// we hold the lock, so a count of 1 (ours) means nobody reads it.
		ns, err := p.copySegmentPrefix(seg, pos)
		if err != nil {
			return p.fail(err)
		}
		p.dropDirty(seg)
		p.segs[i] = ns
		seg.release()
		seg = ns
	} else {
		if err := seg.log.Truncate(pos); err != nil {
			return p.fail(err)
		}
		if err := seg.log.Datasync(); err != nil {
			return p.fail(err)
		}
	}
	p.e.fs.Remove(seg.path(indexSuffix))
	p.e.fs.Remove(seg.path(timeIndexSuffix))
	p.e.fs.SyncDir(p.dir)
	// Rebuild the segment's in-memory state from its remaining headers.
	seg.index, seg.tindex, seg.sinceIndex, seg.next, seg.maxTs, seg.maxTsAt, seg.size = nil, nil, 0, seg.base, -1, -1, 0
	seg.forgetTail()
	if bad, why := seg.scan(0, pos, false, p.topic.config().IndexIntervalBytes); bad >= 0 {
		return p.fail(fmt.Errorf("rescanning %s after truncation: %v", seg.path(logSuffix), why))
	}
	seg.size = pos
	seg.createdMs = time.Now().UnixMilli()
	p.logEnd = newEnd
	p.durable = min(p.durable, newEnd)
	p.rend, p.rendSeg, p.rendPos = min(p.rend, newEnd), seg, pos
	if p.rend < newEnd {
		// Cannot happen after the barrier; keep the invariants anyway.
		p.rend = newEnd
	}
	if p.hw > newEnd || p.hwSeg == nil || !p.hasSeg(p.hwSeg) {
		p.hw, p.hwSeg, p.hwPos = min(p.hw, newEnd), seg, pos
	}
	for _, w := range p.waiters {
		w.finish(fmt.Errorf("%w: %s-%d truncated to %d", ErrStorage, p.topic.name, p.idx, newEnd))
	}
	p.waiters = nil
	p.notify()
	if err := p.epochs.TruncateFromEnd(newEnd); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := p.rebuildProducers(); err != nil {
		return p.fail(err)
	}
	p.e.kickCheckpoint()
	return nil
}

// copySegmentPrefix writes the first n bytes of seg to a new file and
// moves it over seg's log (vfs.AtomicFile): a crash leaves either the old
// file whole (the truncation is redone by the leader) or the new one. The
// new segment has no indexes yet; the caller rescans it. Lock must be held.
func (p *Partition) copySegmentPrefix(seg *segment, n int64) (*segment, error) {
	a, err := vfs.CreateAtomic(p.e.fs, seg.path(logSuffix), "", 0o644)
	if err != nil {
		return nil, err
	}
	defer a.Abort()
	f := a.File()
	buf := make([]byte, min(n, 1<<20))
	for off := int64(0); off < n; {
		m := min(int64(len(buf)), n-off)
		if _, err := seg.log.ReadAt(buf[:m], off); err != nil {
			return nil, fmt.Errorf("%w: copying %s: %v", ErrStorage, seg.path(logSuffix), err)
		}
		if _, err := f.WriteAt(buf[:m], off); err != nil {
			return nil, fmt.Errorf("%w: copying %s: %v", ErrStorage, seg.path(logSuffix), err)
		}
		off += m
	}
	if err := a.Commit(); err != nil {
		return nil, err
	}
	ns := &segment{base: seg.base, next: seg.base, dir: seg.dir, fs: seg.fs, log: f, size: n, maxTs: -1, maxTsAt: -1, createdMs: seg.createdMs}
	ns.refs.Store(1)
	return ns, nil
}

func (p *Partition) hasSeg(s *segment) bool {
	for _, x := range p.segs {
		if x == s {
			return true
		}
	}
	return false
}

// dropDirty forgets s in the dirty list. Lock must be held.
func (p *Partition) dropDirty(s *segment) {
	for i, d := range p.dirty {
		if d == s {
			p.dirty = append(p.dirty[:i], p.dirty[i+1:]...)
			s.release()
			return
		}
	}
}

// TruncateFullyAndStartAt empties the log and restarts it at offset.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return p.failed
	}
	return p.truncateFullyLocked(offset)
}

// truncateFullyLocked: lock must be held.
func (p *Partition) truncateFullyLocked(offset int64) error {
	if err := p.quiesceLocked(); err != nil {
		return err
	}
	p.e.log.Info("restarting replica log", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "at", offset)
	p.gen++
	for _, s := range p.segs {
		p.dropDirty(s)
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			p.e.fs.Remove(s.path(suffix))
		}
		s.release()
	}
	p.segs = nil
	seg, err := p.e.createSegment(p.dir, offset, time.Now().UnixMilli())
	if err != nil {
		return p.fail(err)
	}
	p.startEmptyLocked(seg, offset)
	p.e.fs.SyncDir(p.dir)
	if err := p.epochs.Clear(); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.removeAllSnapshots()
	ps, err := p.newProducerState()
	if err != nil {
		return p.fail(err)
	}
	p.ps = ps
	p.e.kickCheckpoint()
	return nil
}

// startEmptyLocked points the partition at seg, a new empty segment at
// offset, as its whole log, and fails the waiters of the old one. Lock
// must be held.
func (p *Partition) startEmptyLocked(seg *segment, offset int64) {
	p.segs = []*segment{seg}
	p.logStart, p.logEnd, p.durable = offset, offset, offset
	p.rend, p.rendSeg, p.rendPos = offset, seg, 0
	p.hw, p.hwSeg, p.hwPos = offset, seg, 0
	for _, w := range p.waiters {
		w.finish(fmt.Errorf("%w: %s-%d restarted at %d", ErrStorage, p.topic.name, p.idx, offset))
	}
	p.waiters = nil
	p.notify()
}

// quiesceLocked prepares the whole log's removal: no write of p in flight
// and the journal checkpointed, so a replay after a crash cannot write
// the old bytes back. Errors are returned as the caller should: a write
// rolled back for lack of space is retriable, anything else fails the
// partition. Lock must be held.
func (p *Partition) quiesceLocked() error {
	if err := p.e.wq.barrier(p); err != nil {
		if rollingBack(err) {
			return err
		}
		return p.fail(err)
	}
	if err := p.e.checkpointJournal(); err != nil {
		return p.fail(err)
	}
	return nil
}
