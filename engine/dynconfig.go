package engine

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
)

// Dynamic broker configs: the cluster-wide topic defaults Kafka lets an
// operator change without a restart (kafka.server.DynamicLogConfig). The
// broker hands the engine the dynamic values from the metadata image
// (SetDynamicDefaults); topics without their own value take them at once,
// because every reader (append, retention, cleaner, replication) reads the
// topic's config per use.

// brokerTopicKeys maps the dynamic broker config keys ringlog honours to
// the topic config each is the default of (Kafka's synonyms).
var brokerTopicKeys = map[string]string{
	"log.retention.ms":                keyRetentionMs,
	"log.retention.bytes":             keyRetentionBytes,
	"log.segment.bytes":               keySegmentBytes,
	"log.roll.ms":                     keySegmentMs,
	"log.cleanup.policy":              keyCleanupPolicy,
	"log.index.interval.bytes":        keyIndexIntervalBytes,
	"log.message.timestamp.type":      keyTimestampType,
	"min.insync.replicas":             keyMinInsyncReplicas,
	"unclean.leader.election.enable":  keyUncleanElection,
	"log.cleaner.delete.retention.ms": keyDeleteRetentionMs,
	"log.cleaner.min.cleanable.ratio": keyMinCleanableRatio,
	"message.max.bytes":               keyMaxMessageBytes,
	"log.local.retention.ms":          keyLocalRetentionMs,
	"log.local.retention.bytes":       keyLocalRetentionBytes,
}

// Replication throttle rates (KIP-73), dynamic broker configs that are no
// topic's default: bytes per second, Kafka's default Long.MaxValue
// (unlimited). The engine only validates them; the broker enforces them
// (broker/throttle.go).
const (
	LeaderThrottledRateKey   = "leader.replication.throttled.rate"
	FollowerThrottledRateKey = "follower.replication.throttled.rate"
)

// brokerOnlyDefaults are the dynamic broker configs without a topic
// synonym, with Kafka's default value.
var brokerOnlyDefaults = map[string]string{
	LeaderThrottledRateKey:   strconv.FormatInt(math.MaxInt64, 10),
	FollowerThrottledRateKey: strconv.FormatInt(math.MaxInt64, 10),
}

// ParseThrottledRate parses a replication throttle rate: a long >= 0
// (Kafka's validator), in bytes per second.
func ParseThrottledRate(k, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s=%q: want bytes per second, a whole number >= 0", ErrInvalidConfig, k, v)
	}
	return n, nil
}

// DynamicBrokerKeys lists the broker config keys that may be set
// dynamically, sorted.
func DynamicBrokerKeys() []string {
	out := make([]string, 0, len(brokerTopicKeys)+len(brokerOnlyDefaults))
	for k := range brokerTopicKeys {
		out = append(out, k)
	}
	for k := range brokerOnlyDefaults {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IsDynamicBrokerKey reports whether bk may be set dynamically.
func IsDynamicBrokerKey(bk string) bool {
	_, topic := brokerTopicKeys[bk]
	_, only := brokerOnlyDefaults[bk]
	return topic || only
}

// BrokerOnlyDefault returns Kafka's default of a dynamic broker config
// that is no topic's default (ok false for the others).
func BrokerOnlyDefault(bk string) (string, bool) {
	v, ok := brokerOnlyDefaults[bk]
	return v, ok
}

// BrokerKeyFor returns the broker config key that is the default of topic
// config key k, if there is one.
func BrokerKeyFor(k string) (string, bool) {
	for bk, tk := range brokerTopicKeys {
		if tk == k {
			return bk, true
		}
	}
	return "", false
}

// TopicKeyFor returns the topic config key broker config key bk is the
// default of.
func TopicKeyFor(bk string) (string, bool) {
	tk, ok := brokerTopicKeys[bk]
	return tk, ok
}

// BrokerDefaults turns dynamic broker configs (broker key names) into
// topic-key overrides and checks them: unknown keys and bad values fail
// with ErrInvalidConfig. Keys that are no topic's default (the throttle
// rates) are checked and left out.
func BrokerDefaults(kv map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(kv))
	for k, v := range kv {
		if _, only := brokerOnlyDefaults[k]; only {
			if _, err := ParseThrottledRate(k, v); err != nil {
				return nil, err
			}
			continue
		}
		tk, ok := brokerTopicKeys[k]
		if !ok {
			return nil, fmt.Errorf("%w: %q is not a dynamic broker config", ErrInvalidConfig, k)
		}
		out[tk] = v
	}
	if _, err := ParseTopicConfig(DefaultTopicConfig(), out); err != nil {
		return nil, err
	}
	return out, nil
}

// StaticDefaults returns the topic defaults the engine was started with
// (the broker's flags), before any dynamic config.
func (e *Engine) StaticDefaults() TopicConfig { return e.cfg.Defaults }

// Defaults returns the topic defaults in force: the static ones with the
// dynamic broker configs applied.
func (e *Engine) Defaults() TopicConfig {
	if d := e.dynDefaults.Load(); d != nil {
		return *d
	}
	return e.cfg.Defaults
}

// SetDynamicDefaults applies the dynamic broker configs kv (topic key
// names, as BrokerDefaults returns them) over the static defaults, and
// re-derives the config of every topic, so topics without their own value
// follow at once. It reports whether anything changed.
func (e *Engine) SetDynamicDefaults(kv map[string]string) (bool, error) {
	// Known once the broker has looked, even when the values fail (the
	// previous defaults stay): retention must not wait forever.
	defer e.dynKnown.Store(true) // after the topics took the new defaults
	d, err := ParseTopicConfig(e.cfg.Defaults, kv)
	if err != nil {
		return false, err
	}
	// The defaults' own overrides are not the topic's: keep them out of
	// Entries' IsDefault.
	d.overrides = nil
	if old := e.Defaults(); sameValues(old, d) {
		return false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dynDefaults.Store(&d)
	for _, t := range e.topics {
		t.mu.Lock()
		if cfg, err := ParseTopicConfig(d, t.cfg.overrides); err == nil {
			t.cfg = cfg
		} else {
			e.log.Warn("topic config invalid over new broker defaults; kept", "topic", t.name, "err", err)
		}
		t.mu.Unlock()
	}
	return true, nil
}

// sameValues reports whether a and b have the same effective values and
// the same overrides.
func sameValues(a, b TopicConfig) bool {
	if !maps.Equal(a.overrides, b.overrides) {
		return false
	}
	for _, k := range topicConfigKeys {
		if a.value(k) != b.value(k) {
			return false
		}
	}
	return true
}

// ConfigValue returns c's value of topic config key k in Kafka's
// spelling ("" for an unknown key).
func ConfigValue(c TopicConfig, k string) string { return c.value(k) }
