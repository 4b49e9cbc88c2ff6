package netpath

import (
	"context"
	"errors"
	"syscall"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/replication"
	"github.com/ringlog/ringlog/tiered/remote"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Authorization failures (auth.go); each maps to its Kafka code.
var (
	errTopicAuthz   = errors.New("topic authorization failed")
	errGroupAuthz   = errors.New("group authorization failed")
	errClusterAuthz = errors.New("cluster authorization failed")
	errTxnIDAuthz   = errors.New("transactional id authorization failed")
)

// errorCode maps an internal error to the Kafka error code a client sees.
// This file is the only place where the errors of the engine, the
// coordinators and replication (replErrorCode) become protocol codes.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var kErr *kerr.Error
	if errors.As(err, &kErr) {
		return kErr.Code
	}
	// Group coordinator errors first: they may wrap an engine or
	// coordinator cause that would otherwise pick the code.
	if code := groupErrorCode(err); code != 0 {
		return code
	}
	if code := txnCoordErrorCode(err); code != 0 {
		return code
	}
	if code := shareErrorCode(err); code != 0 {
		return code
	}
	if code := producerErrorCode(err); code != 0 {
		return code
	}
	switch {
	case errors.Is(err, errTopicAuthz):
		return kerr.TopicAuthorizationFailed.Code
	case errors.Is(err, errGroupAuthz):
		return kerr.GroupAuthorizationFailed.Code
	case errors.Is(err, errClusterAuthz):
		return kerr.ClusterAuthorizationFailed.Code
	case errors.Is(err, errTxnIDAuthz):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case errors.Is(err, errInvalidRegex):
		return kerr.InvalidRegularExpression.Code
	}
	// The remote tier's errors may wrap a context or store cause: their
	// own code wins.
	switch {
	case errors.Is(err, remote.ErrOffsetGone):
		// Remote retention deleted it: the consumer resets its offset.
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, remote.ErrStorage):
		// Store down, object missing or corrupt: retriable.
		return kerr.KafkaStorageError.Code
	case errors.Is(err, engine.ErrOffsetRemote):
		// Only the remote tier holds the offset and this broker has no
		// object store to read it from (a replica fetch gets
		// OFFSET_MOVED_TO_TIERED_STORAGE in 01_fetch.go instead).
		return kerr.KafkaStorageError.Code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, controller.ErrNotController), errors.Is(err, controller.ErrClosed):
		return kerr.NotController.Code
	case errors.Is(err, controller.ErrStale), errors.Is(err, metadata.ErrBrokerFenced),
		errors.Is(err, metadata.ErrClusterNotInitialized):
		return kerr.BrokerNotAvailable.Code
	case errors.Is(err, metadata.ErrClusterIDMismatch):
		return kerr.InconsistentClusterID.Code
	case errors.Is(err, metadata.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, metadata.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, metadata.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, metadata.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, metadata.ErrInvalidReplication):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, metadata.ErrInvalidAssignment), errors.Is(err, metadata.ErrBrokerHasReplicas):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, metadata.ErrUnknownBroker):
		return kerr.BrokerIDNotRegistered.Code
	case errors.Is(err, metadata.ErrBrokerRunning):
		return kerr.InvalidRequest.Code
	case errors.Is(err, metadata.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, metadata.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, metadata.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code
	case errors.Is(err, metadata.ErrPreferredNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code
	case errors.Is(err, metadata.ErrNoEligibleLeader):
		return kerr.EligibleLeadersNotAvailable.Code
	case errors.Is(err, metadata.ErrNoReassignment):
		return kerr.NoReassignmentInProgress.Code
	case errors.Is(err, metadata.ErrNoScramCredential):
		return kerr.ResourceNotFound.Code
	case errors.Is(err, metadata.ErrInvalidCommand), errors.Is(err, controller.ErrInvalidRequest),
		errors.Is(err, metadata.ErrInvalidACL), errors.Is(err, metadata.ErrInvalidQuota):
		return kerr.InvalidRequest.Code
	case errors.Is(err, engine.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, engine.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, engine.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, engine.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, engine.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, engine.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, engine.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, engine.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, engine.ErrUnsupportedVersion):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, engine.ErrStorage), errors.Is(err, engine.ErrDiskFull),
		errors.Is(err, controller.ErrNoSpace), errors.Is(err, syscall.ENOSPC):
		// A full disk is KAFKA_STORAGE_ERROR, not POLICY_VIOLATION:
		// clients retry it, so producers resume by themselves once space
		// is freed (docs/disk-full.md); the message says why.
		return kerr.KafkaStorageError.Code
	case errors.Is(err, engine.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownServerError.Code
}

// groupErrorCode maps the group coordinator's errors (coordinator/group).
// It returns 0 for any other error.
func groupErrorCode(err error) int16 {
	switch {
	case errors.Is(err, group.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, group.ErrCoordinatorLoadInProgress):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, group.ErrCoordinatorNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, group.ErrInvalidGroupID):
		return kerr.InvalidGroupID.Code
	case errors.Is(err, group.ErrInvalidSessionTimeout):
		return kerr.InvalidSessionTimeout.Code
	case errors.Is(err, group.ErrInconsistentGroupProtocol):
		return kerr.InconsistentGroupProtocol.Code
	case errors.Is(err, group.ErrUnknownMemberID):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, group.ErrIllegalGeneration):
		return kerr.IllegalGeneration.Code
	case errors.Is(err, group.ErrRebalanceInProgress):
		return kerr.RebalanceInProgress.Code
	case errors.Is(err, group.ErrMemberIDRequired):
		return kerr.MemberIDRequired.Code
	case errors.Is(err, group.ErrFencedInstanceID):
		return kerr.FencedInstanceID.Code
	case errors.Is(err, group.ErrGroupMaxSizeReached):
		return kerr.GroupMaxSizeReached.Code
	case errors.Is(err, group.ErrNonEmptyGroup):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, group.ErrGroupIDNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, group.ErrGroupSubscribedToTopic):
		return kerr.GroupSubscribedToTopic.Code
	case errors.Is(err, group.ErrOffsetMetadataTooLarge):
		return kerr.OffsetMetadataTooLarge.Code
	case errors.Is(err, group.ErrUnstableOffsetCommit):
		return kerr.UnstableOffsetCommit.Code
	case errors.Is(err, group.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, group.ErrFencedMemberEpoch):
		return kerr.FencedMemberEpoch.Code
	case errors.Is(err, group.ErrUnreleasedInstanceID):
		return kerr.UnreleasedInstanceID.Code
	case errors.Is(err, group.ErrUnsupportedAssignor):
		return kerr.UnsupportedAssignor.Code
	case errors.Is(err, group.ErrStaleMemberEpoch):
		return kerr.StaleMemberEpoch.Code
	case errors.Is(err, group.ErrInvalidRegularExpression):
		return kerr.InvalidRegularExpression.Code
	case errors.Is(err, group.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	}
	return 0
}

// commitErrorCode is errorCode for OffsetCommit: before v9 (KIP-848) a
// client knows no STALE_MEMBER_EPOCH, and a consumer group's stale member
// epoch is the ILLEGAL_GENERATION it does know, as Kafka answers it.
func commitErrorCode(err error, version int16) int16 {
	code := errorCode(err)
	if code == kerr.StaleMemberEpoch.Code && version < 9 {
		return kerr.IllegalGeneration.Code
	}
	return code
}

// txnCoordErrorCode maps the transaction coordinator's errors
// (coordinator/txn). It returns 0 for any other error.
func txnCoordErrorCode(err error) int16 {
	switch {
	case errors.Is(err, txn.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, txn.ErrCoordinatorLoadInProgress):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, txn.ErrCoordinatorNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, txn.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, txn.ErrInvalidProducerIDMapping):
		return kerr.InvalidProducerIDMapping.Code
	case errors.Is(err, txn.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, txn.ErrProducerFenced):
		return kerr.ProducerFenced.Code
	case errors.Is(err, txn.ErrConcurrentTransactions):
		return kerr.ConcurrentTransactions.Code
	case errors.Is(err, txn.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, txn.ErrTransactionalIDNotFound):
		return kerr.TransactionalIDNotFound.Code
	case errors.Is(err, txn.ErrInvalidTransactionTimeout):
		return kerr.InvalidTransactionTimeout.Code
	}
	return 0
}

// txnErrorCode is errorCode for the answers of the transactional APIs.
// Clients that predate PRODUCER_FENCED (KIP-588: InitProducerId v0-3,
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v0-1, TxnOffsetCommit
// v0-2; knowsFenced false) get INVALID_PRODUCER_EPOCH instead, which they
// treat the same way, as Kafka answers them.
func txnErrorCode(err error, knowsFenced bool) int16 {
	code := errorCode(err)
	if code == kerr.ProducerFenced.Code && !knowsFenced {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// errorMessage returns a message worth sending next to a code, or nil.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

var (
	kerrUnknownLeaderEpoch = kerr.UnknownLeaderEpoch.Code
	kerrFencedLeaderEpoch  = kerr.FencedLeaderEpoch.Code
)

// producerErrorCode maps idempotent/transactional producer state errors
// (engine/producerstate). It returns 0 for any other error.
func producerErrorCode(err error) int16 {
	switch {
	case errors.Is(err, producerstate.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, producerstate.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, producerstate.ErrProducerFenced):
		return kerr.ProducerFenced.Code
	case errors.Is(err, producerstate.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, producerstate.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, producerstate.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, producerstate.ErrCorruptBatch):
		return kerr.CorruptMessage.Code
	}
	return 0
}

// replErrorCode maps replication's errors to Kafka codes, then the rest
// through errorCode.
func replErrorCode(err error) int16 {
	pairs := []struct {
		err  error
		code int16
	}{
		{replication.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
		{replication.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code},
		{replication.ErrInvalidRequiredAcks, kerr.InvalidRequiredAcks.Code},
		{replication.ErrRequestTimedOut, kerr.RequestTimedOut.Code},
		{replication.ErrClosed, kerr.RequestTimedOut.Code},
		{replication.ErrNotLeaderOrFollower, kerr.NotLeaderForPartition.Code},
		{replication.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code},
		{replication.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch.Code},
		{replication.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
		{replication.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition.Code},
		{replication.ErrStorage, kerr.KafkaStorageError.Code},
		{replication.ErrOffsetNotAvailable, kerr.OffsetNotAvailable.Code},
	}
	for _, p := range pairs {
		if errors.Is(err, p.err) {
			return p.code
		}
	}
	return errorCode(err)
}

// shareErrorCode maps coordinator/share errors; 0 for any other error.
func shareErrorCode(err error) int16 {
	switch {
	case errors.Is(err, share.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, share.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, share.ErrSessionNotFound):
		return kerr.ShareSessionNotFound.Code
	case errors.Is(err, share.ErrInvalidSessionEpoch):
		return kerr.InvalidShareSessionEpoch.Code
	case errors.Is(err, share.ErrSessionLimitReached):
		return kerr.ShareSessionLimitReached.Code
	case errors.Is(err, share.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, share.ErrStateUnavailable):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, share.ErrFencedStateEpoch):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, share.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, share.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, share.ErrLoadInProgress):
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}
