package group

import (
	"slices"
	"strings"
)

// rangeAssignor is Kafka's server-side RangeAssignor ("range"): for each
// topic, the members subscribed to it, in order, get contiguous ranges of
// partitions; each gets partitions/members and the first
// partitions%members one more. Members with an instance id come first,
// ordered by it, then the others by member id, as in Kafka: a static
// member that restarts under a new member id keeps its place and so its
// ranges. Topics with the same partition count and the same subscribers
// get the same ranges (co-partitioning, for joins).
//
// Like Kafka's (3.7 to 4.x), it is not sticky beyond that: a member
// joining or leaving shifts the ranges after it. Groups that want minimal
// movement use "uniform".
type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeAssignorName }

func (rangeAssignor) Assign(spec *AssignSpec) map[string]Assignment {
	in := newAssignInput(spec)
	rank := make([]int, len(in.members))
	for r, mi := range rangeOrder(in) {
		rank[mi] = r
	}
	owner := make([][]int32, len(in.topics))
	for ti, t := range in.topics {
		owner[ti] = make([]int32, t.Partitions)
		subscribers := slices.Clone(in.topicMembers[ti])
		slices.SortFunc(subscribers, func(a, b int) int { return rank[a] - rank[b] })
		n := int32(len(subscribers))
		quota, extra := t.Partitions/n, t.Partitions%n
		p := int32(0)
		for i, mi := range subscribers {
			size := quota
			if int32(i) < extra {
				size++
			}
			for end := p + size; p < end; p++ {
				owner[ti][p] = int32(mi)
			}
		}
	}
	return in.result(owner)
}

// rangeOrder returns the member indexes in Kafka's range order.
func rangeOrder(in *assignInput) []int {
	order := make([]int, len(in.members))
	for i := range order {
		order[i] = i
	}
	// Members are sorted by id already, so a stable sort on the instance
	// id alone gives Kafka's order.
	slices.SortStableFunc(order, func(a, b int) int {
		ia, ib := in.members[a].InstanceID, in.members[b].InstanceID
		switch {
		case ia != nil && ib != nil:
			return strings.Compare(*ia, *ib)
		case ia != nil:
			return -1
		case ib != nil:
			return 1
		}
		return 0
	})
	return order
}
