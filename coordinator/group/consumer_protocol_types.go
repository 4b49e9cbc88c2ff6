package group

import "time"

// Types of the KIP-848 ("consumer") group protocol: ConsumerGroupHeartbeat
// (68) and ConsumerGroupDescribe (69). The broker computes assignments and
// members reconcile towards them through heartbeats; there is no
// JoinGroup/SyncGroup barrier. As for the classic protocol, netpath copies
// kmsg fields into these structs and maps each Err with errors.Is.

// TopicID is a topic's 16-byte UUID: 848 requests and records name topics
// by id, not by name.
type TopicID [16]byte

// Assignment maps topic ids to partitions, each slice sorted ascending
// and without duplicates. A nil or empty Assignment holds nothing.
type Assignment map[TopicID][]int32

// TopicInfo is one topic as the coordinator sees it.
type TopicInfo struct {
	Name       string
	ID         TopicID
	Partitions int32
}

// Topics is the broker's live view of the cluster's topics. The consumer
// protocol needs it to resolve subscriptions (names and regexes) to ids
// and partition counts; a change of a subscribed topic (created, deleted,
// partitions added) bumps the group epoch on the next heartbeat.
type Topics interface {
	// TopicByName and TopicByID look one topic up.
	TopicByName(name string) (TopicInfo, bool)
	TopicByID(id TopicID) (TopicInfo, bool)
	// AllTopics lists every topic except internal ones (names starting
	// with "__"), for regex subscriptions.
	AllTopics() []TopicInfo
}

// Member epochs with a meaning of their own in a heartbeat.
const (
	JoinEpoch        int32 = 0  // a member joining (or rejoining after being fenced)
	LeaveEpoch       int32 = -1 // a member leaving for good
	StaticLeaveEpoch int32 = -2 // a static member leaving temporarily (keeps its assignment until its session expires)
)

// ConsumerHeartbeatRequest is ConsumerGroupHeartbeat v0-v1. A nil pointer
// or slice field (and RebalanceTimeout < 0) means "unchanged since my last
// heartbeat"; on a join (MemberEpoch 0) SubscribedTopicNames or
// SubscribedTopicRegex and Owned must be present.
type ConsumerHeartbeatRequest struct {
	Version     int16 // v0: the coordinator names a joining member; v1: the client does
	Group       string
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeout bounds how long the member may hold partitions it
	// was asked to revoke; negative means unchanged.
	RebalanceTimeout     time.Duration
	SubscribedTopicNames []string
	SubscribedTopicRegex *string // v1+
	ServerAssignor       *string
	// Owned is the member's full set of owned partitions; nil means
	// unchanged. A revocation completes when Owned no longer holds the
	// revoked partitions.
	Owned      Assignment
	ClientID   string // from the request header
	ClientHost string // the connection's remote address
}

// ConsumerHeartbeatResponse is ConsumerGroupHeartbeat's answer. Assignment
// is nil when the member's assignment did not change (the client keeps
// what it has); otherwise it is the member's full assignment.
type ConsumerHeartbeatResponse struct {
	Err               error // its message goes to ErrorMessage
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	Assignment        Assignment
	HasAssignment     bool // Assignment is meaningful even when empty
}

// ConsumerGroupState is a consumer group's state as ConsumerGroupDescribe,
// DescribeGroups and ListGroups name it.
type ConsumerGroupState string

// Consumer group states (Kafka's names).
const (
	ConsumerEmpty       ConsumerGroupState = "Empty"       // no members
	ConsumerAssigning   ConsumerGroupState = "Assigning"   // group epoch ahead of the target assignment
	ConsumerReconciling ConsumerGroupState = "Reconciling" // some member has not reached the target yet
	ConsumerStable      ConsumerGroupState = "Stable"
	ConsumerDead        ConsumerGroupState = "Dead"
)

// Group types ListGroups v5 reports and filters on.
const (
	GroupTypeClassic  = "classic"
	GroupTypeConsumer = "consumer"
)

// ConsumerMemberDescription is one member in ConsumerGroupDescribe.
type ConsumerMemberDescription struct {
	MemberID             string
	InstanceID           *string
	RackID               *string
	MemberEpoch          int32
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	Assignment           Assignment // what the member owns now
	TargetAssignment     Assignment // what it is reconciling towards
}

// ConsumerGroupDescription is one group in ConsumerGroupDescribe. A group
// that does not exist, or is a classic group, has Err ErrGroupIDNotFound.
type ConsumerGroupDescription struct {
	Group           string
	Err             error
	State           ConsumerGroupState
	GroupEpoch      int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// Member reconciliation states, stored in the current-assignment record
// (Kafka's MemberState values).
const (
	MemberStable               int8 = 0 // owns its target
	MemberUnrevokedPartitions  int8 = 1 // must give partitions up before it advances
	MemberUnreleasedPartitions int8 = 2 // waits for partitions other members still hold
	MemberUnknownState         int8 = 127
)

// ConsumerMemberRecord is ConsumerGroupMemberMetadataValue: a member's
// subscription and identity.
type ConsumerMemberRecord struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
}

// ConsumerAssignmentRecord is ConsumerGroupCurrentMemberAssignmentValue:
// where a member stands in reconciliation.
type ConsumerAssignmentRecord struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            Assignment
	PendingRevocation   Assignment
}

// LoadedConsumerGroup is a consumer group's last stored state, rebuilt by
// Load from its records (LoadedGroup.Consumer).
type LoadedConsumerGroup struct {
	GroupEpoch      int32 // ConsumerGroupMetadataValue.Epoch
	AssignmentEpoch int32 // ConsumerGroupTargetAssignmentMetadataValue.AssignmentEpoch
	// Members holds every member with a member-metadata record; Current
	// is nil for a member whose current-assignment record is missing.
	Members map[string]*LoadedConsumerMember
	// Target is the target assignment by member id.
	Target map[string]Assignment
}

// LoadedConsumerMember is one member of a LoadedConsumerGroup.
type LoadedConsumerMember struct {
	Metadata ConsumerMemberRecord
	Current  *ConsumerAssignmentRecord
}
