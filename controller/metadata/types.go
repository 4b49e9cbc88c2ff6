package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
)

// UUID is a 16-byte identifier: topic ids and broker incarnation ids, as
// Kafka uses them. The zero UUID means "none".
type UUID [16]byte

// NewUUID returns a random (version 4) UUID. Only the controller calls it,
// before proposing a command: the state machine itself never draws
// randomness, so every replica computes the same state.
func NewUUID() UUID {
	var u UUID
	if _, err := rand.Read(u[:]); err != nil {
		panic(fmt.Sprintf("metadata: crypto/rand: %v", err))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// IsZero reports whether u is the zero UUID.
func (u UUID) IsZero() bool { return u == UUID{} }

func (u UUID) String() string { return hex.EncodeToString(u[:]) }

// MarshalText encodes u as 32 hex digits (used by the JSON snapshot and
// command encodings).
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (u *UUID) UnmarshalText(b []byte) error {
	if len(b) != 32 {
		return fmt.Errorf("metadata: uuid %q: want 32 hex digits", b)
	}
	_, err := hex.Decode(u[:], b)
	return err
}

// Endpoint is one listener a broker serves clients on.
type Endpoint struct {
	Listener string // listener name, e.g. "PLAINTEXT"
	Host     string
	Port     int32
}

// Broker is a registered broker. Values handed out by an Image share their
// Endpoints slice with it: treat them as read-only.
type Broker struct {
	ID int32
	// Incarnation changes on every process start; a registration with a new
	// incarnation replaces the old record (the old process is gone).
	Incarnation UUID
	// Epoch is the raft index of the registration record (KRaft's broker
	// epoch). Heartbeats, AlterPartition and fencing carry it so requests
	// from an older incarnation are rejected.
	Epoch     uint64
	Endpoints []Endpoint
	Rack      string
	// Fenced brokers lead nothing and are not added to ISRs. A broker is
	// fenced from registration until it reports it has caught up with the
	// metadata log, and again when its heartbeats stop.
	Fenced bool
}

// Topic is a topic and its partitions. Values handed out by an Image share
// Configs and Partitions with it: treat them as read-only.
type Topic struct {
	ID         UUID
	Name       string
	Configs    map[string]string // only keys set explicitly on the topic
	Partitions []Partition
}

// NoLeader is Partition.Leader when no replica may lead.
const NoLeader int32 = -1

// Partition is the replication state of one partition.
type Partition struct {
	Replicas []int32 // assignment; Replicas[0] is the preferred leader
	ISR      []int32 // in-sync replicas, always a subset of Replicas
	Leader   int32   // NoLeader when offline
	// LeaderEpoch grows whenever the leader changes.
	LeaderEpoch int32
	// PartitionEpoch grows on every change (leader or ISR); AlterPartition
	// carries the one the leader saw, so a stale change is rejected.
	PartitionEpoch int32
	// Offline are replicas whose log failed on their broker's disk
	// (ReplicaOffline). They neither lead nor rejoin the ISR until their
	// broker registers again (a restart recovers the log).
	Offline []int32 `json:",omitempty"`
	// A reassignment in progress (KIP-455): Replicas holds the target
	// replicas first, then the original replicas that are not in the
	// target. AddingReplicas are target replicas that were not original
	// ones (they catch up through the follower path and join the ISR);
	// RemovingReplicas are original replicas not in the target (they
	// leave once every adding replica is in the ISR). Both are empty when
	// no reassignment is in progress.
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
}

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// TargetReplicas is the assignment p has once its reassignment completes
// (Replicas less RemovingReplicas); Replicas when none is in progress.
func (p Partition) TargetReplicas() []int32 {
	if len(p.RemovingReplicas) == 0 {
		return p.Replicas
	}
	out := make([]int32, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		if !contains(p.RemovingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

func (p Partition) clone() Partition {
	p.Replicas = append([]int32(nil), p.Replicas...)
	p.ISR = append([]int32(nil), p.ISR...)
	p.Offline = slices.Clone(p.Offline)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	return p
}

// ProducerIDBlockSize is how many producer ids AllocateProducerIDs hands
// out at once.
const ProducerIDBlockSize = 1000

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func without(s []int32, v int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
