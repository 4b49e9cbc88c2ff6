package group

import (
	"cmp"
	"slices"
)

// uniformAssignor is Kafka's UniformAssignor ("uniform", the default): it
// balances the number of partitions per member and is sticky, so a
// rebalance moves as few partitions as the balance allows. That is what
// keeps the consumer protocol's rebalances incremental: when one member
// of ten leaves, only its partitions move; when one joins, it takes only
// its share, each from a member over the new quota.
//
// It works in two shapes, as Kafka's does:
//
//   - Homogeneous (every member with a subscription subscribes to the same
//     topics): each member keeps its current partitions up to the quota
//     (partitions/members, plus one for the first partitions%members
//     members that already hold more); the released and unowned
//     partitions then fill the members below quota, in member order. The
//     result has max-min <= 1 and moves only the excess.
//   - Heterogeneous: each member keeps its current partitions; unowned
//     partitions go, topics with the fewest subscribers first, to the
//     least loaded subscriber; then partitions move from a member to a
//     less loaded subscriber of the same topic while that lowers the gap
//     by more than one. The result is balanced in the sense that no
//     single move would improve it (like Kafka's general builder, not a
//     global optimum across chains of moves).
type uniformAssignor struct{}

func (uniformAssignor) Name() string { return UniformAssignorName }

// tp is a partition in index form.
type tp struct {
	topic     int
	partition int32
}

type uniformState struct {
	in    *assignInput
	owner [][]int32 // topic index -> partition -> member index, -1 unowned
	owned [][]tp    // member index -> its partitions, sorted
}

func (uniformAssignor) Assign(spec *AssignSpec) map[string]Assignment {
	in := newAssignInput(spec)
	u := &uniformState{in: in, owner: make([][]int32, len(in.topics)), owned: make([][]tp, len(in.members))}
	for ti, t := range in.topics {
		u.owner[ti] = make([]int32, t.Partitions)
		for p := range u.owner[ti] {
			u.owner[ti][p] = -1
		}
	}
	u.keepCurrent()
	if active, ok := u.homogeneous(); ok {
		u.assignHomogeneous(active)
	} else {
		u.assignHeterogeneous()
	}
	return in.result(u.owner)
}

// keepCurrent gives every member the current partitions it may still own:
// of a topic it subscribes to, within the topic's partition count, and
// not already claimed by a member earlier in order (a spec where two
// members claim one partition is stale; the first keeps it).
func (u *uniformState) keepCurrent() {
	for mi, m := range u.in.members {
		if len(m.Current) == 0 {
			continue
		}
		for _, ti := range u.in.subs[mi] {
			for _, p := range m.Current[u.in.topics[ti].ID] {
				if p >= 0 && p < u.in.topics[ti].Partitions && u.owner[ti][p] < 0 {
					u.owner[ti][p] = int32(mi)
					u.owned[mi] = append(u.owned[mi], tp{ti, p})
				}
			}
		}
		slices.SortFunc(u.owned[mi], cmpTP)
		u.owned[mi] = slices.CompactFunc(u.owned[mi], func(a, b tp) bool { return a == b })
	}
}

func cmpTP(a, b tp) int {
	if c := cmp.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// homogeneous reports whether every member with a subscription subscribes
// to the same topics, and lists those members.
func (u *uniformState) homogeneous() ([]int, bool) {
	var active []int
	for mi, s := range u.in.subs {
		if len(s) == 0 {
			continue
		}
		if len(active) > 0 && !slices.Equal(s, u.in.subs[active[0]]) {
			return nil, false
		}
		active = append(active, mi)
	}
	return active, true
}

func (u *uniformState) release(mi int, keep int) {
	for _, x := range u.owned[mi][keep:] {
		u.owner[x.topic][x.partition] = -1
	}
	u.owned[mi] = u.owned[mi][:keep]
}

func (u *uniformState) give(mi int, x tp) {
	u.owner[x.topic][x.partition] = int32(mi)
	u.owned[mi] = append(u.owned[mi], x)
}

// unowned lists the partitions nobody holds, in topic then partition
// order.
func (u *uniformState) unowned() []tp {
	var free []tp
	for ti, owners := range u.owner {
		for p, mi := range owners {
			if mi < 0 {
				free = append(free, tp{ti, int32(p)})
			}
		}
	}
	return free
}

func (u *uniformState) assignHomogeneous(active []int) {
	if len(active) == 0 {
		return
	}
	total := 0
	for _, t := range u.in.topics {
		total += int(t.Partitions)
	}
	quota, extra := total/len(active), total%len(active)
	// Members holding more than the quota keep one extra while extras
	// last: a member that already had quota+1 should not give one up
	// only for another member to take one more.
	for _, mi := range active {
		if n := len(u.owned[mi]); n > quota {
			keep := quota
			if extra > 0 && n > quota {
				keep++
				extra--
			}
			u.release(mi, keep)
		}
	}
	free := u.unowned()
	next := 0
	for _, mi := range active {
		for len(u.owned[mi]) < quota && next < len(free) {
			u.give(mi, free[next])
			next++
		}
	}
	for _, mi := range active {
		if next >= len(free) || extra == 0 {
			break
		}
		if len(u.owned[mi]) == quota {
			u.give(mi, free[next])
			next++
			extra--
		}
	}
}

func (u *uniformState) assignHeterogeneous() {
	in := u.in
	free := u.unowned()
	// Partitions of topics with few subscribers have few homes; placing
	// them first leaves the flexible ones to even the counts out.
	slices.SortStableFunc(free, func(a, b tp) int {
		return cmp.Compare(len(in.topicMembers[a.topic]), len(in.topicMembers[b.topic]))
	})
	for _, x := range free {
		u.give(u.leastLoaded(x.topic), x)
	}
	// Move a partition to a less loaded subscriber of its topic while the
	// gap is more than one. Every move lowers the sum of squared counts
	// by at least 2, so this ends; the pass bound is a safety net.
	for pass := 0; pass < 2*len(free)+len(in.topics)+16; pass++ {
		moved := false
		for ti := range in.topics {
			to := u.leastLoaded(ti)
			for p, from := range u.owner[ti] {
				if len(u.owned[to]) < len(u.owned[from])-1 {
					u.move(int(from), to, tp{ti, int32(p)})
					moved = true
					to = u.leastLoaded(ti)
				}
			}
		}
		if !moved {
			break
		}
	}
	for mi := range u.owned {
		slices.SortFunc(u.owned[mi], cmpTP)
	}
}

// leastLoaded is the subscriber of topic ti with the fewest partitions,
// the first in member order on a tie.
func (u *uniformState) leastLoaded(ti int) int {
	best := -1
	for _, mi := range u.in.topicMembers[ti] {
		if best < 0 || len(u.owned[mi]) < len(u.owned[best]) {
			best = mi
		}
	}
	return best
}

func (u *uniformState) move(from, to int, x tp) {
	i := slices.Index(u.owned[from], x)
	u.owned[from] = slices.Delete(u.owned[from], i, i+1)
	u.give(to, x)
}
