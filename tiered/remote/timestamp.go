package remote

import (
	"context"
	"fmt"
	"sort"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/records"
)

// maxBatchRead bounds the batch OffsetForTimestamp reads into memory to
// find the exact record; a larger one answers with its base offset.
const maxBatchRead = 64 << 20

// OffsetForTimestamp finds, in the remote tier, the first offset whose
// batch has a timestamp at or after ts (ListOffsets by time below the
// local log start); found is false when every remote batch is older.
// Like the engine's local lookup it answers with the first record of that
// batch stamped ts or later, and its timestamp.
func (r *Reader) OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (offset, timestamp int64, found bool, err error) {
	img := r.image()
	id := metadata.UUID(topicID)
	// Walk the readable segments in offset order (SegmentFor resolves
	// overlaps between uploads the way reads do); the image is in
	// memory, so this is cheap even for many segments.
	from := img.RemoteLogStart(id, partition)
	if from < 0 {
		return -1, -1, false, nil
	}
	for {
		seg, ok := img.SegmentFor(id, partition, from)
		if !ok {
			return -1, -1, false, nil
		}
		if seg.MaxTimestamp >= ts {
			off, at, ok, err := r.timestampIn(ctx, &seg, from, ts)
			if err != nil || ok {
				return off, at, ok, err
			}
		}
		from = seg.NextOffset
	}
}

// timestampIn searches seg from offset from on.
func (r *Reader) timestampIn(ctx context.Context, seg *rlm.Segment, from, ts int64) (int64, int64, bool, error) {
	key := rlm.ObjectKey(seg, "log")
	ix, err := r.offsetIndexOf(ctx, seg, from)
	if err != nil {
		return -1, -1, false, err
	}
	tix, err := r.timeIndexOf(ctx, seg, from)
	if err != nil {
		return -1, -1, false, err
	}
	// Batches up to the last time index entry below ts are all older
	// than ts: start at that entry's batch.
	pos := ix.lookup(from)
	if j := sort.Search(len(tix), func(j int) bool { return tix[j].ts >= ts }); j > 0 {
		pos = max(pos, ix.lookup(tix[j-1].offset))
	}
	for pos < seg.SizeBytes {
		h, err := r.header(ctx, seg, key, pos, from)
		if err != nil {
			return -1, -1, false, err
		}
		if h.LastOffset() >= from && h.MaxTimestamp >= ts && h.RecordCount != 0 {
			if h.Size() > maxBatchRead {
				return max(h.BaseOffset, from), h.MaxTimestamp, true, nil
			}
			b := make([]byte, h.Size())
			if _, err := r.cache.ReadAt(ctx, key, seg.SizeBytes, b, pos); err != nil {
				return -1, -1, false, r.objectError(seg, key, from, err)
			}
			// Damaged bytes stop here rather than in the record parser
			// or a decompressor.
			if bt, err := records.Parse(b); err != nil || !bt.CRCValid() {
				return -1, -1, false, fmt.Errorf("%w: object %s corrupt: batch at byte %d fails its CRC", ErrStorage, key, pos)
			}
			off, at, err := engine.FirstRecordAtOrAfter(b, ts)
			if err != nil {
				return -1, -1, false, fmt.Errorf("%w: object %s corrupt: batch at byte %d: %v", ErrStorage, key, pos, err)
			}
			return max(off, from), at, true, nil
		}
		pos += h.Size()
	}
	return -1, -1, false, nil
}
