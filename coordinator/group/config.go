package group

import (
	"fmt"
	"math"
	"time"
)

// Config holds the group coordinator's settings. Names in parentheses are
// the Kafka broker settings they mirror.
type Config struct {
	// OffsetsTopicPartitions is the partition count of __consumer_offsets
	// (offsets.topic.num.partitions). It must never change once groups
	// exist: PartitionFor would move them.
	OffsetsTopicPartitions int
	// InitialRebalanceDelay holds the first rebalance of an empty group so
	// that consumers starting together land in one generation instead of
	// one rebalance each (group.initial.rebalance.delay.ms). Each member
	// joining during the delay extends it, up to the rebalance timeout.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for (group.min/max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxGroupSize caps members plus KIP-394 pending members
	// (group.max.size).
	MaxGroupSize int
	// OffsetsRetention is how long an Empty group's offsets live after the
	// group became empty (offsets.retention.minutes, 7 days).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is how often Tick scans for expired
	// offsets (offsets.retention.check.interval.ms).
	OffsetsRetentionCheckInterval time.Duration
	// MaxOffsetMetadataBytes caps a commit's metadata string
	// (offset.metadata.max.bytes).
	MaxOffsetMetadataBytes int

	// KIP-848 consumer groups.

	// ConsumerSessionTimeout is how long a consumer-protocol member may
	// go without a heartbeat (group.consumer.session.timeout.ms).
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is the interval the coordinator tells
	// members to heartbeat at (group.consumer.heartbeat.interval.ms); it
	// is also how soon a member learns of a new assignment.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerMaxSize caps a consumer group's members
	// (group.consumer.max.size).
	ConsumerMaxSize int
	// ConsumerAssignors lists the server-side assignors members may name,
	// the first being the default (group.consumer.assignors): "uniform"
	// and "range".
	ConsumerAssignors []string
	// MigrationPolicy says which empty groups convert between the
	// protocols (group.consumer.migration.policy): "bidirectional",
	// "upgrade" (classic to consumer only), "downgrade" (consumer to
	// classic only) or "disabled".
	MigrationPolicy string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		OffsetsTopicPartitions:        50,
		InitialRebalanceDelay:         3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		MaxGroupSize:                  math.MaxInt32,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		MaxOffsetMetadataBytes:        4096,
		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerHeartbeatInterval:     5 * time.Second,
		ConsumerMaxSize:               math.MaxInt32,
		ConsumerAssignors:             []string{"uniform", "range"},
		MigrationPolicy:               "bidirectional",
	}
}

// Validate checks every field and the fields against each other.
func (c Config) Validate() error {
	switch {
	case c.OffsetsTopicPartitions <= 0:
		return fmt.Errorf("group: OffsetsTopicPartitions %d must be positive", c.OffsetsTopicPartitions)
	case c.InitialRebalanceDelay < 0:
		return fmt.Errorf("group: InitialRebalanceDelay %v must not be negative", c.InitialRebalanceDelay)
	case c.MinSessionTimeout <= 0:
		return fmt.Errorf("group: MinSessionTimeout %v must be positive", c.MinSessionTimeout)
	case c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("group: MaxSessionTimeout %v is below MinSessionTimeout %v", c.MaxSessionTimeout, c.MinSessionTimeout)
	case c.MaxGroupSize <= 0:
		return fmt.Errorf("group: MaxGroupSize %d must be positive", c.MaxGroupSize)
	case c.OffsetsRetention <= 0:
		return fmt.Errorf("group: OffsetsRetention %v must be positive", c.OffsetsRetention)
	case c.OffsetsRetentionCheckInterval <= 0:
		return fmt.Errorf("group: OffsetsRetentionCheckInterval %v must be positive", c.OffsetsRetentionCheckInterval)
	case c.OffsetsRetentionCheckInterval > c.OffsetsRetention:
		return fmt.Errorf("group: OffsetsRetentionCheckInterval %v exceeds OffsetsRetention %v", c.OffsetsRetentionCheckInterval, c.OffsetsRetention)
	case c.MaxOffsetMetadataBytes < 0:
		return fmt.Errorf("group: MaxOffsetMetadataBytes %d must not be negative", c.MaxOffsetMetadataBytes)
	case c.ConsumerSessionTimeout <= 0:
		return fmt.Errorf("group: ConsumerSessionTimeout %v must be positive", c.ConsumerSessionTimeout)
	case c.ConsumerHeartbeatInterval <= 0 || c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout:
		return fmt.Errorf("group: ConsumerHeartbeatInterval %v must be positive and below ConsumerSessionTimeout %v", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	case c.ConsumerMaxSize <= 0:
		return fmt.Errorf("group: ConsumerMaxSize %d must be positive", c.ConsumerMaxSize)
	case len(c.ConsumerAssignors) == 0:
		return fmt.Errorf("group: ConsumerAssignors must name at least one assignor")
	}
	for _, a := range c.ConsumerAssignors {
		if a != "uniform" && a != "range" {
			return fmt.Errorf("group: unknown consumer assignor %q (uniform, range)", a)
		}
	}
	switch c.MigrationPolicy {
	case "bidirectional", "upgrade", "downgrade", "disabled":
	default:
		return fmt.Errorf("group: MigrationPolicy %q is not bidirectional, upgrade, downgrade or disabled", c.MigrationPolicy)
	}
	return nil
}

// Clock tells the machine the time for requests. Deadlines fire only from
// Tick, so a test that owns the clock decides exactly when time passes.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
