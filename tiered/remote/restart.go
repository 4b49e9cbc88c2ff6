package remote

import (
	"context"

	"github.com/ringlog/ringlog/tiered/rlm"
)

// RestartPoint returns where a follower whose fetch offset the leader
// answered with OFFSET_MOVED_TO_TIERED_STORAGE restarts its log: the
// NextOffset of the last committed remote segment, with that segment's
// producer snapshot (engine producerstate format, the state at
// NextOffset) and the epoch history up to it (the "epochs" object,
// rlm.DecodeEpochs).
func (r *Reader) RestartPoint(ctx context.Context, topicID [16]byte, partition int32) (offset int64, producerSnapshot []byte, epochs []rlm.EpochEntry, err error) {
	return 0, nil, nil, ErrStorage
}
