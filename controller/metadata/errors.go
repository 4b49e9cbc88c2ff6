package metadata

import "errors"

// Errors a command can be rejected with. Rejections are deterministic: every
// replica rejects the same command at the same index. The comment names the
// Kafka error code netpath should answer with.
var (
	ErrClusterNotInitialized = errors.New("cluster id not set yet")                // retriable (COORDINATOR_NOT_AVAILABLE-ish)
	ErrClusterInitialized    = errors.New("cluster id already set")                // internal
	ErrClusterIDMismatch     = errors.New("cluster id mismatch")                   // INCONSISTENT_CLUSTER_ID
	ErrUnknownBroker         = errors.New("broker not registered")                 // BROKER_ID_NOT_REGISTERED
	ErrStaleBrokerEpoch      = errors.New("stale broker epoch")                    // STALE_BROKER_EPOCH
	ErrBrokerFenced          = errors.New("broker is fenced")                      // BROKER_ID_NOT_REGISTERED / retriable
	ErrAlreadyFenced         = errors.New("broker already fenced")                 // internal (duplicate fence)
	ErrTopicExists           = errors.New("topic already exists")                  // TOPIC_ALREADY_EXISTS
	ErrUnknownTopic          = errors.New("unknown topic or partition")            // UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID
	ErrInvalidTopic          = errors.New("invalid topic")                         // INVALID_TOPIC_EXCEPTION
	ErrInvalidPartitions     = errors.New("invalid number of partitions")          // INVALID_PARTITIONS
	ErrInvalidReplication    = errors.New("invalid replication factor")            // INVALID_REPLICATION_FACTOR
	ErrInvalidAssignment     = errors.New("invalid replica assignment")            // INVALID_REPLICA_ASSIGNMENT
	ErrInvalidUpdateVersion  = errors.New("stale partition epoch")                 // INVALID_UPDATE_VERSION
	ErrFencedLeaderEpoch     = errors.New("stale leader epoch")                    // FENCED_LEADER_EPOCH
	ErrNotLeader             = errors.New("broker is not the partition leader")    // NOT_LEADER_OR_FOLLOWER
	ErrIneligibleReplica     = errors.New("replica not eligible for the ISR")      // INELIGIBLE_REPLICA
	ErrElectionNotNeeded     = errors.New("leader election not needed")            // ELECTION_NOT_NEEDED
	ErrNoEligibleLeader      = errors.New("no eligible leader")                    // ELIGIBLE_LEADERS_NOT_AVAILABLE
	ErrPreferredNotAvailable = errors.New("preferred leader not available")        // PREFERRED_LEADER_NOT_AVAILABLE
	ErrInvalidCommand        = errors.New("invalid metadata command")              // INVALID_REQUEST
	ErrInvalidACL            = errors.New("invalid acl binding")                   // INVALID_REQUEST
	ErrNoScramCredential     = errors.New("no such scram credential")              // RESOURCE_NOT_FOUND
	ErrInvalidQuota          = errors.New("invalid client quota")                  // INVALID_REQUEST
	ErrNoReassignment        = errors.New("no partition reassignment in progress") // NO_REASSIGNMENT_IN_PROGRESS
	ErrBrokerRunning         = errors.New("broker is running")                     // INVALID_REQUEST (UnregisterBroker)
	ErrBrokerHasReplicas     = errors.New("broker still hosts replicas")           // INVALID_REPLICA_ASSIGNMENT (UnregisterBroker)
)

// Remote-log metadata refusals (remote.go), for the uploader: they never
// reach a Kafka client.
var (
	ErrRemoteSegmentCommitted = errors.New("remote segment already committed") // the uploader treats it as done
	ErrRemoteSegmentGap       = errors.New("remote segment leaves a gap")      // upload the missing range first
)

// Errors lists every sentinel above, so a transport can map them to codes
// and back (coordinator's RPC does).
var Errors = []error{
	ErrClusterNotInitialized, ErrClusterInitialized, ErrClusterIDMismatch,
	ErrUnknownBroker, ErrStaleBrokerEpoch, ErrBrokerFenced, ErrAlreadyFenced,
	ErrTopicExists, ErrUnknownTopic, ErrInvalidTopic, ErrInvalidPartitions,
	ErrInvalidReplication, ErrInvalidAssignment, ErrInvalidUpdateVersion,
	ErrFencedLeaderEpoch, ErrNotLeader, ErrIneligibleReplica,
	ErrElectionNotNeeded, ErrNoEligibleLeader, ErrInvalidCommand,
	ErrInvalidACL, ErrNoScramCredential, ErrPreferredNotAvailable,
	ErrInvalidQuota, ErrNoReassignment,
	ErrBrokerRunning, ErrBrokerHasReplicas,
	ErrRemoteSegmentCommitted, ErrRemoteSegmentGap,
}
