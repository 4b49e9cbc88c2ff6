package replication

import (
	"context"
	"slices"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
)

// NoEpoch means "no leader epoch known" (Kafka's UNDEFINED_EPOCH, -1) and
// NoOffset "no offset known" (UNDEFINED_EPOCH_OFFSET, -1).
const (
	NoEpoch  int32 = -1
	NoOffset int64 = -1
)

// TopicPartition names a partition. TopicID is carried so Fetch v13+ and
// AlterPartition (which speak topic ids) need no lookups.
type TopicPartition struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// PartitionState is the controller's view of one partition, as the
// coordinator's metadata.Partition holds it. The lead's adapter copies it.
type PartitionState struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32 // -1 when offline
	LeaderEpoch    int32
	PartitionEpoch int32
}

// Clone returns a deep copy; states handed around must not share slices.
func (p PartitionState) Clone() PartitionState {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	return p
}

// EpochEndOffset answers "where does epoch E end": Epoch is the largest
// epoch <= E the log knows and EndOffset the start offset of the next one
// (or the log end offset when Epoch is the latest). It is both the
// OffsetForLeaderEpoch answer and Fetch v12+'s DivergingEpoch.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// EpochSource is the part of a log's leader-epoch cache replication reads.
// epochcache.Cache implements it given the log end offset.
type EpochSource interface {
	// LatestEpoch is the newest epoch in the cache, NoEpoch when empty.
	LatestEpoch() int32
	// EndOffsetForEpoch has Kafka's OffsetForLeaderEpoch semantics; see
	// epochcache.Cache.EndOffsetFor. Unknown: (NoEpoch, NoOffset).
	EndOffsetForEpoch(epoch int32) EpochEndOffset
}

// LogView is what a leader reads from its own log. Implementations must be
// safe to call from the goroutine that holds the partition's lock.
type LogView interface {
	EpochSource
	LogStartOffset() int64
	// LogEndOffset is the next offset to be written.
	LogEndOffset() int64
	// DurableEnd is the end this replica may count as "has it": with
	// --fsync always the flushed end, otherwise LogEndOffset. The leader's
	// own contribution to the high watermark is its DurableEnd, and a
	// follower reports it as the fetch offset (see Follower.BuildRequest).
	DurableEnd() int64
	HighWatermark() int64
	// Position is LogEndOffset, DurableEnd and LogStartOffset read at
	// once.
	Position() LogPosition
}

// LogPosition is a log's ends at one moment (LogView.Position).
type LogPosition struct {
	LogEnd, DurableEnd, LogStart int64
}

// Pending completes asynchronously; the engine's AppendWaiter adapts to it
// (Err = the error of Result).
type Pending interface {
	Done() <-chan struct{}
	Err() error
}

// Log is a partition's local log as replication drives it. The engine
// implements it; every call for one partition comes from one goroutine at
// a time (the partition's fetcher, or the broker's metadata handler).
type Log interface {
	LogView
	// AppendReplicated appends whole record batches exactly as the leader
	// wrote them: baseOffset and partitionLeaderEpoch are kept, and the
	// first batch must start at LogEndOffset. It adds epoch-cache entries
	// for new partitionLeaderEpochs (epochcache.Cache.AssignFromBatches).
	// The returned Pending completes when the bytes are durable per the
	// fsync policy; DurableEnd advances then. The implementation may read
	// batches until then and must not after: the Fetcher hands the buffer
	// back to its FetchClient for the next response once every Pending of
	// a response completed (nothing may be copied lazily from it).
	AppendReplicated(batches []byte) (Pending, error)
	// TruncateTo removes every offset >= offset, truncates the epoch
	// cache from min(offset, LogEndOffset), and lowers the high watermark
	// and DurableEnd to at most offset. The epoch cache must be truncated
	// even when offset >= LogEndOffset: a broker that became leader
	// assigned (epoch, LogEndOffset) and may have lost leadership before
	// appending anything; that empty epoch would otherwise stay its
	// LastFetchedEpoch and every fetch would diverge at the same offset
	// forever (Kafka's UnifiedLog.truncateTo does the same; the model test
	// found this).
	TruncateTo(offset int64) error
	// TruncateFullyAndStartAt empties the log and restarts it at offset
	// (the leader's log start moved past everything we have).
	TruncateFullyAndStartAt(offset int64) error
	// RestartFromRemote empties the log and restarts it at offset with
	// the remote tier's producer-state snapshot (the state at offset)
	// and leader-epoch history up to offset, durably (the follower's
	// answer to OFFSET_MOVED_TO_TIERED_STORAGE, Config.RemoteRestart).
	// Bad arguments are refused before anything changes.
	RestartFromRemote(offset int64, producerSnapshot []byte, epochs []epochcache.Entry) error
	// AdvanceLogStart moves the log start up to offset (at most the high
	// watermark), deleting what lies wholly below it, and returns the log
	// start after the call (DeleteRecords on the leader; a follower
	// follows the leader's start, see Follower.handlePartition).
	AdvanceLogStart(offset int64) (int64, error)
	// SetHighWatermark sets the consumer-visible end; a follower's is
	// min(leader's, own LogEndOffset), a leader's comes from LeaderState.
	SetHighWatermark(hw int64)
	// AssignLeaderEpoch makes this log a leader's in epoch: the epoch cache
	// gets (epoch, LogEndOffset) and later appends are stamped with epoch.
	AssignLeaderEpoch(epoch int32) error
}

// Controller is the part of the coordinator replication calls. The
// adapter wraps controller.Node.AlterPartition, copying the returned
// metadata.Partition and wrapping its errors (see errors.go).
type Controller interface {
	AlterPartition(ctx context.Context, tp TopicPartition, leaderEpoch, partitionEpoch int32, newISR []int32) (PartitionState, error)
}

// Clock is injected so tests control time; RealClock is the wall clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func containsID(s []int32, v int32) bool { return slices.Contains(s, v) }

// union returns a ∪ b keeping a's order then b's new members.
func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
