package metadata

import (
	"encoding/json"
	"fmt"
)

// commandVersion is the first byte of every encoded command. Bump it (and
// keep decoding the old one) when a command's meaning changes, because old
// entries stay in the raft log until a snapshot compacts them.
const commandVersion byte = 1

// Command is one entry of the metadata log. Exactly one field is set.
// Everything nondeterministic (ids, placement, time) is decided by the
// controller before proposing, so Apply is a pure function of state and
// command.
type Command struct {
	InitCluster         *InitCluster         `json:",omitempty"`
	RegisterBroker      *RegisterBroker      `json:",omitempty"`
	UnfenceBroker       *UnfenceBroker       `json:",omitempty"`
	FenceBroker         *FenceBroker         `json:",omitempty"`
	CreateTopic         *CreateTopic         `json:",omitempty"`
	DeleteTopic         *DeleteTopic         `json:",omitempty"`
	CreatePartitions    *CreatePartitions    `json:",omitempty"`
	AlterPartition      *AlterPartition      `json:",omitempty"`
	ElectLeader         *ElectLeader         `json:",omitempty"`
	AllocateProducerIDs *AllocateProducerIDs `json:",omitempty"`
	ReplicaOffline      *ReplicaOffline      `json:",omitempty"`
	// Security (security.go).
	AlterScramCredentials *AlterScramCredentials `json:",omitempty"`
	CreateACLs            *CreateACLs            `json:",omitempty"`
	DeleteACLs            *DeleteACLs            `json:",omitempty"`
	// Dynamic configs (configs.go).
	AlterConfigs *AlterConfigs `json:",omitempty"`
	// Client quotas (quotas.go).
	AlterClientQuotas *AlterClientQuotas `json:",omitempty"`
	// Partition reassignment (reassign.go).
	AlterPartitionReassignments *AlterPartitionReassignments `json:",omitempty"`
	// Broker removal (unregister.go).
	UnregisterBroker *UnregisterBroker `json:",omitempty"`
	// Remote-log metadata (remote.go).
	CommitRemoteSegment  *CommitRemoteSegment  `json:",omitempty"`
	DeleteRemoteSegments *DeleteRemoteSegments `json:",omitempty"`
	RemoteTopicPurged    *RemoteTopicPurged    `json:",omitempty"`
}

// InitCluster fixes the cluster id; the first controller leader proposes it
// once. A second InitCluster is rejected.
type InitCluster struct{ ClusterID string }

// RegisterBroker (re)registers a broker. A new incarnation replaces the old
// record and starts fenced; the same incarnation again is a no-op that
// returns the existing record (so a retried RPC is harmless).
type RegisterBroker struct {
	ClusterID   string // must equal the cluster's; "" is refused too
	ID          int32
	Incarnation UUID
	Endpoints   []Endpoint
	Rack        string
}

// UnfenceBroker marks a caught-up broker eligible to lead.
type UnfenceBroker struct {
	ID    int32
	Epoch uint64
}

// FenceBroker marks a broker ineligible (missed heartbeats) and moves its
// leaderships.
type FenceBroker struct {
	ID    int32
	Epoch uint64
}

// CreateTopic creates a topic with a placement the controller computed.
type CreateTopic struct {
	Name       string
	ID         UUID
	Configs    map[string]string
	Assignment [][]int32 // one replica list per partition
}

// DeleteTopic deletes a topic; ID, when set, must match (guards against
// deleting a re-created topic of the same name).
type DeleteTopic struct {
	Name string
	ID   UUID
}

// CreatePartitions adds partitions. Assignment holds the new partitions
// only; Total must equal current+len(Assignment), so a command computed
// against an older partition count is rejected.
type CreatePartitions struct {
	Name       string
	Total      int32
	Assignment [][]int32
}

// AlterPartition is a leader's ISR change, carrying the epochs it saw.
type AlterPartition struct {
	BrokerID       int32
	BrokerEpoch    uint64
	TopicID        UUID
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// ElectLeader elects a leader from the ISR in replica order. With Unclean,
// and no usable ISR member, any unfenced replica may lead and the ISR
// becomes just it. With Preferred (Kafka's preferred-replica election) only
// the preferred replica, Replicas[0], may be elected, and only while it is
// unfenced and in the ISR (else ErrPreferredNotAvailable); it is not the
// same as the plain mode, which would settle for the next replica in order.
// Preferred and Unclean are exclusive.
type ElectLeader struct {
	Topic     string
	Partition int32
	Unclean   bool
	Preferred bool
}

// AllocateProducerIDs hands a broker the next block of producer ids.
type AllocateProducerIDs struct {
	BrokerID    int32
	BrokerEpoch uint64
}

// ReplicaOffline is a broker's report that its replicas of some partitions
// failed on disk (Kafka's offline log dir): each leaves the ISR (unless it
// is the last member), its leadership moves to the first in-sync unfenced
// online replica (or NoLeader), and it is marked Offline until the broker
// registers again.
type ReplicaOffline struct {
	BrokerID    int32
	BrokerEpoch uint64
	TopicID     UUID
	Partitions  []int32
}

// Encode serialises c for the raft log.
func (c Command) Encode() ([]byte, error) {
	if c.count() != 1 {
		return nil, fmt.Errorf("%w: exactly one command must be set", ErrInvalidCommand)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append([]byte{commandVersion}, b...), nil
}

// DecodeCommand is the inverse of Encode.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if len(b) == 0 || b[0] != commandVersion {
		return c, fmt.Errorf("%w: unknown encoding version", ErrInvalidCommand)
	}
	if err := json.Unmarshal(b[1:], &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	if c.count() != 1 {
		return c, fmt.Errorf("%w: exactly one command must be set", ErrInvalidCommand)
	}
	return c, nil
}

func (c Command) count() int {
	n := 0
	for _, set := range []bool{
		c.InitCluster != nil, c.RegisterBroker != nil, c.UnfenceBroker != nil,
		c.FenceBroker != nil, c.CreateTopic != nil, c.DeleteTopic != nil,
		c.CreatePartitions != nil, c.AlterPartition != nil, c.ElectLeader != nil,
		c.AllocateProducerIDs != nil, c.AlterScramCredentials != nil, c.CreateACLs != nil,
		c.DeleteACLs != nil, c.ReplicaOffline != nil, c.AlterConfigs != nil, c.AlterClientQuotas != nil,
		c.AlterPartitionReassignments != nil,
		c.UnregisterBroker != nil,
		c.CommitRemoteSegment != nil, c.DeleteRemoteSegments != nil, c.RemoteTopicPurged != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

// Result is what applying a command returns (raft hands it to the proposer
// through ApplyFuture.Response). Err is nil or wraps one of the errors in
// errors.go.
type Result struct {
	Index     uint64     // raft index the command was applied at
	Err       error      `json:"-"`
	Broker    *Broker    // RegisterBroker, UnfenceBroker, FenceBroker, UnregisterBroker (the removed record)
	Topic     *Topic     // CreateTopic, CreatePartitions, AlterConfigs of a topic
	Partition *Partition // AlterPartition, ElectLeader
	// ProducerIDStart is the first id of the allocated block of
	// ProducerIDBlockSize ids.
	ProducerIDStart int64
	// ItemErrs is the outcome per item of AlterScramCredentials,
	// CreateACLs, AlterClientQuotas and AlterPartitionReassignments
	// (nil: applied).
	ItemErrs []error `json:"-"`
	// Deleted lists the ACLs DeleteACLs removed, per filter.
	Deleted [][]ACL
}
