package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/vfs"
)

// Config configures an Engine. Every field is documented with its default.
type Config struct {
	// Dir is the data directory (required).
	Dir string
	// FS is the file system; nil means the OS (vfs.Default).
	FS vfs.FS
	// Fsync says when appends are flushed (FsyncAlways).
	Fsync FsyncPolicy
	// FsyncInterval is the flush period under FsyncInterval (1 s).
	FsyncInterval time.Duration
	// Journal makes FsyncAlways durable through the broker-wide journal
	// (journal.go): one fdatasync of one file per round, whatever the
	// number of dirty partitions, segments checkpointed in the background
	// (true). false keeps one fdatasync per dirty partition per round.
	// Other fsync policies never use it.
	Journal bool
	// JournalBytes is the journal file's size, preallocated (64 MiB, at
	// least MinJournalBytes). A checkpoint starts after 1 MiB (or an eighth, if less) was written.
	JournalBytes int64
	// JournalBuffered writes the journal through the page cache and
	// fdatasyncs it, instead of O_DIRECT writes with RWF_DSYNC (the
	// default where the file system takes O_DIRECT): for comparison, and
	// for file systems that mishandle O_DIRECT.
	JournalBuffered bool
	// JournalCommitInterval paces group commit under load: while the
	// journal is busy (commitPacer: two writes in a row each carried two
	// records or more and saw more arrive while in flight), a journal
	// write starts at most once per interval, so each barrier carries more
	// appends and the broker runs fewer rounds (1ms). Otherwise the
	// journal writes at once, so a light load, or a producer waiting for
	// its answer, never waits; 0 never waits.
	JournalCommitInterval time.Duration
	// Defaults apply to topics that do not override them.
	Defaults TopicConfig
	// RetentionCheckInterval is how often retention runs (5 min).
	RetentionCheckInterval time.Duration
	// AwaitDynamicDefaults holds the periodic retention pass until the
	// first SetDynamicDefaults (false): a clustered broker learns the
	// dynamic broker configs from the metadata log only after start, and a
	// pass over the static defaults alone could delete segments that a
	// longer dynamic log.retention.ms keeps.
	AwaitDynamicDefaults bool
	// CheckpointInterval is how often recovery points are written (1 min).
	CheckpointInterval time.Duration
	// HWCheckpointInterval is how often replication-offset-checkpoint
	// (the high watermarks) is written (5s, Kafka's
	// replica.high.watermark.checkpoint.interval.ms); also at Close.
	HWCheckpointInterval time.Duration
	// Logger receives engine events; nil means slog.Default().
	Logger *slog.Logger
	// IOMode picks the write path: "auto", "uring" or "sync" ("auto").
	// auto uses io_uring when iouring.Probe succeeds and FS is the OS file
	// system, else pwrite/fdatasync; uring makes Open fail when io_uring
	// is unavailable. In-memory and fault-injecting FSs always use sync.
	IOMode string
	// ProducerState configures idempotent/transactional producer state;
	// a zero ProducerIDExpiration means producerstate.DefaultConfig's.
	ProducerState producerstate.Config
	// CleanerInterval is how often the log cleaner looks for compacted
	// topics' partitions to clean (15 s; cleaner.go).
	CleanerInterval time.Duration
	// MinFreeBytes and MinFreePercent set the free-space threshold of the
	// data directory's file system (diskspace.go): below max(MinFreeBytes,
	// MinFreePercent% of its size) client appends are refused with
	// ErrDiskFull so the rest stays as a reserve for metadata writes
	// (8 MiB and 5%: 8 MiB on a 100 MB test file system, 5% on large
	// disks). Both 0 disables the threshold.
	MinFreeBytes   int64
	MinFreePercent float64
	// DiskCheckInterval is how often the free space is sampled (1 s); it
	// is also sampled after deletions and when appends cross the threshold.
	DiskCheckInterval time.Duration
	// StatFS reports free and total bytes of the data directory's file
	// system; nil means statfs(2) (OSStatFS). Tests replace it.
	StatFS StatFSFunc
}

// DefaultConfig returns a Config with every default filled in but Dir.
func DefaultConfig() Config {
	return Config{
		Fsync:                  FsyncAlways,
		FsyncInterval:          time.Second,
		Journal:                true,
		JournalBytes:           64 << 20,
		JournalCommitInterval:  time.Millisecond,
		Defaults:               DefaultTopicConfig(),
		RetentionCheckInterval: 5 * time.Minute,
		CheckpointInterval:     time.Minute,
		HWCheckpointInterval:   5 * time.Second,
		IOMode:                 "auto",
		CleanerInterval:        15 * time.Second,
		MinFreeBytes:           8 << 20,
		MinFreePercent:         5,
		DiskCheckInterval:      time.Second,
	}
}

// Validate checks the fields and their combinations.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("engine: Config.Dir is empty")
	}
	switch c.Fsync {
	case FsyncAlways, FsyncNever:
	case FsyncInterval:
		if c.FsyncInterval <= 0 {
			return fmt.Errorf("engine: Fsync is interval but FsyncInterval is %v", c.FsyncInterval)
		}
	default:
		return fmt.Errorf("engine: unknown FsyncPolicy %d", c.Fsync)
	}
	if c.Fsync == FsyncAlways && c.Journal && (c.JournalBytes < MinJournalBytes || c.JournalBytes > 1<<40) {
		return fmt.Errorf("engine: JournalBytes %d must be in [%d, 1 TiB] with Journal on", c.JournalBytes, MinJournalBytes)
	}
	if c.JournalCommitInterval < 0 || c.JournalCommitInterval > maxJournalCommitInterval {
		return fmt.Errorf("engine: JournalCommitInterval %v must be in [0, %v]", c.JournalCommitInterval, maxJournalCommitInterval)
	}
	if c.RetentionCheckInterval <= 0 {
		return fmt.Errorf("engine: RetentionCheckInterval %v must be positive", c.RetentionCheckInterval)
	}
	if c.HWCheckpointInterval <= 0 {
		return fmt.Errorf("engine: HWCheckpointInterval %v must be positive", c.HWCheckpointInterval)
	}
	if c.CheckpointInterval <= 0 {
		return fmt.Errorf("engine: CheckpointInterval %v must be positive", c.CheckpointInterval)
	}
	if c.CleanerInterval <= 0 {
		return fmt.Errorf("engine: CleanerInterval %v must be positive", c.CleanerInterval)
	}
	if c.MinFreeBytes < 0 {
		return fmt.Errorf("engine: MinFreeBytes %d must not be negative", c.MinFreeBytes)
	}
	if c.MinFreePercent < 0 || c.MinFreePercent >= 100 {
		return fmt.Errorf("engine: MinFreePercent %v must be in [0, 100)", c.MinFreePercent)
	}
	if c.DiskCheckInterval <= 0 {
		return fmt.Errorf("engine: DiskCheckInterval %v must be positive", c.DiskCheckInterval)
	}
	switch c.IOMode {
	case "auto", "uring", "sync":
	default:
		return fmt.Errorf("engine: IOMode %q is not auto, uring or sync", c.IOMode)
	}
	if err := c.Defaults.validate(); err != nil {
		return fmt.Errorf("engine: Config.Defaults: %w", err)
	}
	return nil
}

// ParseFsyncPolicy parses "always", "interval" or "never".
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch strings.ToLower(s) {
	case "always":
		return FsyncAlways, nil
	case "interval":
		return FsyncInterval, nil
	case "never":
		return FsyncNever, nil
	}
	return 0, fmt.Errorf("engine: unknown fsync policy %q (always, interval, never)", s)
}

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	case FsyncNever:
		return "never"
	}
	return "FsyncPolicy(" + strconv.Itoa(int(p)) + ")"
}

// DefaultTopicConfig returns Kafka's defaults.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		RetentionMs:        604800000,
		RetentionBytes:     -1,
		MaxMessageBytes:    1048588,
		IndexIntervalBytes: 4096,
		CleanupPolicy:      "delete",
		MinInsyncReplicas:  1,
		// Kafka's log.cleaner.delete.retention.ms and
		// log.cleaner.min.cleanable.ratio.
		DeleteRetentionMs:      86400000,
		MinCleanableDirtyRatio: 0.5,
		LocalRetentionMs:       -2,
		LocalRetentionBytes:    -2,
	}
}

// Topic config keys, Kafka spelling.
const (
	keySegmentBytes       = "segment.bytes"
	keySegmentMs          = "segment.ms"
	keyRetentionMs        = "retention.ms"
	keyRetentionBytes     = "retention.bytes"
	keyMaxMessageBytes    = "max.message.bytes"
	keyIndexIntervalBytes = "index.interval.bytes"
	keyTimestampType      = "message.timestamp.type"
	keyCleanupPolicy      = "cleanup.policy"
	keyMinInsyncReplicas  = "min.insync.replicas"
	keyUncleanElection    = "unclean.leader.election.enable"
	keyDeleteRetentionMs  = "delete.retention.ms"
	keyMinCleanableRatio  = "min.cleanable.dirty.ratio"
	// Tiered storage (KIP-405).
	keyRemoteStorageEnable = "remote.storage.enable"
	keyLocalRetentionMs    = "local.retention.ms"
	keyLocalRetentionBytes = "local.retention.bytes"
)

// Exported spellings of the tiered-storage keys, for the broker and netpath.
const (
	RemoteStorageEnableKey = keyRemoteStorageEnable
	LocalRetentionMsKey    = keyLocalRetentionMs
	LocalRetentionBytesKey = keyLocalRetentionBytes
)

var topicConfigKeys = []string{
	keyCleanupPolicy, keyIndexIntervalBytes, keyMaxMessageBytes, keyTimestampType,
	keyMinInsyncReplicas, keyRetentionBytes, keyRetentionMs, keySegmentBytes, keySegmentMs,
	keyUncleanElection, keyDeleteRetentionMs, keyMinCleanableRatio,
	keyLeaderThrottledReplicas, keyFollowerThrottledReplicas,
	keyRemoteStorageEnable, keyLocalRetentionMs, keyLocalRetentionBytes,
}

// ParseTopicConfig applies kv (Kafka key names) on top of base. Unknown
// keys and bad values fail with ErrInvalidConfig.
func ParseTopicConfig(base TopicConfig, kv map[string]string) (TopicConfig, error) {
	c := base
	c.overrides = make(map[string]string, len(base.overrides)+len(kv))
	for k, v := range base.overrides {
		c.overrides[k] = v
	}
	for k, v := range kv {
		if err := c.set(k, v); err != nil {
			return base, err
		}
		c.overrides[k] = v
	}
	if err := c.validate(); err != nil {
		return base, err
	}
	return c, nil
}

func (c *TopicConfig) set(k, v string) error {
	bad := func(err error) error {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, k, v, err)
	}
	integer := func(lo, hi int64) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, bad(err)
		}
		if n < lo || n > hi {
			return 0, bad(fmt.Errorf("out of range [%d, %d]", lo, hi))
		}
		return n, nil
	}
	boolean := func() (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, bad(errors.New("want true or false"))
		}
		return b, nil
	}
	var err error
	var n int64
	switch k {
	case keySegmentBytes:
		// Positions in the .index are uint32 and Kafka caps it at int32.
		n, err = integer(14, math.MaxInt32)
		c.SegmentBytes = n
	case keySegmentMs:
		n, err = integer(1, math.MaxInt64)
		c.SegmentMs = n
	case keyRetentionMs:
		n, err = integer(-1, math.MaxInt64)
		c.RetentionMs = n
	case keyRetentionBytes:
		n, err = integer(-1, math.MaxInt64)
		c.RetentionBytes = n
	case keyMaxMessageBytes:
		n, err = integer(0, math.MaxInt32)
		c.MaxMessageBytes = int32(n)
	case keyIndexIntervalBytes:
		n, err = integer(0, math.MaxInt32)
		c.IndexIntervalBytes = int32(n)
	case keyMinInsyncReplicas:
		n, err = integer(1, math.MaxInt32)
		c.MinInsyncReplicas = int32(n)
	case keyUncleanElection:
		c.UncleanLeaderElection, err = boolean()
	case keyRemoteStorageEnable:
		c.RemoteStorageEnable, err = boolean()
	case keyLocalRetentionMs, keyLocalRetentionBytes:
		// -2: follow retention.*; -1: unlimited.
		n, err = integer(-2, math.MaxInt64)
		if k == keyLocalRetentionMs {
			c.LocalRetentionMs = n
		} else {
			c.LocalRetentionBytes = n
		}
	case keyTimestampType:
		switch v {
		case "CreateTime":
			c.TimestampTypeLogAppend = false
		case "LogAppendTime":
			c.TimestampTypeLogAppend = true
		default:
			err = bad(errors.New("want CreateTime or LogAppendTime"))
		}
	case keyCleanupPolicy:
		var p string
		if p, err = parseCleanupPolicy(v); err != nil {
			err = bad(err)
		}
		c.CleanupPolicy = p
	case keyDeleteRetentionMs:
		n, err = integer(0, math.MaxInt64)
		c.DeleteRetentionMs = n
	case keyMinCleanableRatio:
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || f < 0 || f > 1 {
			err = bad(errors.New("want a number in [0, 1]"))
		}
		c.MinCleanableDirtyRatio = f
	case keyLeaderThrottledReplicas, keyFollowerThrottledReplicas:
		canon, perr := canonicalThrottledReplicas(v)
		if perr != nil {
			err = bad(perr)
		} else if k == keyLeaderThrottledReplicas {
			c.LeaderThrottledReplicas = canon
		} else {
			c.FollowerThrottledReplicas = canon
		}
	default:
		err = fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, k)
	}
	return err
}

func (c TopicConfig) validate() error {
	if c.SegmentBytes < 14 || c.SegmentBytes > math.MaxInt32 {
		return fmt.Errorf("%w: segment.bytes %d", ErrInvalidConfig, c.SegmentBytes)
	}
	if c.SegmentMs < 1 || c.RetentionMs < -1 || c.RetentionBytes < -1 ||
		c.MaxMessageBytes < 0 || c.IndexIntervalBytes < 0 || c.MinInsyncReplicas < 1 {
		return fmt.Errorf("%w: value out of range in %+v", ErrInvalidConfig, c)
	}
	if _, err := parseCleanupPolicy(c.CleanupPolicy); err != nil {
		return fmt.Errorf("%w: cleanup.policy %q: %v", ErrInvalidConfig, c.CleanupPolicy, err)
	}
	if c.DeleteRetentionMs < 0 || !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1) {
		return fmt.Errorf("%w: delete.retention.ms %d, min.cleanable.dirty.ratio %v", ErrInvalidConfig, c.DeleteRetentionMs, c.MinCleanableDirtyRatio)
	}
	if c.LocalRetentionMs < -2 || c.LocalRetentionBytes < -2 {
		return fmt.Errorf("%w: local.retention.ms %d, local.retention.bytes %d: -2, -1 or >= 0", ErrInvalidConfig, c.LocalRetentionMs, c.LocalRetentionBytes)
	}
	if c.RemoteStorageEnable {
		return c.validateRemote()
	}
	return nil
}

// validateRemote applies Kafka's checks for remote-storage topics
// (LogConfig.validateRemoteStorageRetention*): they run only when remote
// storage is on, so a broker default of log.local.retention.* never
// makes an ordinary topic's config invalid.
func (c TopicConfig) validateRemote() error {
	if c.Compact() {
		return fmt.Errorf("%w: remote.storage.enable=true with cleanup.policy=%s: remote storage is unsupported for compacted topics", ErrInvalidConfig, c.CleanupPolicy)
	}
	check := func(localKey string, local int64, totalKey string, total int64) error {
		// -2 follows the total; an unlimited total allows any window.
		if local == -2 || total == -1 {
			return nil
		}
		if local == -1 {
			return fmt.Errorf("%w: %s=-1 (unlimited) with %s=%d: the local window cannot exceed the total", ErrInvalidConfig, localKey, totalKey, total)
		}
		if local > total {
			return fmt.Errorf("%w: %s=%d is more than %s=%d", ErrInvalidConfig, localKey, local, totalKey, total)
		}
		return nil
	}
	if err := check(keyLocalRetentionMs, c.LocalRetentionMs, keyRetentionMs, c.RetentionMs); err != nil {
		return err
	}
	return check(keyLocalRetentionBytes, c.LocalRetentionBytes, keyRetentionBytes, c.RetentionBytes)
}

// LocalRetention returns the local retention in force (-1: unlimited):
// local.retention.* with -2 resolved to retention.*. Only remote-storage
// topics apply it; the others keep retention.* locally.
func (c TopicConfig) LocalRetention() (ms, bytes int64) {
	ms, bytes = c.LocalRetentionMs, c.LocalRetentionBytes
	if ms == -2 {
		ms = c.RetentionMs
	}
	if bytes == -2 {
		bytes = c.RetentionBytes
	}
	return ms, bytes
}

// CheckConfigChange refuses config changes that cannot be applied to an
// existing topic: turning remote.storage.enable off once on (Kafka
// refuses it too: the remote copy would be orphaned and the local log no
// longer holds the data below the hot window). Deleting the topic is the
// way out. AlterConfigs calls it with the topic's current and resulting
// configs.
func CheckConfigChange(old, next TopicConfig) error {
	if old.RemoteStorageEnable && !next.RemoteStorageEnable {
		return fmt.Errorf("%w: remote.storage.enable cannot be turned off once on (delete the topic instead)", ErrInvalidConfig)
	}
	return nil
}

// parseCleanupPolicy accepts Kafka's list: "delete", "compact" or both,
// in either order, and returns the canonical spelling ("compact,delete"
// for both).
func parseCleanupPolicy(v string) (string, error) {
	var compact, del bool
	for _, f := range strings.Split(v, ",") {
		switch strings.TrimSpace(f) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return "", errors.New(`want "delete", "compact" or "compact,delete"`)
		}
	}
	switch {
	case compact && del:
		return "compact,delete", nil
	case compact:
		return "compact", nil
	}
	return "delete", nil
}

// Compact reports whether cleanup.policy includes compact: the cleaner
// keeps the latest record per key (cleaner.go).
func (c TopicConfig) Compact() bool { return strings.Contains(c.CleanupPolicy, "compact") }

// DeleteByRetention reports whether cleanup.policy includes delete:
// retention.ms and retention.bytes remove whole segments. A compact-only
// topic keeps its segments however old or large (Kafka).
func (c TopicConfig) DeleteByRetention() bool { return strings.Contains(c.CleanupPolicy, "delete") }

func (c TopicConfig) value(k string) string {
	switch k {
	case keySegmentBytes:
		return strconv.FormatInt(c.SegmentBytes, 10)
	case keySegmentMs:
		return strconv.FormatInt(c.SegmentMs, 10)
	case keyRetentionMs:
		return strconv.FormatInt(c.RetentionMs, 10)
	case keyRetentionBytes:
		return strconv.FormatInt(c.RetentionBytes, 10)
	case keyMaxMessageBytes:
		return strconv.FormatInt(int64(c.MaxMessageBytes), 10)
	case keyIndexIntervalBytes:
		return strconv.FormatInt(int64(c.IndexIntervalBytes), 10)
	case keyMinInsyncReplicas:
		return strconv.FormatInt(int64(c.MinInsyncReplicas), 10)
	case keyUncleanElection:
		return strconv.FormatBool(c.UncleanLeaderElection)
	case keyTimestampType:
		if c.TimestampTypeLogAppend {
			return "LogAppendTime"
		}
		return "CreateTime"
	case keyCleanupPolicy:
		return c.CleanupPolicy
	case keyDeleteRetentionMs:
		return strconv.FormatInt(c.DeleteRetentionMs, 10)
	case keyMinCleanableRatio:
		return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64)
	case keyLeaderThrottledReplicas:
		return c.LeaderThrottledReplicas
	case keyFollowerThrottledReplicas:
		return c.FollowerThrottledReplicas
	case keyRemoteStorageEnable:
		return strconv.FormatBool(c.RemoteStorageEnable)
	case keyLocalRetentionMs:
		return strconv.FormatInt(c.LocalRetentionMs, 10)
	case keyLocalRetentionBytes:
		return strconv.FormatInt(c.LocalRetentionBytes, 10)
	}
	return ""
}

// Entries lists every supported key with its effective value, sorted.
func (c TopicConfig) Entries() []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicConfigKeys))
	for _, k := range topicConfigKeys {
		_, set := c.overrides[k]
		out = append(out, ConfigEntry{Name: k, Value: c.value(k), IsDefault: !set})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Overrides returns a copy of the keys set explicitly on the topic.
func (c TopicConfig) Overrides() map[string]string {
	m := make(map[string]string, len(c.overrides))
	for k, v := range c.overrides {
		m[k] = v
	}
	return m
}

// ValidateTopicName applies Kafka's rules: 1..249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopicName(name string) error {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%w: %q has illegal character %q", ErrInvalidTopic, name, r)
		}
	}
	return nil
}
