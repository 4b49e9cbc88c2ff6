// Package remote is the remote tier's read side: consumer fetches below
// the local log start, served from the object store through the chunk
// cache (and sent with sendfile from the cache files), timestamp lookups
// in the remote tier, and the restart point a follower uses when the
// leader answers OFFSET_MOVED_TO_TIERED_STORAGE.
//
// A read finds the committed segment holding the offset in the metadata
// image, the batch position with the segment's "index" object (read once,
// kept parsed in a bounded LRU) and the batch headers (read through the
// cache, across chunk boundaries), and returns a range of a cache chunk
// file: batches from the one holding the offset up to maxBytes, cut at a
// batch boundary, never past the end of the chunk (a whole first batch
// that straddles chunks is copied into one range with GetSpan). Every
// length read from an object is checked against the segment before use;
// damaged bytes give ErrStorage naming the object, never a panic.
package remote

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

var (
	// ErrOffsetGone: the offset is no longer in the remote tier (remote
	// retention deleted it after the fetch was routed here); netpath
	// answers OFFSET_OUT_OF_RANGE so the consumer resets.
	ErrOffsetGone = errors.New("offset deleted from the remote tier by retention")
	// ErrStorage: the object store is unavailable, or an object is
	// missing or corrupt although the metadata lists it; netpath answers
	// KAFKA_STORAGE_ERROR (retriable) and the error text says which.
	ErrStorage = errors.New("remote tier read failed")
)

// Bounds of the in-memory caches of decoded small objects.
const (
	indexCacheBytes    = 32 << 20
	snapshotCacheBytes = 16 << 20
)

// Reader reads the remote tier. Safe for concurrent use.
type Reader struct {
	image func() *metadata.Image
	cache *chunkcache.Cache
	store objstore.Store

	indexes *lru[any]      // []indexEntry or []timeEntry by object key
	snaps   *lru[snapTxns] // decoded "producers" objects by object key
	// abortWalk bounds abortedTxns' walk (maxAbortWalk; tests lower it).
	abortWalk int
}

// NewReader builds a reader over the committed metadata (image), the
// chunk cache and the store (for the small objects: producer snapshots,
// indexes).
func NewReader(image func() *metadata.Image, cache *chunkcache.Cache, store objstore.Store) *Reader {
	return &Reader{
		image: image, cache: cache, store: store,
		indexes: newLRU[any](indexCacheBytes),
		snaps:   newLRU[snapTxns](snapshotCacheBytes),

		abortWalk: maxAbortWalk,
	}
}

// noData is the empty ReadResult.Data.
type noData struct{}

func (noData) Fd() int                           { return -1 }
func (noData) Pos() int64                        { return 0 }
func (noData) Len() int32                        { return 0 }
func (noData) ReadAt([]byte, int64) (int, error) { return 0, nil }
func (noData) Release()                          {}

// Read serves a consumer fetch of topicID/partition at offset, below the
// local log start (the engine answered *engine.OffsetRemoteError). It
// returns batches of the one remote segment holding offset, at most
// maxBytes unless minOneBatch needs a whole first batch; Data is released
// by the caller. readCommitted also returns the aborted transactions
// overlapping what is returned. LastStableOffset/HighWatermark/
// LogStartOffset are -1 here: the caller fills them from the partition's
// engine view.
//
// The aborted transactions are those whose abort marker lies in the
// remote tier; the caller adds those of the local log (whose marker is
// at or above the local log start). See abortedTxns for the bound.
func (r *Reader) Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int32, minOneBatch, readCommitted bool) (engine.ReadResult, []producerstate.AbortedTxn, error) {
	res := engine.ReadResult{Data: noData{}, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
	seg, err := r.segmentFor(topicID, partition, offset)
	if err != nil {
		return res, nil, err
	}
	data, err := r.readSegment(ctx, &seg, offset, maxBytes, minOneBatch)
	if err != nil {
		return res, nil, err
	}
	var aborted []producerstate.AbortedTxn
	if readCommitted && data.Len() > 0 {
		// seg.NextOffset bounds the returned data: listing a transaction
		// that starts after the data ends is harmless (the consumer
		// only drops records inside an aborted range).
		if aborted, err = r.abortedTxns(ctx, &seg, offset, seg.NextOffset); err != nil {
			data.Release()
			return res, nil, err
		}
	}
	res.Data = data
	return res, aborted, nil
}

// segmentFor finds the committed segment holding offset.
func (r *Reader) segmentFor(topicID [16]byte, partition int32, offset int64) (rlm.Segment, error) {
	img := r.image()
	seg, ok := img.SegmentFor(metadata.UUID(topicID), partition, offset)
	if ok {
		return seg, nil
	}
	if start := img.RemoteLogStart(metadata.UUID(topicID), partition); offset < start {
		return seg, fmt.Errorf("%w: offset %d of partition %d is below the remote log start %d", ErrOffsetGone, offset, partition, start)
	}
	return seg, fmt.Errorf("%w: no committed remote segment holds offset %d of partition %d", ErrStorage, offset, partition)
}

// objectError turns a store or cache failure reading key (for offset)
// into ErrOffsetGone or ErrStorage, keeping the cause for errors.Is.
func (r *Reader) objectError(seg *rlm.Segment, key string, offset int64, err error) error {
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		// Remote retention may have deleted it after the segment was
		// looked up: then the offset is simply gone.
		if start := r.image().RemoteLogStart(metadata.UUID(seg.TopicID), seg.Partition); offset < start {
			return fmt.Errorf("%w: offset %d (object %s deleted, remote log start now %d): %w", ErrOffsetGone, offset, key, start, err)
		}
		return fmt.Errorf("%w: object %s missing although the metadata lists it: %w", ErrStorage, key, err)
	case errors.Is(err, objstore.ErrCorrupt), errors.Is(err, chunkcache.ErrInvalidRange):
		return fmt.Errorf("%w: object %s corrupt: %w", ErrStorage, key, err)
	case errors.Is(err, objstore.ErrUnavailable):
		return fmt.Errorf("%w: object store unavailable reading %s: %w", ErrStorage, key, err)
	}
	return fmt.Errorf("%w: reading %s: %w", ErrStorage, key, err)
}

// corrupt is the error for bytes of key that fail a check.
func corrupt(key string, format string, args ...any) error {
	return fmt.Errorf("%w: object %s corrupt: %s", ErrStorage, key, fmt.Sprintf(format, args...))
}

// header reads and checks the batch header at pos of the segment's log
// object: magic 2, a length inside the object, offsets inside the
// segment.
func (r *Reader) header(ctx context.Context, seg *rlm.Segment, key string, pos, offset int64) (records.Header, error) {
	if pos < 0 || pos+records.HeaderSize > seg.SizeBytes {
		return records.Header{}, corrupt(key, "batch header at byte %d past the end (%d bytes)", pos, seg.SizeBytes)
	}
	var buf [records.HeaderSize]byte
	if _, err := r.cache.ReadAt(ctx, key, seg.SizeBytes, buf[:], pos); err != nil {
		return records.Header{}, r.objectError(seg, key, offset, err)
	}
	h, err := records.ParseHeader(buf[:])
	if err != nil {
		return h, corrupt(key, "batch at byte %d: %v", pos, err)
	}
	switch size := h.Size(); {
	case h.Magic != records.Magic:
		return h, corrupt(key, "batch at byte %d has magic %d", pos, h.Magic)
	case size < records.HeaderSize || pos+size > seg.SizeBytes || size > math.MaxInt32:
		return h, corrupt(key, "batch at byte %d of %d bytes, object has %d", pos, size, seg.SizeBytes)
	case h.LastOffsetDelta < 0 || h.BaseOffset < seg.BaseOffset || h.LastOffset() >= seg.NextOffset:
		return h, corrupt(key, "batch at byte %d holds offsets [%d, %d], segment [%d, %d)", pos, h.BaseOffset, h.LastOffset(), seg.BaseOffset, seg.NextOffset)
	}
	return h, nil
}

// firstBatch finds the batch holding offset (or the first after it), as
// the engine's readLocked does: an emptied batch (no records) is skipped
// when a batch with records follows, and returned when none does.
func (r *Reader) firstBatch(ctx context.Context, seg *rlm.Segment, key string, ix offsetIndex, offset int64) (int64, records.Header, error) {
	pos := ix.lookup(offset)
	emptyPos := int64(-1)
	var emptyH records.Header
	for pos < seg.SizeBytes {
		h, err := r.header(ctx, seg, key, pos, offset)
		if err != nil {
			return 0, h, err
		}
		if h.LastOffset() >= offset {
			if h.RecordCount != 0 {
				return pos, h, nil
			}
			if emptyPos < 0 {
				emptyPos, emptyH = pos, h
			}
		}
		pos += h.Size()
	}
	if emptyPos >= 0 {
		return emptyPos, emptyH, nil
	}
	return 0, records.Header{}, corrupt(key, "log ends before offset %d although the segment ends at %d", offset, seg.NextOffset)
}

// readSegment returns the batches of seg from the one holding offset.
func (r *Reader) readSegment(ctx context.Context, seg *rlm.Segment, offset int64, maxBytes int32, minOneBatch bool) (engine.FileRange, error) {
	key := rlm.ObjectKey(seg, "log")
	ix, err := r.offsetIndexOf(ctx, seg, offset)
	if err != nil {
		return nil, err
	}
	pos, first, err := r.firstBatch(ctx, seg, key, ix, offset)
	if err != nil {
		return nil, err
	}
	want := min(seg.SizeBytes-pos, int64(max(maxBytes, 0)))
	firstSize := first.Size()
	if want < firstSize {
		if !minOneBatch {
			return noData{}, nil
		}
		return r.span(ctx, seg, key, pos, firstSize, offset)
	}
	rng, err := r.cache.Get(ctx, key, seg.SizeBytes, pos, int32(want))
	if err != nil {
		return nil, r.objectError(seg, key, offset, err)
	}
	end := pos + int64(rng.Len()) // want, or the end of pos's chunk
	if end == seg.SizeBytes {
		return rng, nil
	}
	// Cut at the last batch boundary at or below end: jump with the
	// index, then walk the few headers up to it.
	at := max(ix.lookupPos(end), pos)
	for at < end {
		h, err := r.header(ctx, seg, key, at, offset)
		if err != nil {
			rng.Release()
			return nil, err
		}
		if at+h.Size() > end {
			break
		}
		at += h.Size()
	}
	switch {
	case at == end:
		return rng, nil
	case at > pos:
		rng.Release()
		rng, err = r.cache.Get(ctx, key, seg.SizeBytes, pos, int32(at-pos))
		if err != nil {
			return nil, r.objectError(seg, key, offset, err)
		}
		if int64(rng.Len()) != at-pos {
			rng.Release()
			return nil, fmt.Errorf("%w: cache returned %d bytes of %s at %d, want %d", ErrStorage, rng.Len(), key, pos, at-pos)
		}
		return rng, nil
	}
	// The first batch fits maxBytes but crosses the chunk's end.
	rng.Release()
	return r.span(ctx, seg, key, pos, firstSize, offset)
}

// span returns exactly [pos, pos+n) of the log object as one range.
func (r *Reader) span(ctx context.Context, seg *rlm.Segment, key string, pos, n, offset int64) (engine.FileRange, error) {
	rng, err := r.cache.GetSpan(ctx, key, seg.SizeBytes, pos, int32(n))
	if err != nil {
		return nil, r.objectError(seg, key, offset, err)
	}
	return rng, nil
}
