package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/internal/vfs"
)

// This file is the log cleaner: compaction of the partitions of topics
// whose cleanup.policy includes compact (Kafka's LogCleaner, simplified).
//
// # What a cleaning does
//
// The cleanable part of a partition is its sealed segments wholly below
// min(high watermark, last stable offset, active segment base): bytes a
// consumer may read, no open transaction, never the segment being
// appended to. A cleaning
//
//  1. reads the cleanable segments and maps each key to the offset of its
//     latest record in a plain or idempotent batch (not transactional),
//     and notes the keys that appear in transactional batches;
//  2. rewrites each cleanable segment, oldest first, keeping a record of
//     such a batch only if it is the latest of its key (records without a
//     key are kept). A tombstone (null value) that is the latest of its
//     key goes once its segment's largest timestamp is more than
//     delete.retention.ms old, unless its key appears in a transactional
//     batch: such a batch is never filtered, so dropping the tombstone
//     would bring the older value back. An idempotent batch left without
//     records stays as a bare header when it is its producer's last batch
//     (the sequence and epoch a restart rebuilds dedupe state from, as in
//     Kafka), and goes otherwise;
//  3. leaves transactional and control batches byte for byte and does not
//     let their records supersede anything: their markers and aborted
//     ranges must stay as written.
//
// Offsets never change: a filtered batch keeps baseOffset, lastOffsetDelta
// (so its last offset and the offsets after it stay put), leader epoch,
// attributes, timestamps and producer fields, and gets a new recordCount,
// batchLength and CRC, its records re-compressed with its codec. A batch
// whose records all go is dropped; a segment may end up empty. Readers
// skip the gaps (Kafka clients expect them). Log start, high watermark,
// last stable offset and producer state do not move.
//
// # Swapping a segment, and crashes
//
// The cleaned copy is written to "<base>.log.cleaned.tmp" and fsynced; the
// old segment's index files are removed and the directory fsynced (a
// segment without indexes gets them rebuilt by the next Open, while a
// stale index would point into the middle of batches of the new file);
// then, under the partition lock and only if no truncation, retention or
// deletion touched the segment meanwhile, the copy is renamed over the
// .log, the directory fsynced, the new indexes written and the segment
// object replaced. A crash therefore leaves the old or the new segment,
// both valid; a leftover .tmp is removed by Open. Readers holding the old
// segment (FileRange, flushes) keep its descriptor, which still reads the
// old bytes after the rename, until they release it. Segments are
// swapped oldest first and a failure stops the cleaning, so a tombstone
// never goes before the older records of its key.
//
// # When
//
// A background goroutine looks every Config.CleanerInterval and cleans a
// partition when the bytes of cleanable segments sealed since its last
// cleaning reach min.cleanable.dirty.ratio of its cleanable bytes, or
// when a tombstone it kept has passed delete.retention.ms. That state is
// in memory: after a restart every compacted partition is cleaned once.
// One cleaning at a time; Engine.CompactNow and Partition.Compact clean
// at once (tests, tools).
//
// # Limits
//
// Kept on purpose, for safety or simplicity: records of transactional
// producers are never compacted (Kafka's cleaner removes aborted ones and,
// later, markers); keyless records are kept (Kafka's
// drops them); segments are never merged, so an emptied segment stays as
// an empty file; the key map holds whole keys, at most cleanerMaxKeys;
// there is no min.compaction.lag.ms, no I/O throttle, and the swap holds
// the partition lock across a rename, a directory fsync and the index
// writes.

const (
	// cleanerMaxKeys bounds the key map of one cleaning (Kafka's dedupe
	// buffer): a cleaning covers the segments that fit and leaves the rest.
	cleanerMaxKeys = 4 << 20
	// cleanerIOBuf is the read and write buffer of a cleaning.
	cleanerIOBuf = 1 << 20
)

// errCleanRaced: a truncation, retention or deletion changed the segment
// while it was being cleaned; the copy is discarded and a later cleaning
// starts again.
var errCleanRaced = errors.New("segment changed during cleaning")

// CleanerStats are the cleaner's cumulative counters.
type CleanerStats struct {
	Passes            int64 // partition cleanings that ran (one pass over a partition's cleanable segments)
	SegmentsRewritten int64
	BytesBefore       int64 // size of the rewritten segments before cleaning
	BytesAfter        int64 // and after
	RecordsRemoved    int64
	Errors            int64 // cleanings that failed (retried later)
}

// CompactResult describes one cleaning of a partition.
type CompactResult struct {
	Segments          int   // cleanable segments covered
	CleanEnd          int64 // offsets below it were considered
	SegmentsRewritten int
	BytesBefore       int64
	BytesAfter        int64
	RecordsRemoved    int64
	// tombstoneDue is when (ms) the earliest tombstone kept for
	// delete.retention.ms may go; MaxInt64 when none.
	tombstoneDue int64
}

type cleaner struct {
	e     *Engine
	done  chan struct{}
	runMu sync.Mutex // one cleaning at a time

	mu    sync.Mutex
	state map[*Partition]*cleanState

	passes, rewritten, before, after, removed, errs atomic.Int64
}

// cleanState is what the background loop remembers of a partition.
type cleanState struct {
	cleanedEnd   int64 // the last cleaning covered offsets below this
	tombstoneDue int64 // see CompactResult.tombstoneDue; 0: clean at once
}

func newCleaner(e *Engine) *cleaner {
	return &cleaner{e: e, done: make(chan struct{}), state: map[*Partition]*cleanState{}}
}

// run is the background loop; it stops with the engine's other
// background work.
func (c *cleaner) run() {
	defer close(c.done)
	t := time.NewTicker(c.e.cfg.CleanerInterval)
	defer t.Stop()
	for {
		select {
		case <-c.e.stopBg:
			return
		case <-t.C:
			c.pass(false)
		}
	}
}

// CleanerStats returns the cleaner's counters.
func (e *Engine) CleanerStats() CleanerStats {
	c := e.cleaner
	if c == nil {
		return CleanerStats{}
	}
	return CleanerStats{
		Passes: c.passes.Load(), SegmentsRewritten: c.rewritten.Load(),
		BytesBefore: c.before.Load(), BytesAfter: c.after.Load(),
		RecordsRemoved: c.removed.Load(), Errors: c.errs.Load(),
	}
}

// CompactNow cleans every partition of every compacted topic now,
// whatever its dirty ratio, and returns the failures.
func (e *Engine) CompactNow() error {
	return e.cleaner.pass(true)
}

// stop waits for the background loop (stopped by Engine.stopBg) and for a
// cleaning started by Compact or CompactNow; later ones see the engine
// closed. Close calls it before it flushes and releases the segments.
func (c *cleaner) stop() {
	<-c.done
	c.runMu.Lock()
	c.runMu.Unlock()
}

// Compact cleans the partition now if its topic is compacted.
func (p *Partition) Compact() (CompactResult, error) {
	c := p.e.cleaner
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if p.e.closed.Load() {
		return CompactResult{}, ErrClosed
	}
	cfg := p.topic.config()
	if !cfg.Compact() {
		return CompactResult{}, nil
	}
	res, err := p.compact(cfg, time.Now().UnixMilli())
	c.record(p, res, err)
	return res, err
}

// pass cleans the compacted partitions that are due (all with force).
func (c *cleaner) pass(force bool) error {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	ps := c.e.allPartitions()
	c.prune(ps)
	var errs []error
	for _, p := range ps {
		if c.e.closed.Load() {
			break
		}
		cfg := p.topic.config()
		if !cfg.Compact() {
			continue
		}
		now := time.Now().UnixMilli()
		if !force && !c.due(p, cfg, now) {
			continue
		}
		res, err := p.compact(cfg, now)
		c.record(p, res, err)
		if err != nil && !errors.Is(err, errCleanRaced) && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("%s-%d: %w", p.topic.name, p.idx, err))
		}
	}
	return errors.Join(errs...)
}

// record updates the counters and the partition's state after a cleaning.
func (c *cleaner) record(p *Partition, res CompactResult, err error) {
	c.passes.Add(1)
	c.rewritten.Add(int64(res.SegmentsRewritten))
	c.before.Add(res.BytesBefore)
	c.after.Add(res.BytesAfter)
	c.removed.Add(res.RecordsRemoved)
	log := c.e.log.With("topic", p.topic.name, "partition", p.idx)
	switch {
	case err == nil:
		c.mu.Lock()
		c.state[p] = &cleanState{cleanedEnd: res.CleanEnd, tombstoneDue: res.tombstoneDue}
		c.mu.Unlock()
		if res.SegmentsRewritten > 0 {
			log.Info("cleaned log", "segments", res.Segments, "rewritten", res.SegmentsRewritten,
				"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved, "clean_end", res.CleanEnd)
		}
	case errors.Is(err, errCleanRaced), errors.Is(err, ErrClosed):
		log.Debug("cleaning abandoned", "reason", err)
	default:
		c.errs.Add(1)
		log.Warn("cleaning log failed; retried at the next interval", "err", err)
	}
}

// prune forgets partitions that no longer exist.
func (c *cleaner) prune(ps []*Partition) {
	live := make(map[*Partition]bool, len(ps))
	for _, p := range ps {
		live[p] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range c.state {
		if !live[p] {
			delete(c.state, p)
		}
	}
}

// due reports whether the background loop should clean p now.
func (c *cleaner) due(p *Partition, cfg TopicConfig, now int64) bool {
	c.mu.Lock()
	st, ok := c.state[p]
	c.mu.Unlock()
	if !ok || now >= st.tombstoneDue {
		return true
	}
	p.mu.RLock()
	segs, _ := p.cleanableLocked()
	var total, dirty int64
	for _, s := range segs {
		total += s.size
		if s.base >= st.cleanedEnd {
			dirty += s.size
		}
	}
	p.mu.RUnlock()
	return dirty > 0 && float64(dirty) >= cfg.MinCleanableDirtyRatio*float64(total)
}

// cleanableLocked returns the sealed segments wholly below min(high
// watermark, last stable offset, active segment base), and that end.
// Lock must be held.
func (p *Partition) cleanableLocked() ([]*segment, int64) {
	if p.deleted || p.failed != nil || len(p.segs) < 2 {
		return nil, 0
	}
	limit := min(p.hw, p.active().base)
	if p.ps != nil {
		limit = min(limit, p.ps.LastStableOffset(p.hw))
	}
	n := 0
	for n < len(p.segs)-1 && p.segs[n+1].base <= limit {
		n++
	}
	if n == 0 {
		return nil, 0
	}
	return p.segs[:n], p.segs[n].base
}

// compact runs one cleaning of p (see the top of the file).
func (p *Partition) compact(cfg TopicConfig, now int64) (CompactResult, error) {
	res := CompactResult{tombstoneDue: math.MaxInt64}
	p.mu.RLock()
	cleanable, end := p.cleanableLocked()
	held := slices.Clone(cleanable)
	sizes := make([]int64, len(held))
	maxTs := make([]int64, len(held))
	for i, s := range held {
		s.acquire()
		sizes[i], maxTs[i] = s.size, s.maxTs
	}
	var ends []int64
	for i := range held {
		ends = append(ends, p.segs[i+1].base)
	}
	gen := p.gen
	// Each live producer's last batch: emptied by the cleaning, it stays as
	// a header, since its sequence and epoch are what a restart rebuilds
	// the producer's dedupe state from. Other emptied batches go.
	lastBatch := map[int64]int64{}
	if p.ps != nil {
		for _, pi := range p.ps.Producers() {
			if n := len(pi.Batches); n > 0 {
				lastBatch[pi.ProducerID] = pi.Batches[n-1].LastOffset
			}
		}
	}
	p.mu.RUnlock()
	retainEmpty := func(bi batchInfo) bool {
		last, ok := lastBatch[bi.producerID]
		return ok && last == bi.lastOffset
	}
	defer func() {
		for _, s := range held {
			s.release()
		}
	}()
	res.CleanEnd = end
	if len(held) == 0 {
		return res, nil
	}

	// 1. The latest plain offset of every key, and the keys of producer
	// batches.
	latest := map[string]int64{}
	producerKeys := map[string]struct{}{}
	var buf []byte
	segs := held
	for i, s := range held {
		err := forEachBatch(s, sizes[i], func(pos int64, b []byte) error {
			if p.e.closed.Load() {
				return ErrClosed
			}
			bi := parseBatchInfo(b)
			if bi.control {
				return nil
			}
			var err error
			buf, err = eachRecord(b, buf, func(off int64, r record) error {
				switch {
				case r.key == nil:
				case bi.producer:
					producerKeys[string(r.key)] = struct{}{}
				default:
					latest[string(r.key)] = off
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%w: %s at byte %d: %v", ErrCorruptLog, s.path(logSuffix), pos, err)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		if len(latest)+len(producerKeys) > cleanerMaxKeys && i+1 < len(held) {
			// The map is full: clean what it covers.
			segs, res.CleanEnd = held[:i+1], ends[i]
			break
		}
	}
	res.Segments = len(segs)

	// 2. Rewrite oldest first; stop at the first failure so that no
	// tombstone goes while older records of its key stay.
	for i, s := range segs {
		dropTombstones := maxTs[i] >= 0 && now-maxTs[i] > cfg.DeleteRetentionMs
		keep := func(off int64, r record) bool {
			if r.key == nil {
				return true
			}
			if l, ok := latest[string(r.key)]; ok && off < l {
				return false
			}
			if !r.tombstone {
				return true
			}
			if _, ok := producerKeys[string(r.key)]; ok {
				return true
			}
			if dropTombstones {
				return false
			}
			if maxTs[i] >= 0 {
				res.tombstoneDue = min(res.tombstoneDue, maxTs[i]+cfg.DeleteRetentionMs+1)
			}
			return true
		}
		st, err := p.cleanSegment(s, sizes[i], gen, cfg.IndexIntervalBytes, keep, retainEmpty, &buf)
		res.RecordsRemoved += st.removed
		if st.rewritten {
			res.SegmentsRewritten++
			res.BytesBefore += sizes[i]
			res.BytesAfter += st.after
		}
		if err != nil {
			p.mu.RLock()
			deleted := p.deleted
			p.mu.RUnlock()
			if deleted {
				// DeleteTopic removed the directory under the cleaning.
				err = errCleanRaced
			}
			return res, err
		}
	}
	return res, nil
}

type cleanSegmentResult struct {
	rewritten bool
	after     int64
	removed   int64
}

// cleanSegment rewrites s (size bytes, as seen at generation gen) without
// the records keep refuses and swaps the copy in. Nothing is written when
// keep refuses nothing.
func (p *Partition) cleanSegment(s *segment, size int64, gen uint64, indexInterval int32,
	keep func(int64, record) bool, retainEmpty func(batchInfo) bool, buf *[]byte) (cleanSegmentResult, error) {
	var res cleanSegmentResult
	fs := p.e.fs
	var cleaned *vfs.AtomicFile // the cleaned copy, made at the first change
	var out *fileWriter
	discard := func() {
		if cleaned != nil {
			cleaned.Abort()
		}
	}
	err := forEachBatch(s, size, func(pos int64, b []byte) error {
		if p.e.closed.Load() {
			return ErrClosed
		}
		nb, dropped, nbuf, err := filterBatch(b, *buf, keep, retainEmpty)
		*buf = nbuf
		if err != nil {
			return fmt.Errorf("%w: %s at byte %d: %v", ErrCorruptLog, s.path(logSuffix), pos, err)
		}
		res.removed += int64(dropped)
		if out == nil {
			if dropped == 0 {
				return nil // unchanged so far: no copy yet
			}
			// Its own temporary name: a follower truncation may copy
			// this segment (to <name>.log.tmp) while the lock is free.
			var err error
			if cleaned, err = vfs.CreateAtomic(fs, s.path(logSuffix), s.path(cleanedSuffix), 0o644); err != nil {
				return err
			}
			out = &fileWriter{f: cleaned.File(), buf: make([]byte, 0, cleanerIOBuf)}
			// The batches before this one are kept as they are.
			if err := out.copyFrom(s.log, pos); err != nil {
				return err
			}
		}
		return out.write(nb)
	})
	if err == nil && out != nil {
		err = out.flush()
	}
	if err != nil {
		discard()
		return cleanSegmentResult{}, err
	}
	if out == nil {
		return res, nil // nothing to remove
	}
	// Flushed outside the lock; Commit's own sync then has nothing to do.
	if err := cleaned.Sync(); err != nil {
		discard()
		return cleanSegmentResult{}, err
	}
	ns := &segment{base: s.base, next: s.base, dir: s.dir, fs: fs, log: out.f, size: out.pos, maxTs: -1, maxTsAt: -1}
	if bad, why := ns.scan(0, out.pos, false, indexInterval); bad >= 0 {
		discard()
		return cleanSegmentResult{}, fmt.Errorf("cleaned copy of %s is unreadable at byte %d: %v", s.path(logSuffix), bad, why)
	}
	// Old indexes would be stale for the new file; without any, Open
	// rebuilds them from the batches.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := fs.Remove(s.path(suffix)); err != nil && !os.IsNotExist(err) {
			discard()
			return cleanSegmentResult{}, err
		}
	}
	if err := fs.SyncDir(p.dir); err != nil {
		discard()
		return cleanSegmentResult{}, err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.segs, s)
	_, end := p.cleanableLocked()
	if p.deleted || p.failed != nil || p.gen != gen || i < 0 || i >= len(p.segs)-1 || s.size != size ||
		p.segs[i+1].base > end || slices.Contains(p.dirty, s) {
		discard()
		return cleanSegmentResult{}, errCleanRaced
	}
	dirErr := cleaned.Commit()
	if dirErr != nil && !errors.Is(dirErr, vfs.ErrDirSync) {
		discard()
		return cleanSegmentResult{}, dirErr
	}
	// From here the file at the segment's path is the copy: the segment
	// object must follow it whatever fails next.
	ns.next, ns.createdMs = s.next, s.createdMs
	ns.refs.Store(1)
	p.segs[i] = ns
	if p.hwSeg == s {
		p.hwSeg, p.hwPos = ns, ns.size
	}
	if p.rendSeg == s {
		p.rendSeg, p.rendPos = ns, ns.size
	}
	s.release() // the partition's reference; readers keep theirs
	res.rewritten, res.after = true, ns.size
	if dirErr != nil {
		return res, dirErr
	}
	if err := ns.writeIndexes(); err != nil {
		p.e.log.Warn("writing indexes of a cleaned segment; rebuilt at the next start", "path", ns.path(logSuffix), "err", err)
	}
	return res, nil
}

// forEachBatch calls fn with each whole batch of s's first size bytes,
// checked (length, magic, CRC: compaction must not re-sign damaged bytes),
// read through one buffer.
func forEachBatch(s *segment, size int64, fn func(pos int64, b []byte) error) error {
	buf := make([]byte, 0, cleanerIOBuf)
	var bufAt int64 // file position of buf[0]
	fill := func(pos int64, n int64) error {
		n = min(max(n, cleanerIOBuf), size-pos)
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := s.log.ReadAt(buf, pos); err != nil {
			return fmt.Errorf("%w: read %s at %d: %v", ErrStorage, s.path(logSuffix), pos, err)
		}
		bufAt = pos
		return nil
	}
	for pos := int64(0); pos < size; {
		if pos+records.HeaderSize > bufAt+int64(len(buf)) {
			if size-pos < records.HeaderSize {
				return corruptAt(s, pos, fmt.Errorf("%w: %d trailing bytes", ErrCorruptMessage, size-pos))
			}
			if err := fill(pos, records.HeaderSize); err != nil {
				return err
			}
		}
		h := parseHeader(buf[pos-bufAt:])
		if h.size < records.HeaderSize || int64(h.size) > size-pos {
			return corruptAt(s, pos, fmt.Errorf("%w: batch length %d with %d bytes left", ErrCorruptMessage, h.size, size-pos))
		}
		if pos+int64(h.size) > bufAt+int64(len(buf)) {
			if err := fill(pos, int64(h.size)); err != nil {
				return err
			}
		}
		b := buf[pos-bufAt : pos-bufAt+int64(h.size)]
		if _, err := checkBatch(b, 0); err != nil {
			return corruptAt(s, pos, err)
		}
		if err := fn(pos, b); err != nil {
			return err
		}
		pos += int64(h.size)
	}
	return nil
}

// fileWriter writes a file sequentially through a buffer.
type fileWriter struct {
	f   vfs.File
	pos int64 // bytes written or buffered
	buf []byte
}

func (w *fileWriter) write(b []byte) error {
	if len(w.buf)+len(b) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
		if len(b) > cap(w.buf) {
			if _, err := w.f.WriteAt(b, w.pos); err != nil {
				return err
			}
			w.pos += int64(len(b))
			return nil
		}
	}
	w.buf = append(w.buf, b...)
	w.pos += int64(len(b))
	return nil
}

func (w *fileWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.WriteAt(w.buf, w.pos-int64(len(w.buf)))
	w.buf = w.buf[:0]
	return err
}

// copyFrom appends the first n bytes of src.
func (w *fileWriter) copyFrom(src vfs.File, n int64) error {
	chunk := make([]byte, min(n, cleanerIOBuf))
	for at := int64(0); at < n; {
		c := chunk[:min(int64(len(chunk)), n-at)]
		if _, err := src.ReadAt(c, at); err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		if err := w.write(c); err != nil {
			return err
		}
		at += int64(len(c))
	}
	return nil
}
