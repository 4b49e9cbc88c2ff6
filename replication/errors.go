package replication

import "errors"

// Errors returned by this package. netpath maps them to Kafka error codes
// (named after each) with errors.Is, so callers wrap them with %w. The
// coordinator adapter wraps the controller's AlterPartition errors into
// ErrInvalidUpdateVersion, ErrFencedLeaderEpoch, ErrNotLeaderOrFollower and
// ErrIneligibleReplica so LeaderState can tell "rejected, never applied"
// from "maybe applied, wait for metadata".
var (
	// ErrNotEnoughReplicas: NOT_ENOUGH_REPLICAS (19). acks=all produce
	// refused before appending because the ISR is below min.insync.replicas.
	ErrNotEnoughReplicas = errors.New("fewer in-sync replicas than min.insync.replicas")
	// ErrNotEnoughReplicasAfterAppend: NOT_ENOUGH_REPLICAS_AFTER_APPEND (20).
	// The records were appended and reached the high watermark, but the ISR
	// had shrunk below min.insync.replicas by then.
	ErrNotEnoughReplicasAfterAppend = errors.New("records written, but to fewer in-sync replicas than min.insync.replicas")
	// ErrInvalidRequiredAcks: INVALID_REQUIRED_ACKS (21).
	ErrInvalidRequiredAcks = errors.New("acks must be -1, 0 or 1")
	// ErrRequestTimedOut: REQUEST_TIMED_OUT (7). An acks=all waiter passed
	// its deadline before the high watermark covered it.
	ErrRequestTimedOut = errors.New("timed out waiting for replication")
	// ErrNotLeaderOrFollower: NOT_LEADER_OR_FOLLOWER (6). This broker no
	// longer leads the partition (waiters are failed on leadership loss), or
	// a fetch came from a broker that is not an assigned replica.
	ErrNotLeaderOrFollower = errors.New("not the leader or follower for the partition")
	// ErrFencedLeaderEpoch: FENCED_LEADER_EPOCH (74). The request's leader
	// epoch is older than ours.
	ErrFencedLeaderEpoch = errors.New("leader epoch in request is older than the current one")
	// ErrUnknownLeaderEpoch: UNKNOWN_LEADER_EPOCH (75). The request's leader
	// epoch is newer than ours (we have not seen the metadata yet).
	ErrUnknownLeaderEpoch = errors.New("leader epoch in request is newer than the current one")
	// ErrOffsetOutOfRange: OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("fetch offset out of range")
	// ErrUnknownTopicOrPartition: UNKNOWN_TOPIC_OR_PARTITION (3).
	ErrUnknownTopicOrPartition = errors.New("unknown topic or partition")
	// ErrInvalidUpdateVersion: INVALID_UPDATE_VERSION (95), from the
	// controller: the AlterPartition carried a stale partition epoch.
	ErrInvalidUpdateVersion = errors.New("stale partition epoch")
	// ErrIneligibleReplica: INELIGIBLE_REPLICA (107), from the controller:
	// a proposed ISR member is fenced or not assigned; nothing was applied.
	ErrIneligibleReplica = errors.New("replica not eligible for the ISR")
	// ErrStorage: KAFKA_STORAGE_ERROR (56). A follower could not append to
	// or truncate its log.
	ErrStorage = errors.New("replica storage error")
	// ErrOffsetNotAvailable: OFFSET_NOT_AVAILABLE (78). A new leader's high
	// watermark is still below the log end its epoch began with
	// (LeaderState.CheckOffsetsAvailable): an end offset answered now could
	// be lower than what the previous leader acknowledged (KIP-207).
	ErrOffsetNotAvailable = errors.New("high watermark behind the start of the leader epoch")
	// ErrOffsetMovedToTieredStorage: OFFSET_MOVED_TO_TIERED_STORAGE (109,
	// KIP-405). A follower's fetch offset lies below the leader's local
	// log start, in data only the remote tier holds: the follower
	// restarts its log from the remote tier (Config.RemoteRestart).
	ErrOffsetMovedToTieredStorage = errors.New("fetch offset moved to tiered storage")
	// ErrClosed: internal; waiters still pending when a Purgatory is closed
	// (broker shutdown). netpath answers REQUEST_TIMED_OUT or drops the
	// connection.
	ErrClosed = errors.New("replication closed")
)
