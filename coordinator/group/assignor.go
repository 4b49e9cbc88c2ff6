package group

import (
	"bytes"
	"slices"
	"strings"
)

// Server-side assignors of the consumer protocol (KIP-848): the broker
// computes every member's target assignment from the members'
// subscriptions, and the coordinator runs it under the group's lock, so
// an assignor is pure computation: no I/O, no clock, no randomness.
//
// Both assignors ignore racks (AssignMember.RackID): Kafka's rack-aware
// variants need per-partition replica racks, which the Topics view does
// not carry.

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	MemberID   string
	InstanceID *string
	RackID     *string
	// Subscribed is the member's resolved subscription (names and regex),
	// sorted, holding only topics that exist.
	Subscribed []TopicID
	// Current is the member's current target assignment, for stickiness.
	Current Assignment
}

// AssignSpec is an assignor's input.
type AssignSpec struct {
	Members []AssignMember // sorted by MemberID
	Topics  map[TopicID]TopicInfo
}

// Assignor computes a target assignment: every partition of every topic
// some member subscribes to goes to exactly one member subscribed to it.
// It must be deterministic (same spec, same result).
type Assignor interface {
	Name() string
	// Assign returns an entry for every member (empty when it gets none).
	Assign(spec *AssignSpec) map[string]Assignment
}

// Assignor names, as ConsumerGroupHeartbeat's ServerAssignor and the
// broker's ConsumerAssignors setting spell them.
const (
	UniformAssignorName = "uniform"
	RangeAssignorName   = "range"
)

// NewAssignor returns the assignor called name ("uniform" or "range").
func NewAssignor(name string) (Assignor, bool) {
	switch name {
	case UniformAssignorName:
		return uniformAssignor{}, true
	case RangeAssignorName:
		return rangeAssignor{}, true
	}
	return nil, false
}

// assignInput is an AssignSpec in index form, shared by both assignors:
// topics sorted by id, members sorted by id, subscriptions as topic
// indexes. Iterating these slices, never a map, is what makes the result
// deterministic.
type assignInput struct {
	members []*AssignMember
	topics  []TopicInfo // subscribed by some member, Partitions > 0, sorted by ID
	subs    [][]int     // member index -> sorted, distinct topic indexes
	// topicMembers lists, per topic index, the subscribed member indexes
	// in member order.
	topicMembers [][]int
}

func newAssignInput(spec *AssignSpec) *assignInput {
	in := &assignInput{members: make([]*AssignMember, len(spec.Members))}
	for i := range spec.Members {
		in.members[i] = &spec.Members[i]
	}
	// The contract says sorted; sorting again costs little and keeps the
	// result independent of a caller's mistake.
	slices.SortStableFunc(in.members, func(a, b *AssignMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	used := make(map[TopicID]bool)
	for _, m := range in.members {
		for _, id := range m.Subscribed {
			if t, ok := spec.Topics[id]; ok && t.Partitions > 0 {
				used[id] = true
			}
		}
	}
	for id := range used {
		t := spec.Topics[id]
		t.ID = id
		in.topics = append(in.topics, t)
	}
	slices.SortFunc(in.topics, func(a, b TopicInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	index := make(map[TopicID]int, len(in.topics))
	for i, t := range in.topics {
		index[t.ID] = i
	}
	in.subs = make([][]int, len(in.members))
	in.topicMembers = make([][]int, len(in.topics))
	for mi, m := range in.members {
		var s []int
		for _, id := range m.Subscribed {
			if ti, ok := index[id]; ok {
				s = append(s, ti)
			}
		}
		slices.Sort(s)
		s = slices.Compact(s)
		in.subs[mi] = s
		for _, ti := range s {
			in.topicMembers[ti] = append(in.topicMembers[ti], mi)
		}
	}
	return in
}

// result turns per-topic owner tables (member index or -1 per partition)
// into the assignors' answer: an entry, maybe empty, for every member,
// partitions ascending.
func (in *assignInput) result(owner [][]int32) map[string]Assignment {
	out := make(map[string]Assignment, len(in.members))
	for _, m := range in.members {
		out[m.MemberID] = Assignment{}
	}
	for ti, owners := range owner {
		id := in.topics[ti].ID
		for p, mi := range owners {
			if mi >= 0 {
				a := out[in.members[mi].MemberID]
				a[id] = append(a[id], int32(p))
			}
		}
	}
	return out
}
