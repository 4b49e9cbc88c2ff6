package group

import "errors"

// Errors the group coordinator returns. Each maps to exactly one Kafka error
// code (named in its comment); netpath translates them with errors.Is, so
// wrapped errors keep their code. The machine never returns raw integers
// because coordinator must not depend on kerr.
var (
	// ErrNotCoordinator: NOT_COORDINATOR (16). This node does not own the
	// group's __consumer_offsets partition (or lost it while waiting).
	ErrNotCoordinator = errors.New("group: not the coordinator for this group")
	// ErrCoordinatorLoadInProgress: COORDINATOR_LOAD_IN_PROGRESS (14). The
	// partition is owned but its records are still being loaded.
	ErrCoordinatorLoadInProgress = errors.New("group: coordinator load in progress")
	// ErrCoordinatorNotAvailable: COORDINATOR_NOT_AVAILABLE (15). The group
	// died under the request, or appending its records failed; the client
	// rediscovers the coordinator and retries.
	ErrCoordinatorNotAvailable = errors.New("group: coordinator not available")
	// ErrInvalidGroupID: INVALID_GROUP_ID (24). Empty group id.
	ErrInvalidGroupID = errors.New("group: invalid group id")
	// ErrInvalidSessionTimeout: INVALID_SESSION_TIMEOUT (26). Outside
	// [MinSessionTimeout, MaxSessionTimeout].
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrInconsistentGroupProtocol: INCONSISTENT_GROUP_PROTOCOL (23). No
	// protocol type/name, or none in common with the current members.
	ErrInconsistentGroupProtocol = errors.New("group: inconsistent group protocol")
	// ErrUnknownMemberID: UNKNOWN_MEMBER_ID (25). The member id is not (or
	// no longer) in the group: the client must rejoin with an empty id.
	ErrUnknownMemberID = errors.New("group: unknown member id")
	// ErrIllegalGeneration: ILLEGAL_GENERATION (22). The member speaks for a
	// generation that is over (a zombie), or committed with a generation to
	// a group that does not use group management.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrRebalanceInProgress: REBALANCE_IN_PROGRESS (27). Rejoin.
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrMemberIDRequired: MEMBER_ID_REQUIRED (79). KIP-394 first round:
	// the response carries the assigned member id; join again with it.
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrFencedInstanceID: FENCED_INSTANCE_ID (82). Another member id now
	// holds this group.instance.id (KIP-345).
	ErrFencedInstanceID = errors.New("group: fenced instance id")
	// ErrGroupMaxSizeReached: GROUP_MAX_SIZE_REACHED (81).
	ErrGroupMaxSizeReached = errors.New("group: group max size reached")
	// ErrNonEmptyGroup: NON_EMPTY_GROUP (68). DeleteGroups (or OffsetDelete
	// on a non-consumer group) while the group has members.
	ErrNonEmptyGroup = errors.New("group: group is not empty")
	// ErrGroupIDNotFound: GROUP_ID_NOT_FOUND (69).
	ErrGroupIDNotFound = errors.New("group: group id not found")
	// ErrGroupSubscribedToTopic: GROUP_SUBSCRIBED_TO_TOPIC (86). OffsetDelete
	// of a topic the group's members are subscribed to.
	ErrGroupSubscribedToTopic = errors.New("group: group is subscribed to the topic")
	// ErrOffsetMetadataTooLarge: OFFSET_METADATA_TOO_LARGE (12).
	ErrOffsetMetadataTooLarge = errors.New("group: offset metadata too large")
	// ErrUnstableOffsetCommit: UNSTABLE_OFFSET_COMMIT (88). Per partition
	// in OffsetFetch with require_stable (v7+): a transactional offset
	// commit for the partition awaits its marker; the consumer retries.
	ErrUnstableOffsetCommit = errors.New("group: unstable offset commit (a transaction is pending)")
	// ErrInvalidProducerEpoch: INVALID_PRODUCER_EPOCH (47). TxnOffsetCommit
	// from an older epoch than the producer's open transaction in the
	// group, or an AppendTxn failure the TxnPersister wrapped in it
	// (the log fenced the producer); passed to the client as is.
	ErrInvalidProducerEpoch = errors.New("group: invalid producer epoch")

	// KIP-848 (consumer protocol) errors.

	// ErrFencedMemberEpoch: FENCED_MEMBER_EPOCH (110). A heartbeat names
	// an epoch the member is not at (nor its previous one with an owned
	// set the coordinator accepts): the member drops its partitions and
	// rejoins with epoch 0.
	ErrFencedMemberEpoch = errors.New("group: fenced member epoch")
	// ErrUnreleasedInstanceID: UNRELEASED_INSTANCE_ID (111). A static
	// member joins with an instance id another live member still holds.
	ErrUnreleasedInstanceID = errors.New("group: instance id still in use by another member")
	// ErrUnsupportedAssignor: UNSUPPORTED_ASSIGNOR (112). ServerAssignor
	// names an assignor the coordinator does not run.
	ErrUnsupportedAssignor = errors.New("group: unsupported server assignor")
	// ErrStaleMemberEpoch: STALE_MEMBER_EPOCH (113). OffsetCommit (v9+)
	// or OffsetFetch with a member epoch that is not the member's current
	// one; the client retries after its next heartbeat. Before
	// OffsetCommit v9 netpath answers ILLEGAL_GENERATION instead.
	ErrStaleMemberEpoch = errors.New("group: stale member epoch")
	// ErrInvalidRegularExpression: INVALID_REGULAR_EXPRESSION (128).
	ErrInvalidRegularExpression = errors.New("group: invalid regular expression")
	// ErrInvalidRequest: INVALID_REQUEST (42). A heartbeat missing a field
	// its epoch requires (wrapped with which one).
	ErrInvalidRequest = errors.New("group: invalid request")
)
