package share

import "errors"

// Errors of the share-partition machine; netpath maps each to one Kafka
// code (named in its comment) with errors.Is.
var (
	// ErrInvalidRecordState: INVALID_RECORD_STATE (121). An
	// acknowledgement of a record that is not acquired by the member.
	ErrInvalidRecordState = errors.New("share: record is not acquired by this member")
	// ErrInvalidRequest: INVALID_REQUEST (42). A malformed
	// acknowledgement (ranges out of order, unknown type).
	ErrInvalidRequest = errors.New("share: invalid request")
	// ErrSessionNotFound: SHARE_SESSION_NOT_FOUND (122).
	ErrSessionNotFound = errors.New("share: share session not found")
	// ErrInvalidSessionEpoch: INVALID_SHARE_SESSION_EPOCH (123).
	ErrInvalidSessionEpoch = errors.New("share: invalid share session epoch")
	// ErrSessionLimitReached: SHARE_SESSION_LIMIT_REACHED (133).
	ErrSessionLimitReached = errors.New("share: share session limit reached")
	// ErrInvalidConfig: INVALID_CONFIG (40). A bad group config.
	ErrInvalidConfig = errors.New("share: invalid config")
	// ErrFencedStateEpoch: FENCED_STATE_EPOCH (124). A write of state
	// older than an admin reset or delete of it.
	ErrFencedStateEpoch = errors.New("share: state epoch fenced")
	// ErrFencedLeaderEpoch: FENCED_LEADER_EPOCH (74). A write or read of
	// state by a data partition leader older than the one that took the
	// state over: this broker was deposed and does not know it yet.
	ErrFencedLeaderEpoch = errors.New("share: leader epoch fenced")
	// ErrStateUnavailable: COORDINATOR_NOT_AVAILABLE (15) to clients. The
	// share state could not be read or written durably now (its
	// __share_group_state partition is loading, moving, or short of
	// in-sync replicas); the client retries.
	ErrStateUnavailable = errors.New("share: share state not available")
	// ErrNotCoordinator: NOT_COORDINATOR (16). This broker does not own
	// the __share_group_state partition of a key (the store side).
	ErrNotCoordinator = errors.New("share: not the share coordinator")
	// ErrLoadInProgress: COORDINATOR_LOAD_IN_PROGRESS (14). The store
	// is still reading the key's __share_group_state partition.
	ErrLoadInProgress = errors.New("share: share state loading")
)
