package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
)

// Config holds replication settings, Kafka broker config names in comments.
type Config struct {
	// ReplicaLagTimeMax (replica.lag.time.max.ms, 30s): an ISR follower
	// that has not been caught up to the leader's log end offset within
	// this window is removed from the ISR.
	ReplicaLagTimeMax time.Duration
	// FetchMaxWait (replica.fetch.wait.max.ms, 500ms): long-poll bound a
	// follower puts in its fetches.
	FetchMaxWait time.Duration
	// FetchMinBytes (replica.fetch.min.bytes, 1).
	FetchMinBytes int32
	// FetchMaxBytes (replica.fetch.response.max.bytes, 10 MiB): per request.
	FetchMaxBytes int32
	// PartitionMaxBytes (replica.fetch.max.bytes, 1 MiB): per partition.
	PartitionMaxBytes int32
	// FetchBackoff (replica.fetch.backoff.ms, 1s): wait after a failed
	// fetch request or a partition error before trying again.
	FetchBackoff time.Duration
	// MetadataLagBackoff is the wait after a partition error that only
	// says the leader's metadata lags ours (UNKNOWN_TOPIC_OR_PARTITION,
	// NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH: a topic created or a
	// leader elected a moment ago). While such errors repeat the wait
	// grows with how long they have lasted (an eighth of it), up to
	// FetchBackoff (Follower.lagDelay). Waiting the full FetchBackoff
	// there held every acks=all produce to a new partition for a second.
	MetadataLagBackoff time.Duration
	// AlterPartitionBackoff: wait before re-sending an AlterPartition whose
	// outcome is unknown, or re-proposing after a rejection.
	AlterPartitionBackoff time.Duration
	// RemoteRestart (tiered storage) tells a follower where to restart a
	// partition whose fetch offset the leader answered with
	// OFFSET_MOVED_TO_TIERED_STORAGE (the offset is only in the remote
	// tier). nil: such partitions keep retrying after FetchBackoff.
	RemoteRestart RemoteRestartFunc
	// RemoteRestartTimeout bounds one RemoteRestart call (its ctx
	// deadline); 0 means DefaultRemoteRestartTimeout.
	RemoteRestartTimeout time.Duration
}

// DefaultRemoteRestartTimeout is RemoteRestartTimeout's default: two
// small object reads, with room for a slow store.
const DefaultRemoteRestartTimeout = 30 * time.Second

func (c Config) remoteRestartTimeout() time.Duration {
	if c.RemoteRestartTimeout > 0 {
		return c.RemoteRestartTimeout
	}
	return DefaultRemoteRestartTimeout
}

// RemoteRestartFunc returns the restart point of topic/partition from the
// remote tier: the offset to restart the log at, the producer-state
// snapshot at that offset (engine/producerstate format) and the
// leader-epoch history up to it. It does I/O (object store): the follower
// calls it off its fetch loop, with a deadline in ctx.
type RemoteRestartFunc func(ctx context.Context, topic string, partition int32) (offset int64, producerSnapshot []byte, epochs []epochcache.Entry, err error)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		ReplicaLagTimeMax:     30 * time.Second,
		FetchMaxWait:          500 * time.Millisecond,
		FetchMinBytes:         1,
		FetchMaxBytes:         10 << 20,
		PartitionMaxBytes:     1 << 20,
		FetchBackoff:          time.Second,
		MetadataLagBackoff:    5 * time.Millisecond,
		AlterPartitionBackoff: 100 * time.Millisecond,
	}
}

// Validate checks fields alone and against each other.
func (c Config) Validate() error {
	switch {
	case c.ReplicaLagTimeMax <= 0:
		return fmt.Errorf("replication: ReplicaLagTimeMax %v must be positive", c.ReplicaLagTimeMax)
	case c.FetchMaxWait < 0:
		return fmt.Errorf("replication: FetchMaxWait %v must not be negative", c.FetchMaxWait)
	case c.FetchMaxWait >= c.ReplicaLagTimeMax:
		// A follower long-polling an idle leader must still refresh its
		// caught-up time before the lag window closes.
		return fmt.Errorf("replication: FetchMaxWait %v must be below ReplicaLagTimeMax %v", c.FetchMaxWait, c.ReplicaLagTimeMax)
	case c.FetchMinBytes < 0:
		return fmt.Errorf("replication: FetchMinBytes %d must not be negative", c.FetchMinBytes)
	case c.PartitionMaxBytes <= 0 || c.FetchMaxBytes <= 0:
		return fmt.Errorf("replication: FetchMaxBytes %d and PartitionMaxBytes %d must be positive", c.FetchMaxBytes, c.PartitionMaxBytes)
	case c.FetchBackoff <= 0 || c.AlterPartitionBackoff <= 0:
		return fmt.Errorf("replication: FetchBackoff %v and AlterPartitionBackoff %v must be positive", c.FetchBackoff, c.AlterPartitionBackoff)
	case c.RemoteRestartTimeout < 0:
		return fmt.Errorf("replication: RemoteRestartTimeout %v must not be negative", c.RemoteRestartTimeout)
	case c.MetadataLagBackoff <= 0 || c.MetadataLagBackoff > c.FetchBackoff:
		return fmt.Errorf("replication: MetadataLagBackoff %v must be positive and at most FetchBackoff %v", c.MetadataLagBackoff, c.FetchBackoff)
	}
	return nil
}
