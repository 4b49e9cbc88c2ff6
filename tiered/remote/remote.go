// Package remote is the remote tier's read side: consumer fetches below
// the local log start, served from the object store through the chunk
// cache (and sent with sendfile from the cache files), timestamp lookups
// in the remote tier, and the restart point a follower uses when the
// leader answers OFFSET_MOVED_TO_TIERED_STORAGE.
//
// CONTRACT (issue 21, round 2): the types and signatures below are what
// netpath and the broker build against; the bodies are placeholders that
// the reader's engineer replaces.
package remote

import (
	"context"
	"errors"

	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
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

// Reader reads the remote tier. Safe for concurrent use.
type Reader struct {
	image func() *metadata.Image
	cache *chunkcache.Cache
	store objstore.Store
}

// NewReader builds a reader over the committed metadata (image), the
// chunk cache and the store (for the small objects: producer snapshots,
// indexes).
func NewReader(image func() *metadata.Image, cache *chunkcache.Cache, store objstore.Store) *Reader {
	return &Reader{image: image, cache: cache, store: store}
}

// Read serves a consumer fetch of topicID/partition at offset, below the
// local log start (the engine answered *engine.OffsetRemoteError; le
// carries its bounds). It returns batches of the one remote segment
// holding offset, at most maxBytes unless minOneBatch needs a whole first
// batch; Data is released by the caller. readCommitted also returns the
// aborted transactions overlapping what is returned, and
// LastStableOffset/HighWatermark/LogStartOffset are filled from le and
// the partition's engine view by the caller.
func (r *Reader) Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int32, minOneBatch, readCommitted bool) (engine.ReadResult, []producerstate.AbortedTxn, error) {
	return engine.ReadResult{}, nil, ErrStorage
}

// OffsetForTimestamp finds, in the remote tier, the first offset whose
// batch has a timestamp at or after ts (ListOffsets by time below the
// local log start); found is false when every remote batch is older.
func (r *Reader) OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (offset, timestamp int64, found bool, err error) {
	return 0, 0, false, ErrStorage
}
