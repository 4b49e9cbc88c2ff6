package engine

// This file holds the vocabulary the engine shares with its callers (the
// broker package and netpath's handlers): fsync policies, the errors
// netpath maps to Kafka codes, append and read results, topic configs.
// Methods are documented where they are defined (engine.go, partition.go,
// replica.go, producers.go, cleaner.go, ...); `go doc -all ./engine` lists
// them all, so no second list is kept here to drift.

import "errors"

// FsyncPolicy says when appended bytes are flushed to stable storage.
type FsyncPolicy int

const (
	// FsyncAlways acknowledges an append only after its bytes are on disk.
	// Concurrent appends share one flush (group commit).
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval flushes dirty segments every Config.FsyncInterval.
	FsyncInterval
	// FsyncNever leaves flushing to the kernel (and to segment roll/close).
	FsyncNever
)

// Errors returned by the engine. netpath maps them to Kafka error codes in
// one place (netpath/errors.go) with errors.Is, so wrap them with %w.
var (
	ErrUnknownTopic       = errors.New("unknown topic or partition")
	ErrTopicExists        = errors.New("topic already exists")
	ErrInvalidTopic       = errors.New("invalid topic name")
	ErrInvalidPartitions  = errors.New("invalid number of partitions")
	ErrInvalidConfig      = errors.New("invalid topic config")
	ErrCorruptMessage     = errors.New("corrupt record batch")
	ErrMessageTooLarge    = errors.New("record batch larger than max.message.bytes")
	ErrInvalidRecord      = errors.New("invalid record batch")
	ErrUnsupportedVersion = errors.New("unsupported record batch magic")
	ErrOffsetOutOfRange   = errors.New("offset out of range")
	ErrClosed             = errors.New("engine closed")
	ErrStorage            = errors.New("storage error")
	// ErrCorruptLog is returned by Open when recovery finds corruption
	// before the tail of a log (not a torn write). The message names the
	// file and byte position.
	ErrCorruptLog = errors.New("corrupt log")
)

// AppendResult describes where an append landed.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended
	LastOffset     int64 // offset of the last record appended
	LogAppendTime  int64 // ms; -1 unless the topic uses LogAppendTime
	LogStartOffset int64
}

// AppendWaiter completes when an append is durable per the fsync policy
// (and, later, replicated). It is safe to wait on from any goroutine.
type AppendWaiter interface {
	// Done is closed when the append completed or failed.
	Done() <-chan struct{}
	// Result is valid after Done is closed.
	Result() (AppendResult, error)
}

// FileRange is a slice of a segment file holding whole record batches,
// handed out by Read so fetch can send it with sendfile. The file stays
// open (even if retention deletes the segment) until Release is called.
type FileRange interface {
	// Fd is the OS file descriptor, or -1 when the file is not an OS file
	// (in-memory test file systems); callers then use ReadAt.
	Fd() int
	Pos() int64                              // byte position in the file
	Len() int32                              // length in bytes; 0 for an empty read
	ReadAt(p []byte, off int64) (int, error) // reads relative to the file, not Pos
	Release()                                // idempotent
}

// ReadResult is what a fetch of one partition gets.
type ReadResult struct {
	Data             FileRange // never nil; Len()==0 when nothing to return
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// PartitionInfo is a snapshot of a partition's offsets.
type PartitionInfo struct {
	LogStartOffset int64
	HighWatermark  int64 // consumers read below this
	LogEndOffset   int64 // next offset to assign
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Config     TopicConfig
}

// ConfigEntry is one effective topic config value for DescribeConfigs.
type ConfigEntry struct {
	Name      string
	Value     string
	IsDefault bool // true when not set on the topic
	Sensitive bool
	ReadOnly  bool
}

// TopicConfig is the per-topic configuration, Kafka names in comments.
type TopicConfig struct {
	SegmentBytes       int64 // segment.bytes (1 GiB)
	SegmentMs          int64 // segment.ms (7 d)
	RetentionMs        int64 // retention.ms (604800000); -1 = unlimited
	RetentionBytes     int64 // retention.bytes (-1 = unlimited)
	MaxMessageBytes    int32 // max.message.bytes (1048588)
	IndexIntervalBytes int32 // index.interval.bytes (4096)
	// TimestampTypeLogAppend is message.timestamp.type=LogAppendTime.
	TimestampTypeLogAppend bool
	// CleanupPolicy is cleanup.policy: "delete", "compact" or
	// "compact,delete" (canonical spelling; see Compact, DeleteByRetention).
	CleanupPolicy     string
	MinInsyncReplicas int32 // min.insync.replicas (1 single node; used by replication)
	// DeleteRetentionMs is delete.retention.ms (86400000): how long the
	// cleaner keeps a tombstone that is the latest record of its key,
	// counted from its segment's largest timestamp.
	DeleteRetentionMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio (0.5): the
	// background cleaner cleans a partition once the bytes sealed since
	// its last cleaning are this share of its cleanable bytes.
	MinCleanableDirtyRatio float64
	// UncleanLeaderElection is unclean.leader.election.enable (false):
	// the controller reads it from the topic's configs; kept here so the
	// key validates and DescribeConfigs shows it.
	UncleanLeaderElection bool
	// LeaderThrottledReplicas and FollowerThrottledReplicas are
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas ("": none), canonical
	// spelling (throttled_replicas.go); the broker enforces them.
	LeaderThrottledReplicas, FollowerThrottledReplicas string
	// RemoteStorageEnable is remote.storage.enable (false): sealed
	// segments are uploaded to the object store and local retention
	// keeps only the hot window (remote.go). Once on it cannot be turned
	// off (CheckConfigChange), as in Kafka.
	RemoteStorageEnable bool
	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms
	// and local.retention.bytes (-2: the value of retention.ms /
	// retention.bytes; -1: unlimited): the hot window kept on local disk
	// of a remote-storage topic. Ignored without remote storage.
	LocalRetentionMs, LocalRetentionBytes int64
	// overrides remembers which keys were set explicitly on the topic.
	overrides map[string]string
}

// Timestamp lookups for ListOffsets.
const (
	TimestampLatest   int64 = -1
	TimestampEarliest int64 = -2
	TimestampMax      int64 = -3
	// TimestampEarliestLocal is Kafka's EARLIEST_LOCAL_TIMESTAMP
	// (KIP-1005): the local log start, which differs from the log start
	// on remote-storage topics.
	TimestampEarliestLocal int64 = -4
)
