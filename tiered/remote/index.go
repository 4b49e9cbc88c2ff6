package remote

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// The segment's "index" and "timeindex" objects are the engine's .index
// and .timeindex files (formats in engine/doc.go). They are small (one
// entry per index.interval.bytes of log), so each is read whole from the
// store once, checked, and kept parsed in a bounded LRU.

const (
	indexEntrySize     = 8
	timeIndexEntrySize = 12
	// maxSmallObject bounds what is read into memory for one index or
	// producer snapshot: far above a real one (a 1 GiB segment indexed
	// every 4 KiB has a 2 MiB index), so only damage reaches it.
	maxSmallObject = 64 << 20
)

// indexEntry maps an offset to the byte position of the batch starting
// there.
type indexEntry struct {
	offset int64
	pos    int64
}

type timeEntry struct {
	ts     int64
	offset int64
}

// offsetIndex is a parsed "index" object: entries strictly increasing in
// both fields, every position inside the log object.
type offsetIndex []indexEntry

// lookup returns the position of the last entry at or below offset (0
// when none): a batch start at or before the batch holding offset.
func (ix offsetIndex) lookup(offset int64) int64 {
	i := sort.Search(len(ix), func(i int) bool { return ix[i].offset > offset })
	if i == 0 {
		return 0
	}
	return ix[i-1].pos
}

// lookupPos returns the greatest indexed position at or below pos (0
// when none): a batch start.
func (ix offsetIndex) lookupPos(pos int64) int64 {
	i := sort.Search(len(ix), func(i int) bool { return ix[i].pos > pos })
	if i == 0 {
		return 0
	}
	return ix[i-1].pos
}

// maxObjectBytes is the largest plausible size of a segment's small
// object: every batch is at least a header long, so an index has at most
// one entry per HeaderSize bytes of log.
func maxObjectBytes(seg *rlm.Segment, entrySize int64) int64 {
	return min(maxSmallObject, (seg.SizeBytes/records.HeaderSize+2)*entrySize)
}

// readObject reads a whole small object of at most limit bytes.
func (r *Reader) readObject(ctx context.Context, key string, limit int64) ([]byte, error) {
	rc, err := r.store.GetRange(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", objstore.ErrCorrupt, limit)
	}
	return b, nil
}

// offsetIndexOf returns the segment's parsed offset index; offset is the
// one being read, for the error of a missing object.
func (r *Reader) offsetIndexOf(ctx context.Context, seg *rlm.Segment, offset int64) (offsetIndex, error) {
	return loadIndex(r, ctx, seg, offset, "index", indexEntrySize, parseOffsetIndex)
}

// timeIndexOf returns the segment's parsed time index.
func (r *Reader) timeIndexOf(ctx context.Context, seg *rlm.Segment, offset int64) ([]timeEntry, error) {
	return loadIndex(r, ctx, seg, offset, "timeindex", timeIndexEntrySize, parseTimeIndex)
}

// loadIndex returns the parsed index object kind of seg, from the LRU or
// read whole from the store and checked by parse.
func loadIndex[E any](r *Reader, ctx context.Context, seg *rlm.Segment, offset int64, kind string, entrySize int64, parse func([]byte, *rlm.Segment) ([]E, error)) ([]E, error) {
	key := rlm.ObjectKey(seg, kind)
	if ix, ok := r.indexes.get(key); ok {
		return ix.([]E), nil
	}
	b, err := r.readObject(ctx, key, maxObjectBytes(seg, entrySize))
	if err != nil {
		return nil, r.objectError(seg, key, offset, err)
	}
	ix, err := parse(b, seg)
	if err != nil {
		return nil, fmt.Errorf("%w: object %s corrupt: %v", ErrStorage, key, err)
	}
	r.indexes.put(key, ix, int64(len(ix))*16+64)
	return ix, nil
}

func parseOffsetIndex(b []byte, seg *rlm.Segment) ([]indexEntry, error) {
	if len(b)%indexEntrySize != 0 {
		return nil, fmt.Errorf("%d bytes, not a multiple of %d", len(b), indexEntrySize)
	}
	ix := make([]indexEntry, 0, len(b)/indexEntrySize)
	for i := 0; i < len(b); i += indexEntrySize {
		e := indexEntry{
			offset: seg.BaseOffset + int64(binary.BigEndian.Uint32(b[i:])),
			pos:    int64(binary.BigEndian.Uint32(b[i+4:])),
		}
		if e.offset >= seg.NextOffset || e.pos+records.HeaderSize > seg.SizeBytes {
			return nil, fmt.Errorf("entry %d (offset %d, byte %d) outside the segment [%d, %d) of %d bytes", i/indexEntrySize, e.offset, e.pos, seg.BaseOffset, seg.NextOffset, seg.SizeBytes)
		}
		if n := len(ix); n > 0 && (e.offset <= ix[n-1].offset || e.pos <= ix[n-1].pos) {
			return nil, fmt.Errorf("entry %d (offset %d, byte %d) not above the one before", i/indexEntrySize, e.offset, e.pos)
		}
		ix = append(ix, e)
	}
	return ix, nil
}

func parseTimeIndex(b []byte, seg *rlm.Segment) ([]timeEntry, error) {
	if len(b)%timeIndexEntrySize != 0 {
		return nil, fmt.Errorf("%d bytes, not a multiple of %d", len(b), timeIndexEntrySize)
	}
	ix := make([]timeEntry, 0, len(b)/timeIndexEntrySize)
	for i := 0; i < len(b); i += timeIndexEntrySize {
		e := timeEntry{
			ts:     int64(binary.BigEndian.Uint64(b[i:])),
			offset: seg.BaseOffset + int64(binary.BigEndian.Uint32(b[i+8:])),
		}
		if e.offset >= seg.NextOffset {
			return nil, fmt.Errorf("entry %d (offset %d) outside the segment [%d, %d)", i/timeIndexEntrySize, e.offset, seg.BaseOffset, seg.NextOffset)
		}
		// The final entry repeats the maximum, so equal is allowed.
		if n := len(ix); n > 0 && (e.ts < ix[n-1].ts || e.offset < ix[n-1].offset) {
			return nil, fmt.Errorf("entry %d (timestamp %d, offset %d) below the one before", i/timeIndexEntrySize, e.ts, e.offset)
		}
		ix = append(ix, e)
	}
	return ix, nil
}
