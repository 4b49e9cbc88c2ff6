package share

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is the broker-wide share-group settings (Kafka's group.share.*).
type Config struct {
	// RecordLockDuration is how long an acquired record stays locked to
	// its consumer (group.share.record.lock.duration.ms, 30s); a group
	// may override it with share.record.lock.duration.ms.
	RecordLockDuration time.Duration
	// MaxRecordLocks bounds the in-flight window of one share-partition
	// (group.share.partition.max.record.locks, 2000).
	MaxRecordLocks int
	// DeliveryCountLimit is how many times a record is delivered before it
	// is archived (group.share.delivery.count.limit, 5).
	DeliveryCountLimit int
	// MaxSessions bounds the share sessions of the broker
	// (group.share.max.share.sessions, 2000 in Kafka; higher here, as a
	// session is a few hundred bytes).
	MaxSessions int
	// SessionIdle closes a share session nobody used for this long: its
	// member's acquired records are released (Kafka closes them with the
	// member's connection).
	SessionIdle time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		RecordLockDuration: 30 * time.Second,
		MaxRecordLocks:     2000,
		DeliveryCountLimit: 5,
		MaxSessions:        10000,
		SessionIdle:        2 * time.Minute,
	}
}

// Validate checks the settings against each other.
func (c Config) Validate() error {
	switch {
	case c.RecordLockDuration < time.Second || c.RecordLockDuration > time.Hour:
		return fmt.Errorf("share: RecordLockDuration %v must be between 1s and 1h", c.RecordLockDuration)
	case c.MaxRecordLocks < 100 || c.MaxRecordLocks > 1_000_000:
		return fmt.Errorf("share: MaxRecordLocks %d must be between 100 and 1000000", c.MaxRecordLocks)
	case c.DeliveryCountLimit < 2 || c.DeliveryCountLimit > 10:
		return fmt.Errorf("share: DeliveryCountLimit %d must be between 2 and 10", c.DeliveryCountLimit)
	case c.MaxSessions < 1:
		return fmt.Errorf("share: MaxSessions %d must be positive", c.MaxSessions)
	case c.SessionIdle <= c.RecordLockDuration:
		return fmt.Errorf("share: SessionIdle %v must exceed RecordLockDuration %v", c.SessionIdle, c.RecordLockDuration)
	}
	return nil
}

// Group config keys (Kafka's GROUP config resource) that share groups
// read. Each is validated by ParseGroupConfig.
const (
	KeyAutoOffsetReset    = "share.auto.offset.reset"
	KeyRecordLockDuration = "share.record.lock.duration.ms"
	KeyIsolationLevel     = "share.isolation.level"
	KeyDeliveryCountLimit = "share.delivery.count.limit"
)

// GroupConfigKeys lists the group configs this package honours, sorted.
func GroupConfigKeys() []string {
	return []string{KeyAutoOffsetReset, KeyDeliveryCountLimit, KeyIsolationLevel, KeyRecordLockDuration}
}

// GroupConfig is one group's effective share settings.
type GroupConfig struct {
	// Earliest: a share-partition without state starts at the log start
	// (share.auto.offset.reset=earliest); otherwise at the high
	// watermark (latest, Kafka's default).
	Earliest           bool
	RecordLockDuration time.Duration
	DeliveryCountLimit int
	// ReadUncommitted delivers records of open and aborted transactions
	// too (share.isolation.level=read_uncommitted); the default is
	// read_committed.
	ReadUncommitted bool
}

// GroupConfigValue is the value of key in cfg, as DescribeConfigs shows it.
func (c GroupConfig) Value(key string) string {
	switch key {
	case KeyAutoOffsetReset:
		if c.Earliest {
			return "earliest"
		}
		return "latest"
	case KeyRecordLockDuration:
		return strconv.FormatInt(c.RecordLockDuration.Milliseconds(), 10)
	case KeyIsolationLevel:
		if c.ReadUncommitted {
			return "read_uncommitted"
		}
		return "read_committed"
	case KeyDeliveryCountLimit:
		return strconv.Itoa(c.DeliveryCountLimit)
	}
	return ""
}

// ParseGroupConfig applies a group's dynamic configs kv over the broker's
// defaults. Unknown keys and bad values are errors wrapping
// ErrInvalidConfig.
func (c Config) ParseGroupConfig(kv map[string]string) (GroupConfig, error) {
	g := GroupConfig{RecordLockDuration: c.RecordLockDuration, DeliveryCountLimit: c.DeliveryCountLimit}
	for k, v := range kv {
		switch k {
		case KeyAutoOffsetReset:
			switch strings.ToLower(v) {
			case "earliest":
				g.Earliest = true
			case "latest":
				g.Earliest = false
			default:
				return g, fmt.Errorf("%w: %s=%q (earliest or latest)", ErrInvalidConfig, k, v)
			}
		case KeyRecordLockDuration:
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 1000 || ms > 3_600_000 {
				return g, fmt.Errorf("%w: %s=%q (1000 to 3600000)", ErrInvalidConfig, k, v)
			}
			g.RecordLockDuration = time.Duration(ms) * time.Millisecond
		case KeyIsolationLevel:
			switch strings.ToLower(v) {
			case "read_committed":
				g.ReadUncommitted = false
			case "read_uncommitted":
				g.ReadUncommitted = true
			default:
				return g, fmt.Errorf("%w: %s=%q (read_committed or read_uncommitted)", ErrInvalidConfig, k, v)
			}
		case KeyDeliveryCountLimit:
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 || n > 10 {
				return g, fmt.Errorf("%w: %s=%q (2 to 10)", ErrInvalidConfig, k, v)
			}
			g.DeliveryCountLimit = n
		default:
			return g, fmt.Errorf("%w: unknown group config %q (known: %s)", ErrInvalidConfig, k, strings.Join(GroupConfigKeys(), ", "))
		}
	}
	return g, nil
}
