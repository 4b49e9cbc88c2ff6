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
)
