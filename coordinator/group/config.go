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
