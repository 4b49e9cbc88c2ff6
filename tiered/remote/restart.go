package remote

import (
	"context"
	"fmt"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
)

// maxRestartObject bounds the "producers" and "epochs" objects a restart
// reads into memory: both are small (a few producers, a few entries per
// leader change), so anything larger is damage, not data. A variable so
// tests can lower it.
var maxRestartObject = 64 << 20

// RestartPoint returns where a follower whose fetch offset the leader
// answered with OFFSET_MOVED_TO_TIERED_STORAGE restarts its log: the
// NextOffset of the last committed remote segment, with that segment's
// producer snapshot (engine producerstate format, the state at
// NextOffset) and the epoch history up to it (the "epochs" object,
// rlm.DecodeEpochs).
//
// Errors wrap ErrStorage: nothing tiered yet, an unreachable store, a
// missing object, or one that does not decode (or whose snapshot is not
// of NextOffset). The follower backs off and asks again.
func (r *Reader) RestartPoint(ctx context.Context, topicID [16]byte, partition int32) (offset int64, producerSnapshot []byte, epochs []epochcache.Entry, err error) {
	im := r.image()
	if im == nil {
		return 0, nil, nil, fmt.Errorf("%w: restart point of partition %d: no metadata yet", ErrStorage, partition)
	}
	// The segment ending at the remote end: the one holding its last
	// offset (SegmentFor prefers the newer upload where ranges overlap,
	// and finds none when retention expired everything).
	tid := metadata.UUID(topicID)
	seg, ok := im.SegmentFor(tid, partition, im.RemoteEnd(tid, partition)-1)
	if !ok {
		return 0, nil, nil, fmt.Errorf("%w: restart point of partition %d of topic %x: nothing tiered", ErrStorage, partition, topicID)
	}
	snap, err := r.readSmall(ctx, rlm.ObjectKey(&seg, "producers"))
	if err != nil {
		return 0, nil, nil, err
	}
	if err := checkSnapshot(snap, seg.NextOffset); err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %s: %v", ErrStorage, rlm.ObjectKey(&seg, "producers"), err)
	}
	eb, err := r.readSmall(ctx, rlm.ObjectKey(&seg, "epochs"))
	if err != nil {
		return 0, nil, nil, err
	}
	if epochs, err = rlm.DecodeEpochs(eb); err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %s: %v", ErrStorage, rlm.ObjectKey(&seg, "epochs"), err)
	}
	return seg.NextOffset, snap, epochs, nil
}

// readSmall reads a whole object of at most maxRestartObject bytes
// (readObject), every failure wrapping ErrStorage and naming the key.
func (r *Reader) readSmall(ctx context.Context, key string) ([]byte, error) {
	b, err := r.readObject(ctx, key, int64(maxRestartObject))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrStorage, key, err)
	}
	return b, nil
}

// checkSnapshot decodes a producer snapshot (CRC, bounds) and checks it is
// the state at offset, so a damaged object is reported here, naming its
// key, rather than by the follower's engine.
func checkSnapshot(b []byte, offset int64) error {
	st, err := producerstate.New(producerstate.DefaultConfig())
	if err != nil {
		return err
	}
	if err := st.Restore(b); err != nil {
		return err
	}
	if end := st.MapEndOffset(); end != offset {
		return fmt.Errorf("producer snapshot of offset %d, segment ends at %d", end, offset)
	}
	return nil
}
