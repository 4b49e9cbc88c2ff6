package netpath

import (
	"context"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/replication"
)

// The server's collaborators, handed to New (Deps) and Start (Metadata,
// Replicas) by the broker package, which builds and wires them. Each
// interface lists only what the handlers call; errors are the
// collaborators' own, mapped to Kafka codes in errors.go.

// Deps are the collaborators the server is built with.
type Deps struct {
	// Engine holds the partition logs handlers read and append to.
	Engine Storage
	// Cluster keeps the engine in line with the metadata image.
	Cluster Cluster
	// Groups is the consumer group coordinator.
	Groups Groups
	// Transactions is the transaction coordinator and the leader side of
	// transaction markers.
	Transactions Transactions
	// ProducerIDs hands out ids to idempotent producers.
	ProducerIDs ProducerIDs
	// Remote reads the remote tier (tiered storage); nil when the broker
	// has no object store configured.
	Remote RemoteTier
	// Shares is the partition-leader side of share groups; nil gets an
	// in-memory one with Kafka's defaults (tests).
	Shares Shares
	// ShareState is the owner side of __share_group_state
	// (*share.Store): ReadShareGroupState and WriteShareGroupState from
	// the other brokers' share-partition leaders. Nil answers
	// NOT_COORDINATOR.
	ShareState ShareState
}

// Storage is the local log store (*engine.Engine): the partitions
// handlers read and append to, the hosted topics, topic config parsing
// and defaults, and the data directory's disk state.
type Storage interface {
	Partition(topic string, p int32) (*engine.Partition, error)
	Topic(name string) (engine.TopicInfo, bool)
	Topics() []engine.TopicInfo
	Hosted(topic string) []int32
	ParseConfig(kv map[string]string) (engine.TopicConfig, error)
	StaticDefaults() engine.TopicConfig
	DiskFull() error
	DiskUsage() (free, total int64, err error)
	Dir() string
}

var _ Storage = (*engine.Engine)(nil)

// RemoteTier is the read side of tiered storage (*remote.Reader): fetches
// and timestamp lookups below a partition's local log start. Errors wrap
// remote.ErrOffsetGone (OFFSET_OUT_OF_RANGE) or remote.ErrStorage
// (KAFKA_STORAGE_ERROR), mapped in errors.go.
type RemoteTier interface {
	Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int32, minOneBatch, readCommitted bool) (engine.ReadResult, []producerstate.AbortedTxn, error)
	OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (offset, timestamp int64, found bool, err error)
}

// Metadata is the cluster metadata: the controller's image and the admin
// writes that go through it (*controller.Node).
type Metadata interface {
	MetadataImage() *metadata.Image
	// Fresh returns an error while the image may be stale (fenced, not
	// registered, out of contact with the controller).
	Fresh() error
	Controller() int32
	// Sync waits until the image has every entry the controller committed
	// before the call.
	Sync(ctx context.Context) error
	CreateTopic(ctx context.Context, req controller.CreateTopicRequest) (metadata.Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	CreatePartitions(ctx context.Context, name string, total int32, assignment [][]int32) (metadata.Topic, error)
	ElectLeader(ctx context.Context, topic string, partition int32, typ controller.ElectionType) (metadata.Partition, error)
	CreateACLs(ctx context.Context, acls []metadata.ACL) ([]error, error)
	DeleteACLs(ctx context.Context, filters []metadata.ACLFilter) ([][]metadata.ACL, error)
	AlterScramCredentials(ctx context.Context, c metadata.AlterScramCredentials) ([]error, error)
	// AlterConfigs changes one resource's dynamic configs (validated).
	AlterConfigs(ctx context.Context, c metadata.AlterConfigs) error
	AlterClientQuotas(ctx context.Context, c metadata.AlterClientQuotas) ([]error, error)
	// AlterPartitionReassignments starts or cancels reassignments; the
	// errors are per item.
	AlterPartitionReassignments(ctx context.Context, c metadata.AlterPartitionReassignments) ([]error, error)
	// UnregisterBroker removes a stopped, empty broker's registration.
	UnregisterBroker(ctx context.Context, id int32) error
}

var _ Metadata = (*controller.Node)(nil)

// Cluster is the broker's side of the metadata image.
type Cluster interface {
	// Reconcile makes the engine hold the partitions the image assigns to
	// this broker (after an admin write, or when the image is ahead of the
	// broker's own loop).
	Reconcile() error
	// LookupTopic finds name in img, and when it is missing there waits
	// (bounded) for a read barrier and looks again in the newer image,
	// which it returns.
	LookupTopic(img *metadata.Image, name string) (metadata.Topic, *metadata.Image, bool)
	// RollbackCreate deletes topic t again when reconcile (which failed
	// with recErr) could not create this broker's logs of it, and returns
	// the error the client gets (wrapping engine.ErrStorage); nil when
	// every log is there.
	RollbackCreate(t metadata.Topic, recErr error) error
}

// Replicas is partition replication on this broker; nil when replication
// is off (every partition is RF=1). Only partitions the engine reports
// Replicated go through it.
type Replicas interface {
	// Leader returns the leadership of topic/idx, or nil while
	// replication does not lead it (yet).
	Leader(topic string, idx int32) Leadership
	// FollowerFetch records a follower's fetch of topic/partition on the
	// leader; an error or a diverging epoch means no records are returned.
	// Until quietUntil (zero: not at all) a session's fetches that find
	// the partition unchanged and do not list it need not call it again
	// (replication.FetchOutcome.QuietUntil).
	FollowerFetch(topic string, partition int32, f replication.FollowerFetch) (div *replication.EpochEndOffset, quietUntil time.Time, err error)
	// OffsetsAvailable is the ListOffsets check of a replicated partition
	// the image says this broker leads in epoch.
	OffsetsAvailable(topic string, idx, epoch int32) error
	// Cancel withdraws a wait of Leadership.AwaitHW or AwaitLowWatermark.
	Cancel(w *replication.Waiter)
	// Waiting is how many acks=all waits are parked (for /metrics).
	Waiting() int
	// WaitingLow is how many DeleteRecords waits are parked (for /metrics).
	WaitingLow() int
	// LeaderThrottle is the replication throttle's leader side for
	// replica's fetch of topic/partition: throttled when its bytes count
	// against leader.replication.throttled.rate; wait > 0 when the rate
	// is exceeded, so the partition gets no records this time and the
	// rate allows more after wait.
	LeaderThrottle(topic string, partition, replica int32) (throttled bool, wait time.Duration)
	// RecordLeaderThrottle charges the bytes one replica fetch served to
	// throttled replicas; withheld says it held some back.
	RecordLeaderThrottle(bytes int64, withheld bool)
}

// Leadership is one partition this broker leads in replication.
type Leadership interface {
	// CheckProduce refuses a produce the ISR cannot take; it returns the
	// leader epoch the append that follows is made under.
	CheckProduce(acks int16) (int32, error)
	// AwaitHW parks an acks=all wait until the high watermark passes
	// lastOffset, appended in epoch; it is answered by deadline at the
	// latest.
	AwaitHW(epoch int32, lastOffset int64, arrived, deadline time.Time) *replication.Waiter
	// Ended is closed when the leadership ends.
	Ended() <-chan struct{}
	// AwaitLowWatermark parks a DeleteRecords wait until the low
	// watermark (the smallest log start over the leader and its in-sync
	// followers) reaches target; it is answered by deadline at the latest
	// (ErrRequestTimedOut), or with ErrNotLeaderOrFollower when the
	// leadership ends. Withdraw it with Replicas.Cancel.
	AwaitLowWatermark(target int64, arrived, deadline time.Time) *replication.Waiter
}

// Groups is the consumer group coordinator (group.Manager) and the
// __consumer_offsets partitions behind it.
type Groups interface {
	// Stale returns the error every group request gets while this
	// broker's metadata may be stale.
	Stale() error
	// Coordinator returns the broker coordinating groupID, creating the
	// offsets topic on first use.
	Coordinator(ctx context.Context, groupID string) (int32, error)

	Join(req group.JoinRequest) *group.Future[group.JoinResponse]
	Sync(req group.SyncRequest) *group.Future[group.SyncResponse]
	Heartbeat(req group.HeartbeatRequest) error
	Leave(groupID string, members []group.LeaveMember) ([]group.LeaveResult, error)
	Describe(groupIDs []string) []group.GroupDescription
	List(states []string) ([]group.GroupListing, error)
	DeleteGroups(groupIDs []string) *group.Future[[]group.DeleteGroupResult]
	CommitOffsets(req group.OffsetCommitRequest) *group.Future[group.OffsetCommitResponse]
	FetchOffsetsOpts(groupID string, partitions []group.TopicPartition, opts group.FetchOptions) ([]group.FetchedOffset, error)
	DeleteOffsets(groupID string, partitions []group.TopicPartition) *group.Future[group.OffsetDeleteResponse]
	CommitTxnOffsets(req group.TxnOffsetCommitRequest) *group.Future[group.TxnOffsetCommitResponse]

	// The consumer (KIP-848) group protocol. ListFiltered is List with
	// ListGroups v5's type filter.
	ConsumerHeartbeat(req group.ConsumerHeartbeatRequest) *group.Future[group.ConsumerHeartbeatResponse]
	ConsumerDescribe(groupIDs []string) []group.ConsumerGroupDescription
	ListFiltered(states, types []string) ([]group.GroupListing, error)

	// Share groups (KIP-932): membership, and the checks of the
	// share-group offset APIs.
	ShareHeartbeat(req group.ShareHeartbeatRequest) *group.Future[group.ShareHeartbeatResponse]
	ShareDescribe(groupIDs []string) []group.ShareGroupDescription
	ShareGroupEmpty(groupID string, needEmpty, create bool) error
	ShareInitialized(groupID string, topics []group.TopicID, drop bool) error
	IsShareGroup(groupID string) bool
}

// Shares is the partition-leader side of share groups (*share.Manager):
// share sessions, acquisition and acknowledgement of records, and the
// share-partition start offsets the offset APIs read and move.
type Shares interface {
	Session(req share.SessionRequest, now time.Time) (share.SessionResult, error)
	CloseSession(group, member string, tps []share.TP)
	CloseMember(group, member string)
	Lead(tp share.TP, leaderEpoch int32)
	NextOffset(k share.Key, b share.Bounds) (offset, limit int64, ok bool)
	Acquire(k share.Key, member string, spans []share.Span, maxRecords int, limit int64, now time.Time) []share.Lease
	Acknowledge(k share.Key, member string, acks []share.Ack, now time.Time) error
	LockDuration(group string) time.Duration
	GroupConfig(group string) share.GroupConfig
	Config() share.Config
	Changed() <-chan struct{}
	Offsets(group string, topics map[[16]byte]bool) []share.PartitionOffset
	Offset(k share.Key) (share.PartitionOffset, bool)
	SetOffset(k share.Key, offset int64) error
	DeletePartition(k share.Key) error
	Delete(group string, topics map[[16]byte]bool)
}

var _ Shares = (*share.Manager)(nil)

// ShareState is the share-partition state this broker keeps on the
// __share_group_state partitions it leads (*share.Store); errors are
// share.ErrNotCoordinator, share.ErrLoadInProgress,
// share.ErrFencedStateEpoch, share.ErrFencedLeaderEpoch, or an append's
// failure.
type ShareState interface {
	Read(k share.Key, leaderEpoch int32) (share.Snapshot, bool, error)
	Keys(group string) []share.Key
	Write(k share.Key, s share.Snapshot) error
}

var _ ShareState = (*share.Store)(nil)

// Transactions is the transaction coordinator (txn.Manager), its
// __transaction_state partitions, and the leader side of markers.
type Transactions interface {
	// Stale returns the error every transactional request gets while
	// this broker's metadata may be stale.
	Stale() error
	// Coordinator returns the broker coordinating transactionalID,
	// creating __transaction_state on first use.
	Coordinator(ctx context.Context, transactionalID string) (int32, error)

	InitProducerID(req txn.InitProducerIDRequest) *txn.Future[txn.InitProducerIDResult]
	AddPartitions(req txn.AddPartitionsRequest) *txn.Future[[]txn.PartitionResult]
	AddOffsets(transactionalID string, producerID int64, producerEpoch int16, groupID string) *txn.Future[error]
	EndTxn(req txn.EndTxnRequest) *txn.Future[error]
	// Describe and List answer DescribeTransactions and ListTransactions
	// from the coordinator's in-memory state.
	Describe(transactionalID string) (txn.Description, error)
	List(f txn.ListFilter) ([]txn.Listing, error)

	// WriteMarker appends mk to topic/p, which this broker must lead,
	// and returns once it is durable and covered by the high watermark
	// (by deadline); done, when closed, abandons the wait.
	WriteMarker(topic string, p int32, mk producerstate.Marker, deadline time.Time, done <-chan struct{}) error
}

// ProducerIDs hands out producer ids from controller-allocated blocks.
type ProducerIDs interface {
	// Wait returns an id, waiting for a block fetch when none is at hand.
	Wait(ctx context.Context) (int64, error)
}
