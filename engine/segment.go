package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/internal/vfs"
)

// File names are spelled once, in package layout; these short names are
// the engine's for them. doc.go describes the formats.
const (
	logSuffix        = layout.LogSuffix
	indexSuffix      = layout.IndexSuffix
	timeIndexSuffix  = layout.TimeIndexSuffix
	tmpSuffix        = layout.TmpSuffix
	cleanedSuffix    = layout.CleanedSuffix
	metaDirName      = layout.MetaDir
	topicsFileName   = layout.TopicsFile
	checkpointName   = layout.RecoveryPointCheckpoint
	hwCheckpointName = layout.ReplicationOffsetCheckpoint
	lsCheckpointName = layout.LogStartOffsetCheckpoint
	cleanMarkerName  = layout.CleanShutdownMarker
	offsetNameDigits = layout.OffsetNameDigits
	indexEntrySize   = 8
	timeIndexEntSize = 12
)

func segmentName(base int64, suffix string) string {
	return layout.OffsetFileName(base, suffix)
}

type indexEntry struct {
	rel uint32 // offset - segment base, of a batch's first offset
	pos uint32 // byte position of that batch
}

type timeIndexEntry struct {
	ts  int64  // largest batch maxTimestamp seen so far in the segment
	rel uint32 // relative first offset of the batch that reached ts
}

// segment is one .log file with its in-memory sparse indexes. Fields other
// than refs are guarded by the owning partition's lock.
type segment struct {
	base    int64
	dir     string
	fs      vfs.FS
	log     vfs.File
	size    int64 // bytes of whole batches written
	next    int64 // offset after the last batch
	index   []indexEntry
	tindex  []timeIndexEntry
	maxTs   int64 // largest batch maxTimestamp, -1 when empty
	maxTsAt int64 // last offset of the batch holding maxTs
	// sinceIndex counts bytes appended since the last index entry.
	sinceIndex int64
	createdMs  int64 // for segment.ms
	// tail holds the headers of the last batches noted, oldest first
	// from tailNext: fetches read at the log end, and every header
	// found here is a pread saved (one per partition read otherwise).
	tail      [tailHeaders]tailEntry
	tailNext  int
	tailLen   int
	refs      atomic.Int32
	closeOnce sync.Once
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix))
}

// acquire takes a reference; the partition holds one while the segment is
// live, each FileRange and in-flight flush holds one more.
func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.closeOnce.Do(func() { s.log.Close() })
	}
}

// tailHeaders is how many of a segment's last batch headers stay in
// memory.
const tailHeaders = 16

type tailEntry struct {
	pos int64
	h   batchHeader
}

// tailAt returns the i-th newest remembered header (0: the last noted).
func (s *segment) tailAt(i int) tailEntry {
	return s.tail[(s.tailNext-1-i+2*tailHeaders)%tailHeaders]
}

// cachedHeader returns the remembered header of the batch at pos.
// Positions grow with appends, so the walk stops at the first older one.
func (s *segment) cachedHeader(pos int64) (batchHeader, bool) {
	for i := range s.tailLen {
		e := s.tailAt(i)
		if e.pos == pos {
			return e.h, true
		}
		if e.pos < pos {
			break
		}
	}
	return batchHeader{}, false
}

// tailStart returns the position of the newest remembered batch whose
// base offset is at or below offset: the batch holding offset (or the
// first after it) is there or later, so a read can start there instead
// of at the sparse index entry.
func (s *segment) tailStart(offset int64) (int64, bool) {
	for i := range s.tailLen {
		if e := s.tailAt(i); e.h.baseOffset <= offset {
			return e.pos, true
		}
	}
	return 0, false
}

// forgetTail drops the remembered headers: every truncation of a
// segment calls it, since later appends reuse the positions.
func (s *segment) forgetTail() { s.tailNext, s.tailLen = 0, 0 }

// noteBatch updates the in-memory indexes for a batch written at pos.
// indexInterval 0 indexes every batch.
func (s *segment) noteBatch(h batchHeader, pos int64, indexInterval int32) {
	if len(s.index) == 0 || s.sinceIndex >= int64(indexInterval) {
		s.index = append(s.index, indexEntry{rel: uint32(h.baseOffset - s.base), pos: uint32(pos)})
		s.sinceIndex = 0
		if len(s.tindex) == 0 || h.maxTimestamp > s.tindex[len(s.tindex)-1].ts {
			s.tindex = append(s.tindex, timeIndexEntry{ts: max(h.maxTimestamp, s.maxTs), rel: uint32(h.baseOffset - s.base)})
		}
	}
	s.sinceIndex += int64(h.size)
	if h.maxTimestamp > s.maxTs {
		s.maxTs, s.maxTsAt = h.maxTimestamp, h.lastOffset()
	}
	s.size = pos + int64(h.size)
	s.next = h.lastOffset() + 1
	s.tail[s.tailNext] = tailEntry{pos: pos, h: h}
	s.tailNext = (s.tailNext + 1) % tailHeaders
	s.tailLen = min(s.tailLen+1, tailHeaders)
}

// lookup returns the position of the last indexed batch starting at or
// before offset.
func (s *segment) lookup(offset int64) int64 {
	rel := offset - s.base
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(s.index[i-1].pos)
}

// lookupPos returns the position of the last indexed batch starting at or
// before pos.
func (s *segment) lookupPos(pos int64) int64 {
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].pos) > pos })
	if i == 0 {
		return 0
	}
	return int64(s.index[i-1].pos)
}

// readHeader reads the header of the batch at pos without validating it.
func (s *segment) readHeader(pos int64) (batchHeader, error) {
	if h, ok := s.cachedHeader(pos); ok {
		return h, nil
	}
	var buf [records.HeaderSize]byte
	if _, err := s.log.ReadAt(buf[:], pos); err != nil {
		return batchHeader{}, fmt.Errorf("%w: read %s at %d: %v", ErrStorage, s.path(logSuffix), pos, err)
	}
	return parseHeader(buf[:]), nil
}

// restoreRollClock sets createdMs of a reopened non-empty segment from its
// first batch's max timestamp, as Kafka rolls by the first record's time:
// otherwise every restart would restart the segment.ms clock and a broker
// restarted more often than segment.ms would never roll by time. A
// timestamp in the future (client clock) keeps now.
func (s *segment) restoreRollClock(nowMs int64) error {
	if s.size < records.HeaderSize {
		return nil
	}
	h, err := s.readHeader(0)
	if err != nil {
		return err
	}
	if h.maxTimestamp >= 0 && h.maxTimestamp < nowMs {
		s.createdMs = h.maxTimestamp
	}
	return nil
}

// writeIndexes persists both indexes (atomically) so a clean restart need
// not rescan. The time index gets a final entry for the segment's maximum.
func (s *segment) writeIndexes() error {
	ib, tb := s.indexBytes()
	if err := vfs.ReplaceFile(s.fs, s.path(indexSuffix), ib, 0o644); err != nil {
		return err
	}
	return vfs.ReplaceFile(s.fs, s.path(timeIndexSuffix), tb, 0o644)
}

// indexBytes encodes the in-memory indexes in the .index and .timeindex
// formats (doc.go); the time index ends with the segment's largest
// timestamp. Lock of the owning partition must be held.
func (s *segment) indexBytes() (ib, tb []byte) {
	tindex := s.tindex
	if s.maxTs >= 0 && (len(tindex) == 0 || tindex[len(tindex)-1].ts < s.maxTs) {
		tindex = append(tindex[:len(tindex):len(tindex)], timeIndexEntry{ts: s.maxTs, rel: uint32(s.maxTsAt - s.base)})
	}
	ib = make([]byte, 0, len(s.index)*indexEntrySize)
	for _, e := range s.index {
		ib = be.AppendUint32(ib, e.rel)
		ib = be.AppendUint32(ib, e.pos)
	}
	tb = make([]byte, 0, len(tindex)*timeIndexEntSize)
	for _, e := range tindex {
		tb = be.AppendUint64(tb, uint64(e.ts))
		tb = be.AppendUint32(tb, e.rel)
	}
	return ib, tb
}

// loadIndexes reads the index files and checks them against the log size.
// It reports false when they are missing or implausible.
func (s *segment) loadIndexes() bool {
	ib, err1 := vfs.ReadFile(s.fs, s.path(indexSuffix), 0)
	tb, err2 := vfs.ReadFile(s.fs, s.path(timeIndexSuffix), 0)
	if err1 != nil || err2 != nil || len(ib)%indexEntrySize != 0 || len(tb)%timeIndexEntSize != 0 {
		return false
	}
	var idx []indexEntry
	for i := 0; i < len(ib); i += indexEntrySize {
		e := indexEntry{rel: be.Uint32(ib[i:]), pos: be.Uint32(ib[i+4:])}
		if int64(e.pos) >= s.size && s.size > 0 || len(idx) > 0 && (e.rel <= idx[len(idx)-1].rel || e.pos <= idx[len(idx)-1].pos) {
			return false
		}
		idx = append(idx, e)
	}
	// Entries are written only when the timestamp grows, at offsets that
	// never go back and (for a sealed segment, whose end is known) stay
	// inside it; anything else is a stale or damaged file, and trusting it
	// would answer ListOffsets by timestamp and time retention wrongly.
	var tidx []timeIndexEntry
	for i := 0; i < len(tb); i += timeIndexEntSize {
		e := timeIndexEntry{ts: int64(be.Uint64(tb[i:])), rel: be.Uint32(tb[i+8:])}
		if n := len(tidx); n > 0 && (e.ts <= tidx[n-1].ts || e.rel < tidx[n-1].rel) ||
			s.next > s.base && int64(e.rel) >= s.next-s.base || e.ts < 0 {
			return false
		}
		tidx = append(tidx, e)
	}
	s.index, s.tindex = idx, tidx
	if n := len(tidx); n > 0 {
		s.maxTs, s.maxTsAt = tidx[n-1].ts, s.base+int64(tidx[n-1].rel)
	}
	return true
}

// scan walks the batch headers from pos to the end of the file, rebuilding
// the indexes on the way. With validate it reads whole batches and checks
// them; it stops at the first bad batch and returns its position and why.
func (s *segment) scan(pos, fileSize int64, validate bool, indexInterval int32) (badPos int64, why error) {
	var buf []byte
	for pos < fileSize {
		if fileSize-pos < records.HeaderSize {
			return pos, fmt.Errorf("%w: %d trailing bytes", ErrCorruptMessage, fileSize-pos)
		}
		h, err := s.readHeader(pos)
		if err != nil {
			return pos, err
		}
		if h.size < records.HeaderSize || int64(h.size) > fileSize-pos {
			return pos, fmt.Errorf("%w: batch length %d with %d bytes left", ErrCorruptMessage, h.size, fileSize-pos)
		}
		// Offsets only grow (baseOffset is not covered by the CRC); gaps
		// are batches compaction removed, but a segment never spans more
		// offsets than its index can address (appends roll first).
		if h.baseOffset < s.next || h.lastOffsetDelta < 0 || h.lastOffset()-s.base > math.MaxUint32 {
			return pos, fmt.Errorf("%w: batch offset %d, expected %d", ErrCorruptMessage, h.baseOffset, s.next)
		}
		if validate {
			if cap(buf) < int(h.size) {
				buf = make([]byte, h.size)
			}
			buf = buf[:h.size]
			if _, err := s.log.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
				return pos, fmt.Errorf("%w: %v", ErrStorage, err)
			}
			if _, err := checkBatch(buf, 0); err != nil {
				return pos, err
			}
		}
		s.noteBatch(h, pos, indexInterval)
		pos += int64(h.size)
	}
	return -1, nil
}

// listSegments returns the base offsets of the .log files in dir, sorted,
// and removes leftovers of interrupted atomic writes.
func listSegments(fs vfs.FS, dir string) ([]int64, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, n := range names {
		if filepath.Ext(n) == tmpSuffix {
			fs.Remove(filepath.Join(dir, n))
			continue
		}
		if filepath.Ext(n) != logSuffix || len(n) != offsetNameDigits+len(logSuffix) {
			continue
		}
		base, err := strconv.ParseInt(n[:offsetNameDigits], 10, 64)
		if err != nil {
			continue
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// fileRange implements FileRange over a segment.
type fileRange struct {
	seg      *segment
	pos      int64
	n        int32
	released atomic.Bool
}

func (r *fileRange) Fd() int {
	if r.seg == nil {
		return -1
	}
	return r.seg.log.Fd()
}
func (r *fileRange) Pos() int64 { return r.pos }
func (r *fileRange) Len() int32 { return r.n }
func (r *fileRange) ReadAt(p []byte, off int64) (int, error) {
	if r.seg == nil {
		return 0, io.EOF
	}
	return r.seg.log.ReadAt(p, off)
}
func (r *fileRange) Release() {
	if r.seg != nil && r.released.CompareAndSwap(false, true) {
		r.seg.release()
	}
}

var emptyRange FileRange = &fileRange{}
