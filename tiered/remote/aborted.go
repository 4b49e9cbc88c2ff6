package remote

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/producerstate"
)

// maxAbortWalk bounds how many later segments abortedTxns reads to find
// the outcome of transactions still open at the end of the segment read.
// A transaction lasts at most transaction.max.timeout.ms (15 min by
// default), so its marker is that much log later at most: 64 segments
// cover it unless segments roll more often than every ~15 s. Past the
// bound the read fails (KAFKA_STORAGE_ERROR) rather than risk showing a
// read_committed consumer aborted records.
const maxAbortWalk = 64

// snapTxns is a decoded "producers" object, with its size for the LRU.
type snapTxns struct {
	producerstate.SnapshotTxns
	size int64
}

// snapshotOf returns the transactions of seg's producer snapshot (the
// state at seg.NextOffset).
func (r *Reader) snapshotOf(ctx context.Context, seg *rlm.Segment, offset int64) (snapTxns, error) {
	key := rlm.ObjectKey(seg, "producers")
	if st, ok := r.snaps.get(key); ok {
		return st, nil
	}
	b, err := r.readObject(ctx, key, maxSmallObject)
	if err != nil {
		return snapTxns{}, r.objectError(seg, key, offset, err)
	}
	txns, err := producerstate.DecodeSnapshotTxns(b)
	if err != nil {
		return snapTxns{}, fmt.Errorf("%w: object %s corrupt: %w", ErrStorage, key, err)
	}
	st := snapTxns{SnapshotTxns: txns, size: int64(len(txns.Ongoing))*48 + int64(len(txns.Aborted))*32 + 64}
	r.snaps.put(key, st, st.size)
	return st, nil
}

// abortedTxns lists the aborted transactions overlapping [offset, upper)
// (upper <= seg.NextOffset) whose abort marker is in the remote tier.
//
// seg's snapshot holds the transactions aborted with a marker below
// seg.NextOffset and the ones still open there. An open one is followed
// through the snapshots of the next segments until one shows it decided:
// its marker lies in that segment, and that snapshot lists it if it was
// aborted. Uploads stop at the last stable offset, so every such
// transaction was decided before seg was uploaded; a marker past the
// remote tier's end is in the local log, whose aborted transactions the
// caller adds (engine.Partition.LocalAbortedTxns).
func (r *Reader) abortedTxns(ctx context.Context, seg *rlm.Segment, offset, upper int64) ([]producerstate.AbortedTxn, error) {
	st, err := r.snapshotOf(ctx, seg, offset)
	if err != nil {
		return nil, err
	}
	var out []producerstate.AbortedTxn
	for _, a := range st.Aborted {
		if a.LastOffset >= offset && a.FirstOffset < upper {
			out = append(out, a)
		}
	}
	pending := make(map[int64]int64)
	for pid, first := range st.Ongoing {
		if first < upper {
			pending[pid] = first
		}
	}
	img := r.image()
	next := seg.NextOffset
	for steps := 0; len(pending) > 0; steps++ {
		later, ok := img.SegmentFor(metadata.UUID(seg.TopicID), seg.Partition, next)
		if !ok {
			break // the rest is in the local log
		}
		if steps == r.abortWalk {
			return nil, fmt.Errorf("%w: %d transactions open at offset %d still undecided after %d later remote segments (at offset %d)", ErrStorage, len(pending), seg.NextOffset, r.abortWalk, next)
		}
		lst, err := r.snapshotOf(ctx, &later, offset)
		if err != nil {
			return nil, err
		}
		for pid, first := range pending {
			if f, open := lst.Ongoing[pid]; open && f == first {
				continue
			}
			delete(pending, pid) // decided inside later
			for _, a := range lst.Aborted {
				if a.ProducerID == pid && a.FirstOffset == first {
					out = append(out, a)
					break
				}
			}
		}
		next = later.NextOffset
	}
	slices.SortFunc(out, func(a, b producerstate.AbortedTxn) int {
		if a.LastOffset != b.LastOffset {
			return cmp.Compare(a.LastOffset, b.LastOffset)
		}
		return cmp.Compare(a.ProducerID, b.ProducerID)
	})
	return slices.Compact(out), nil
}
