package group

import "time"

// The request and response types below are plain structs: netpath copies
// the fields it decoded with kmsg into them and copies results back, mapping
// each Err with errors.Is to a kerr code (see errors.go). Fields a protocol
// version lacks keep their zero value (noted per field).

// Protocol is one (name, metadata) pair a member supports, in the member's
// order of preference.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is JoinGroup.
type JoinRequest struct {
	Group      string
	MemberID   string  // "" on the first join
	InstanceID *string // group.instance.id (v5+), nil for dynamic members
	ClientID   string  // from the request header
	ClientHost string  // the connection's remote address
	// SessionTimeout and RebalanceTimeout come from the request; for v0
	// (no rebalance timeout field) netpath passes the session timeout.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol
	// RequireKnownMemberID is true for JoinGroup v4+ (KIP-394): a dynamic
	// member's first join gets ErrMemberIDRequired with its new id.
	RequireKnownMemberID bool
}

// JoinMember is one member listed in the leader's JoinGroup response.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte // the member's metadata for the chosen protocol
}

// JoinResponse is JoinGroup's answer. On error Generation is -1; MemberID is
// still set with ErrMemberIDRequired.
type JoinResponse struct {
	Err          error
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	MemberID     string
	Members      []JoinMember // only for the leader, in join order
	// SkipAssignment (KIP-814, v9+) tells a static leader that replaced
	// itself without a rebalance to resend the current assignment instead
	// of computing a new one.
	SkipAssignment bool
}

// SyncRequest is SyncGroup.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string // v5+, nil when absent
	Protocol     *string // v5+, nil when absent
	// Assignments is sent by the leader only: member id -> assignment.
	Assignments map[string][]byte
}

// SyncResponse is SyncGroup's answer.
type SyncResponse struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// HeartbeatRequest is Heartbeat.
type HeartbeatRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
}

// LeaveMember is one member of a LeaveGroup request. v0-v2 carry a single
// member id; v3+ a batch where an entry may name only an instance id (the
// admin RemoveMembersFromConsumerGroup path).
type LeaveMember struct {
	MemberID   string
	InstanceID *string
}

// LeaveResult is the per-member answer of LeaveGroup. For v0-v2 netpath
// returns the single member's Err as the top-level error.
type LeaveResult struct {
	MemberID   string
	InstanceID *string
	Err        error
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommitOffset is one partition of an OffsetCommit.
type CommitOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 when absent (before v6)
	Metadata    string
}

// OffsetCommitRequest is OffsetCommit. Generation -1 with an empty member
// id is a "simple" commit from a client that does not use group management
// (v0 has no generation: netpath passes -1).
type OffsetCommitRequest struct {
	// Version is the OffsetCommit version: for a consumer (KIP-848) group
	// Generation is the member epoch, and a stale one is
	// ErrStaleMemberEpoch from v9 on, ErrIllegalGeneration before.
	Version    int16
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
	Offsets    []CommitOffset
}

// PartitionError is a per-partition result.
type PartitionError struct {
	Topic     string
	Partition int32
	Err       error
}

// OffsetCommitResponse has one entry per requested partition, in request
// order.
type OffsetCommitResponse struct {
	Partitions []PartitionError
}

// TxnOffsetCommitRequest is TxnOffsetCommit (KIP-98): offsets committed
// as part of ProducerID's transaction. Generation, MemberID and
// GroupInstanceID are the consumer's group metadata (KIP-447, v3+); before
// v3 netpath passes -1, "" and nil, and the commit is not fenced by group
// membership.
type TxnOffsetCommitRequest struct {
	TransactionalID string
	GroupID         string
	ProducerID      int64
	ProducerEpoch   int16
	Generation      int32 // -1 when absent
	MemberID        string
	GroupInstanceID *string
	Offsets         []CommitOffset // one per partition, flattened as in OffsetCommit
}

// TxnOffsetCommitResponse has one entry per requested partition, in
// request order.
type TxnOffsetCommitResponse struct {
	Partitions []PartitionError
}

// FetchOptions are the OffsetFetch flags that change the answer.
type FetchOptions struct {
	// RequireStable (v7+, KIP-447): partitions with a pending
	// transactional offset commit answer ErrUnstableOffsetCommit instead
	// of an offset that the transaction may be about to replace.
	RequireStable bool
	// MemberID and MemberEpoch (v9+) identify a consumer-group member;
	// MemberEpoch -1 (or an empty MemberID) skips the check. A stale
	// epoch is ErrStaleMemberEpoch, an unknown member ErrUnknownMemberID.
	MemberID    string
	MemberEpoch int32
}

// FetchedOffset is one partition of an OffsetFetch answer. Offset is -1
// (and LeaderEpoch -1, Metadata "") when nothing is committed, and when Err
// is set.
type FetchedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         error // per partition: ErrUnstableOffsetCommit
}

// OffsetDeleteResponse is OffsetDelete's answer: a group-level Err, or
// per-partition results.
type OffsetDeleteResponse struct {
	Err        error
	Partitions []PartitionError
}

// State is a classic group's state.
type State int

// Group states, with the names DescribeGroups and ListGroups report.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// MemberDescription is one member in DescribeGroups.
type MemberDescription struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	// Metadata and Assignment are filled only while the group is Stable,
	// as Kafka does (during a rebalance they are in flux).
	Metadata   []byte
	Assignment []byte
}

// GroupDescription is one group in DescribeGroups. A group that does not
// exist is described as Dead with no error, as Kafka answers up to v5.
type GroupDescription struct {
	Group        string
	Err          error // ErrNotCoordinator / ErrCoordinatorLoadInProgress / ErrInvalidGroupID
	State        string
	ProtocolType string
	Protocol     string // only while Stable
	Members      []MemberDescription
}

// GroupListing is one group in ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string
	GroupType    string // GroupTypeClassic or GroupTypeConsumer (ListGroups v5)
}

// DeleteGroupResult is one group in DeleteGroups.
type DeleteGroupResult struct {
	Group string
	Err   error
	// ShareTopics lists, for a deleted share group, the topics whose
	// share-partition state was initialized: the caller deletes that
	// state wherever it is held.
	ShareTopics []TopicID
}
