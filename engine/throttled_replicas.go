package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The replication throttle's topic configs (KIP-73), lists of
// partition:brokerId naming the broker a throttle applies on:
// leader.replication.throttled.replicas the leader (which throttles the
// followers of that partition), follower.replication.throttled.replicas
// the follower (which throttles its own fetches). The engine only
// validates and keeps
// them; the broker (broker/throttle.go) reads them from the metadata
// image and enforces leader.replication.throttled.rate and
// follower.replication.throttled.rate on the fetch paths.

const (
	keyLeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	keyFollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

// Topic config keys of the throttled replica lists, for the broker.
const (
	LeaderThrottledReplicasKey   = keyLeaderThrottledReplicas
	FollowerThrottledReplicasKey = keyFollowerThrottledReplicas
)

// ThrottledReplica is one "partition:brokerId" entry of a throttled
// replica list.
type ThrottledReplica struct {
	Partition, Broker int32
}

// ThrottledReplicas is a parsed throttled replica list: Kafka's literal
// "*" (every replica of the topic) or a list of partition:broker pairs.
// The zero value (Kafka's default, "") throttles nothing.
type ThrottledReplicas struct {
	All     bool
	Entries []ThrottledReplica
}

var errThrottledReplicas = errors.New(`want "*" or a list partitionId:brokerId,partitionId:brokerId,...`)

// ParseThrottledReplicas parses a throttled replica list the way Kafka's
// ThrottledReplicaListValidator accepts it: "*" alone, or comma
// separated entries that are each empty or digits:digits (spaces around
// entries allowed). Ids must fit an int32.
func ParseThrottledReplicas(v string) (ThrottledReplicas, error) {
	if strings.TrimSpace(v) == "*" {
		return ThrottledReplicas{All: true}, nil
	}
	var out ThrottledReplicas
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ps, bs, ok := strings.Cut(f, ":")
		p, perr := parseDigits(ps)
		b, berr := parseDigits(bs)
		if !ok || perr != nil || berr != nil {
			return ThrottledReplicas{}, fmt.Errorf("%q: %w", f, errThrottledReplicas)
		}
		out.Entries = append(out.Entries, ThrottledReplica{Partition: p, Broker: b})
	}
	return out, nil
}

// parseDigits accepts only [0-9]+ (no sign) within int32.
func parseDigits(s string) (int32, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errThrottledReplicas
	}
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err
}

// Has reports whether the list throttles broker's replica of partition.
func (t ThrottledReplicas) Has(partition, broker int32) bool {
	return t.All || slices.Contains(t.Entries, ThrottledReplica{partition, broker})
}

// Empty reports whether the list throttles nothing.
func (t ThrottledReplicas) Empty() bool { return !t.All && len(t.Entries) == 0 }

// canonicalThrottledReplicas is v's stored spelling: "*" or the entries
// trimmed and joined by commas.
func canonicalThrottledReplicas(v string) (string, error) {
	t, err := ParseThrottledReplicas(v)
	if err != nil {
		return "", err
	}
	if t.All {
		return "*", nil
	}
	parts := make([]string, len(t.Entries))
	for i, e := range t.Entries {
		parts[i] = fmt.Sprintf("%d:%d", e.Partition, e.Broker)
	}
	return strings.Join(parts, ","), nil
}
