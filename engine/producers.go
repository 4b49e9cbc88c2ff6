package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/internal/vfs"
)

// This file wires per-partition producer state (package producerstate)
// into the log: idempotent deduplication on append, transaction markers,
// the last stable offset and aborted transactions for read_committed
// fetches, and the state's persistence.
//
// # Persistence
//
// The state is derived from the log. A snapshot (<offset>.snapshot in the
// partition directory, producerstate's format) is written when a segment
// rolls (the old segment was just flushed, so everything below the
// snapshot offset is durable) and at a clean close. Opening a partition
// restores the newest snapshot at or below the recovered log end and
// replays the batch headers after it; snapshots above the log end (their
// batches were lost in a crash) are deleted. Truncation rebuilds the same
// way from the newest snapshot at or below the new end. The aborted
// transaction list lives in the snapshot and is rebuilt by replay, so no
// separate .txnindex file is kept (see docs/ARCHITECTURE.md).

// snapshotsKept is how many producer-state snapshots a partition keeps.
const snapshotsKept = 3

// listSnapshots returns the offsets of the partition's snapshot files,
// ascending.
func (p *Partition) listSnapshots() []int64 {
	names, err := p.e.fs.ReadDir(p.dir)
	if err != nil {
		return nil
	}
	var offs []int64
	for _, n := range names {
		if !strings.HasSuffix(n, layout.SnapshotSuffix) || len(n) != offsetNameDigits+len(layout.SnapshotSuffix) {
			continue
		}
		off, err := strconv.ParseInt(n[:offsetNameDigits], 10, 64)
		if err != nil {
			continue
		}
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs
}

func (p *Partition) snapshotPath(off int64) string {
	return filepath.Join(p.dir, layout.OffsetFileName(off, layout.SnapshotSuffix))
}

// loadProducers builds the producer state for a log ending at p.logEnd:
// the newest usable snapshot at or below it, then a replay of the batches
// after it. Snapshots above the end are deleted. Lock must be held (or the
// partition not yet shared).
func (p *Partition) loadProducers() error {
	st, err := p.newProducerState()
	if err != nil {
		return err
	}
	from := p.logStart
	offs := p.listSnapshots()
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > p.logEnd {
			p.e.fs.Remove(p.snapshotPath(off))
			continue
		}
		b, err := vfs.ReadFile(p.e.fs, p.snapshotPath(off), 0)
		if err == nil {
			err = st.Restore(b)
		}
		if err != nil {
			p.e.log.Warn("ignoring producer state snapshot", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "offset", off, "err", err)
			if st, err = p.newProducerState(); err != nil {
				return err
			}
			continue
		}
		from = max(st.MapEndOffset(), p.logStart)
		break
	}
	if err := p.replayProducers(st, from); err != nil {
		return err
	}
	p.ps = st
	return nil
}

func (p *Partition) newProducerState() (*producerstate.State, error) {
	cfg := p.e.cfg.ProducerState
	if cfg.ProducerIDExpiration == 0 {
		cfg = producerstate.DefaultConfig()
	}
	return producerstate.New(cfg)
}

// replayProducers applies every batch at or after from, up to the log
// end, to st. Lock must be held (or the partition not yet shared).
func (p *Partition) replayProducers(st *producerstate.State, from int64) error {
	var hdr [records.HeaderSize]byte
	for _, s := range p.segs {
		if s.next <= from && s != p.active() {
			continue
		}
		pos := int64(0)
		if from > s.base {
			pos = s.lookup(from)
		}
		for pos < s.size {
			if _, err := s.log.ReadAt(hdr[:], pos); err != nil {
				return fmt.Errorf("%w: replaying producer state from %s at %d: %v", ErrStorage, s.path(logSuffix), pos, err)
			}
			rh, _ := records.ParseHeader(hdr[:])
			h := headerOf(rh)
			if h.size < records.HeaderSize || pos+int64(h.size) > s.size {
				return fmt.Errorf("%w: replaying producer state: batch of %d bytes at %d in %s", ErrCorruptLog, h.size, pos, s.path(logSuffix))
			}
			if h.lastOffset() >= from {
				buf := hdr[:]
				if rh.IsControl() {
					buf = make([]byte, h.size)
					if _, err := s.log.ReadAt(buf, pos); err != nil {
						return fmt.Errorf("%w: replaying producer state: %v", ErrStorage, err)
					}
				}
				ph, err := producerstate.ParseBatch(buf)
				if err != nil {
					return fmt.Errorf("%w: replaying producer state at offset %d: %v", ErrCorruptLog, h.baseOffset, err)
				}
				st.ApplyBatch(ph)
			}
			pos += int64(h.size)
		}
	}
	return nil
}

// writeProducerSnapshot persists the state as of the log end and keeps the
// newest snapshotsKept files. Everything below the log end must be durable
// (roll and close call it after a flush). Lock must be held.
func (p *Partition) writeProducerSnapshot() {
	if p.ps == nil {
		return
	}
	// Restore takes the map end from the file: name the file for it.
	off := p.ps.MapEndOffset()
	if off <= 0 {
		return
	}
	if err := vfs.ReplaceFile(p.e.fs, p.snapshotPath(off), p.ps.Snapshot(), 0o644); err != nil {
		p.e.log.Warn("writing producer state snapshot", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "offset", off, "err", err)
		return
	}
	offs := p.listSnapshots()
	// A remote-storage partition keeps the snapshot of every segment
	// until it is uploaded: the uploader copies it with the segment
	// (SegmentInfo.ProducerSnapshot). One small file per local segment.
	keepAbove := int64(math.MaxInt64)
	if p.tieredLocked(p.topic.config()) {
		keepAbove = p.uploadedNextLocked()
	}
	for len(offs) > snapshotsKept && offs[0] <= keepAbove {
		p.e.fs.Remove(p.snapshotPath(offs[0]))
		offs = offs[1:]
	}
}

// parseProducerHeaders returns the producer view of each validated batch.
func parseProducerHeaders(batches []records.Batch) ([]producerstate.BatchHeader, error) {
	out := make([]producerstate.BatchHeader, len(batches))
	for i, bt := range batches {
		ph, err := producerstate.FromBatch(bt)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
		}
		out[i] = ph
	}
	return out, nil
}

// duplicateWaiter answers a retried batch with the offsets of its first
// append, once those are written (and flushed under FsyncAlways): the
// retry may race the original's flush. Lock must be held.
func (p *Partition) duplicateWaiter(d *producerstate.BatchMetadata) *waiter {
	w := &waiter{done: make(chan struct{}), res: AppendResult{
		BaseOffset: d.FirstOffset, LastOffset: d.LastOffset, LogAppendTime: -1, LogStartOffset: p.startLocked(),
	}}
	if p.topic.config().TimestampTypeLogAppend {
		w.res.LogAppendTime = d.Timestamp
	}
	p.e.stats.duplicates.Add(1)
	// The original is answered once it is durable per the fsync policy:
	// the readable end alone may be ahead of that on a replicated
	// partition (followers read before the barrier).
	if p.durableEndLocked() > d.LastOffset {
		w.finish(nil)
		return w
	}
	gen := p.gen
	go func() {
		for {
			p.mu.RLock()
			written, failed, ch, truncated := p.durableEndLocked() > d.LastOffset, p.failed, p.changedLocked(), p.gen != gen
			p.mu.RUnlock()
			switch {
			case truncated:
				// The original was rolled back or truncated away: the
				// offsets now hold other records (or none yet).
				w.finish(fmt.Errorf("%w: %s-%d was truncated below offset %d", ErrStorage, p.topic.name, p.idx, d.FirstOffset))
				return
			case written:
				w.finish(nil)
				return
			case failed != nil:
				w.finish(failed)
				return
			case p.e.closed.Load():
				w.finish(ErrClosed)
				return
			}
			select {
			case <-ch:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// AppendMarker appends a transaction marker (a control batch) for m's
// producer and completes its transaction here: the commit or abort that
// WriteTxnMarkers delivers. The marker takes an offset like any batch;
// the waiter reports its durability.
func (p *Partition) AppendMarker(m producerstate.Marker) (AppendWaiter, error) {
	batch := encodeMarkerBatch(m, time.Now().UnixMilli())
	hs, err := validateBatches(batch, 0)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.appendableLocked(); err != nil {
		return nil, err
	}
	if err := p.ps.CheckMarker(m); err != nil {
		return nil, err
	}
	w, err := p.appendLocked(batch, hs, true)
	if err != nil {
		return nil, err
	}
	if _, err := p.ps.CompleteTxn(m, w.res.BaseOffset, time.Now().UnixMilli()); err != nil {
		// CheckMarker passed under the same lock; this cannot happen.
		return nil, fmt.Errorf("%w: completing transaction after its marker: %v", ErrStorage, err)
	}
	return w, nil
}

// encodeMarkerBatch builds a control batch holding one end-transaction
// marker: key (version 0, type), value (version 0, coordinator epoch).
func encodeMarkerBatch(m producerstate.Marker, nowMs int64) []byte {
	ctype := records.ControlAbort
	if m.Commit {
		ctype = records.ControlCommit
	}
	return records.EncodeMarker(records.Marker{
		ProducerID:       m.ProducerID,
		ProducerEpoch:    m.ProducerEpoch,
		Type:             ctype,
		CoordinatorEpoch: m.CoordinatorEpoch,
		Timestamp:        nowMs,
	})
}

// LastStableOffset is the offset read_committed consumers read up to.
func (p *Partition) LastStableOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ps.LastStableOffset(p.hw)
}

// ReadCommitted is Read for a read_committed consumer: it stops at the last
// stable offset and lists the aborted transactions overlapping the range
// from offset up to it, which the consumer uses to drop aborted records.
func (p *Partition) ReadCommitted(offset int64, maxBytes int32, minOneBatch bool) (ReadResult, []producerstate.AbortedTxn, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	lso := p.ps.LastStableOffset(p.hw)
	seg, pos := p.hwSeg, p.hwPos
	if lso < p.hw {
		var err error
		if seg, pos, err = p.posOf(lso); err != nil {
			return ReadResult{}, nil, err
		}
	}
	res, err := p.readLocked(offset, maxBytes, minOneBatch, lso, seg, pos)
	if err != nil {
		return res, nil, err
	}
	res.LastStableOffset = lso
	var aborted []producerstate.AbortedTxn
	if res.Data.Len() > 0 {
		aborted = p.ps.AbortedTxns(offset, lso)
	}
	return res, aborted, nil
}

// Producers describes the partition's idempotent producers
// (DescribeProducers, tests).
func (p *Partition) Producers() []producerstate.ProducerInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ps.Producers()
}

// rebuildProducers recomputes the state after a truncation to p.logEnd and
// drops snapshots above it. Lock must be held.
func (p *Partition) rebuildProducers() error {
	if err := p.loadProducers(); err != nil {
		return fmt.Errorf("%w: rebuilding producer state: %v", ErrStorage, err)
	}
	return nil
}

// removeAllSnapshots deletes every producer-state snapshot (the log was
// emptied). Lock must be held.
func (p *Partition) removeAllSnapshots() {
	for _, off := range p.listSnapshots() {
		if err := p.e.fs.Remove(p.snapshotPath(off)); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.e.log.Warn("removing producer state snapshot", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "err", err)
		}
	}
}
