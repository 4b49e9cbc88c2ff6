package group

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func asgTopic(i int) TopicID { return TopicID{0xa5, byte(i >> 8), byte(i)} }

// asgSpec builds a spec where every member subscribes to topics
// 0..len(partitions)-1.
func asgSpec(members int, partitions ...int32) *AssignSpec {
	spec := &AssignSpec{Topics: map[TopicID]TopicInfo{}}
	var subs []TopicID
	for i, n := range partitions {
		spec.Topics[asgTopic(i)] = TopicInfo{Name: fmt.Sprintf("t%d", i), ID: asgTopic(i), Partitions: n}
		subs = append(subs, asgTopic(i))
	}
	for i := range members {
		spec.Members = append(spec.Members, AssignMember{MemberID: fmt.Sprintf("m%03d", i), Subscribed: subs})
	}
	return spec
}

// checkAssignment verifies the contract: an entry for every member; every
// partition of every subscribed topic owned by exactly one member that
// subscribes to it; nothing else; partitions sorted, no empty topics.
func checkAssignment(t *testing.T, spec *AssignSpec, got map[string]Assignment) {
	t.Helper()
	if len(got) != len(spec.Members) {
		t.Fatalf("%d entries for %d members", len(got), len(spec.Members))
	}
	owner := map[TopicID]map[int32]string{}
	for _, m := range spec.Members {
		a, ok := got[m.MemberID]
		if !ok {
			t.Fatalf("no entry for %s", m.MemberID)
		}
		for id, ps := range a {
			if !slices.Contains(m.Subscribed, id) {
				t.Fatalf("%s got unsubscribed topic %x", m.MemberID, id)
			}
			if len(ps) == 0 || !slices.IsSorted(ps) {
				t.Fatalf("%s topic %x partitions %v", m.MemberID, id, ps)
			}
			for _, p := range ps {
				if p < 0 || p >= spec.Topics[id].Partitions {
					t.Fatalf("%s got %x/%d beyond the topic", m.MemberID, id, p)
				}
				if owner[id] == nil {
					owner[id] = map[int32]string{}
				}
				if o, dup := owner[id][p]; dup {
					t.Fatalf("%x/%d owned by %s and %s", id, p, o, m.MemberID)
				}
				owner[id][p] = m.MemberID
			}
		}
	}
	for _, m := range spec.Members {
		for _, id := range m.Subscribed {
			if n := int32(len(owner[id])); n != spec.Topics[id].Partitions {
				t.Fatalf("topic %x: %d of %d partitions assigned", id, n, spec.Topics[id].Partitions)
			}
		}
	}
}

func counts(got map[string]Assignment) (lo, hi int) {
	lo = -1
	for _, a := range got {
		n := 0
		for _, ps := range a {
			n += len(ps)
		}
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

func total(a Assignment) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// moved counts partitions that changed owner between two assignments.
func moved(before, after map[string]Assignment) int {
	owner := map[TopicID]map[int32]string{}
	for m, a := range before {
		for id, ps := range a {
			if owner[id] == nil {
				owner[id] = map[int32]string{}
			}
			for _, p := range ps {
				owner[id][p] = m
			}
		}
	}
	n := 0
	for m, a := range after {
		for id, ps := range a {
			for _, p := range ps {
				if o, ok := owner[id][p]; ok && o != m {
					n++
				}
			}
		}
	}
	return n
}

// withCurrent feeds an assignment back as the members' Current.
func withCurrent(spec *AssignSpec, got map[string]Assignment) {
	for i := range spec.Members {
		spec.Members[i].Current = got[spec.Members[i].MemberID]
	}
}

func mustAssignor(t testing.TB, name string) Assignor {
	a, ok := NewAssignor(name)
	if !ok || a.Name() != name {
		t.Fatalf("NewAssignor(%q)", name)
	}
	return a
}

func TestNewAssignor(t *testing.T) {
	mustAssignor(t, "uniform")
	mustAssignor(t, "range")
	if _, ok := NewAssignor("sticky"); ok {
		t.Fatal("unknown assignor accepted")
	}
}

// TestUniformStickyLeaveAndJoin is the benchmark's scenario: 10 members,
// 20 partitions. A member leaving moves only its 2 partitions; a member
// joining takes exactly 2, and nothing else moves.
func TestUniformStickyLeaveAndJoin(t *testing.T) {
	u := mustAssignor(t, "uniform")
	spec := asgSpec(10, 20)
	first := u.Assign(spec)
	checkAssignment(t, spec, first)
	if lo, hi := counts(first); lo != 2 || hi != 2 {
		t.Fatalf("initial counts %d..%d", lo, hi)
	}
	for leaver := range 10 {
		s := asgSpec(10, 20)
		withCurrent(s, first)
		gone := s.Members[leaver].MemberID
		s.Members = slices.Delete(s.Members, leaver, leaver+1)
		after := u.Assign(s)
		checkAssignment(t, s, after)
		if lo, hi := counts(after); lo != 2 || hi != 3 {
			t.Fatalf("after %s left: counts %d..%d", gone, lo, hi)
		}
		// Only the leaver's 2 partitions changed hands.
		if n := moved(first, after); n != 2 {
			t.Fatalf("after %s left: %d partitions moved", gone, n)
		}
		// It rejoins with nothing: it takes exactly 2, from the members
		// that got 3.
		s2 := asgSpec(10, 20)
		withCurrent(s2, after)
		back := u.Assign(s2)
		checkAssignment(t, s2, back)
		if n := moved(after, back); n != 2 || total(back[gone]) != 2 {
			t.Fatalf("%s rejoined: %d moved, it has %v", gone, n, back[gone])
		}
		if lo, hi := counts(back); lo != 2 || hi != 2 {
			t.Fatalf("after rejoin: counts %d..%d", lo, hi)
		}
	}
}

// TestUniformRollingRestart replaces every member in turn by a new
// member id (a rolling restart without static membership): each step
// moves only the leaver's partitions, and the replacement takes only its
// share.
func TestUniformRollingRestart(t *testing.T) {
	u := mustAssignor(t, "uniform")
	spec := asgSpec(10, 20)
	cur := u.Assign(spec)
	for i := range 10 {
		withCurrent(spec, cur)
		spec.Members = slices.Delete(spec.Members, 0, 1) // the oldest leaves
		left := u.Assign(spec)
		checkAssignment(t, spec, left)
		if n := moved(cur, left); n != 2 {
			t.Fatalf("step %d leave: %d moved", i, n)
		}
		withCurrent(spec, left)
		spec.Members = append(spec.Members, AssignMember{MemberID: fmt.Sprintf("new%02d", i), Subscribed: spec.Members[0].Subscribed})
		cur = u.Assign(spec)
		checkAssignment(t, spec, cur)
		if n := moved(left, cur); n != 2 {
			t.Fatalf("step %d join: %d moved", i, n)
		}
	}
}

func randomSpec(r *rand.Rand, homogeneous bool) *AssignSpec {
	spec := &AssignSpec{Topics: map[TopicID]TopicInfo{}}
	nt := r.Intn(6)
	var all []TopicID
	for i := range nt {
		id := asgTopic(r.Intn(50)*10 + i) // ids not in creation order
		spec.Topics[id] = TopicInfo{ID: id, Partitions: int32(r.Intn(25))}
		all = append(all, id)
	}
	slices.SortFunc(all, func(a, b TopicID) int { return slices.Compare(a[:], b[:]) })
	nm := r.Intn(12)
	for i := range nm {
		m := AssignMember{MemberID: fmt.Sprintf("m%02d", r.Intn(1000)*100+i)}
		if homogeneous {
			if r.Intn(8) != 0 { // some members subscribe to nothing
				m.Subscribed = all
			}
		} else {
			for _, id := range all {
				if r.Intn(2) == 0 {
					m.Subscribed = append(m.Subscribed, id)
				}
			}
		}
		if r.Intn(4) == 0 {
			s := fmt.Sprintf("i%d", r.Intn(5))
			m.InstanceID = &s
		}
		// A current assignment that may be stale: other topics,
		// partitions beyond the count, partitions another member has.
		m.Current = Assignment{}
		for _, id := range all {
			if r.Intn(2) == 0 {
				for p := range int32(r.Intn(8)) {
					m.Current[id] = append(m.Current[id], p*int32(1+r.Intn(3)))
				}
				slices.Sort(m.Current[id])
				m.Current[id] = slices.Compact(m.Current[id])
			}
		}
		spec.Members = append(spec.Members, m)
	}
	slices.SortFunc(spec.Members, func(a, b AssignMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	return spec
}

// TestAssignorsRandomized checks the contract, determinism and balance
// over seeded random specs, including stale current assignments, members
// without subscriptions and topics without partitions.
func TestAssignorsRandomized(t *testing.T) {
	r := rand.New(rand.NewSource(848))
	for _, name := range []string{"uniform", "range"} {
		a := mustAssignor(t, name)
		for iter := range 400 {
			homogeneous := iter%2 == 0
			spec := randomSpec(r, homogeneous)
			got := a.Assign(spec)
			checkAssignment(t, spec, got)
			// Determinism, also with the members handed over in reverse.
			rev := *spec
			rev.Members = slices.Clone(spec.Members)
			slices.Reverse(rev.Members)
			if again := a.Assign(&rev); !reflect.DeepEqual(got, again) {
				t.Fatalf("%s iter %d: not deterministic", name, iter)
			}
			if name == "range" {
				checkRange(t, spec, got)
				continue
			}
			if homogeneous {
				var active []string
				for _, m := range spec.Members {
					if len(m.Subscribed) > 0 {
						active = append(active, m.MemberID)
					}
				}
				sub := map[string]Assignment{}
				for _, m := range active {
					sub[m] = got[m]
				}
				if lo, hi := counts(sub); len(active) > 0 && hi-lo > 1 {
					t.Fatalf("iter %d: homogeneous counts %d..%d", iter, lo, hi)
				}
				checkOnlyGainOrLose(t, spec, got)
			} else {
				checkNoImprovingMove(t, spec, got)
			}
		}
	}
}

// checkOnlyGainOrLose: with stickiness, no member both loses a partition
// it validly held and gains one it did not hold.
func checkOnlyGainOrLose(t *testing.T, spec *AssignSpec, got map[string]Assignment) {
	t.Helper()
	claimed := map[TopicID]map[int32]bool{}
	for _, m := range spec.Members {
		lost, gained := false, false
		valid := map[TopicID]map[int32]bool{}
		for _, id := range m.Subscribed {
			for _, p := range m.Current[id] {
				if p < spec.Topics[id].Partitions && !claimed[id][p] {
					if valid[id] == nil {
						valid[id] = map[int32]bool{}
					}
					valid[id][p] = true
					if claimed[id] == nil {
						claimed[id] = map[int32]bool{}
					}
					claimed[id][p] = true
				}
			}
		}
		for id, ps := range valid {
			for p := range ps {
				if !slices.Contains(got[m.MemberID][id], p) {
					lost = true
				}
			}
		}
		for id, ps := range got[m.MemberID] {
			for _, p := range ps {
				if !valid[id][p] {
					gained = true
				}
			}
		}
		if lost && gained {
			t.Fatalf("%s both lost and gained partitions: had %v, got %v", m.MemberID, m.Current, got[m.MemberID])
		}
	}
}

// checkNoImprovingMove: no partition could move to another subscriber of
// its topic with at least two fewer partitions than its owner.
func checkNoImprovingMove(t *testing.T, spec *AssignSpec, got map[string]Assignment) {
	t.Helper()
	for _, owner := range spec.Members {
		for id := range got[owner.MemberID] {
			for _, other := range spec.Members {
				if slices.Contains(other.Subscribed, id) && total(got[other.MemberID]) < total(got[owner.MemberID])-1 {
					t.Fatalf("%x: %s has %d, subscriber %s only %d", id, owner.MemberID, total(got[owner.MemberID]), other.MemberID, total(got[other.MemberID]))
				}
			}
		}
	}
}

// checkRange: per topic, subscribers in range order hold contiguous
// ranges in that order, of size n/k or n/k+1, the larger ones first.
func checkRange(t *testing.T, spec *AssignSpec, got map[string]Assignment) {
	t.Helper()
	order := slices.Clone(spec.Members)
	slices.SortStableFunc(order, func(a, b AssignMember) int {
		switch {
		case a.InstanceID != nil && b.InstanceID != nil:
			return strings.Compare(*a.InstanceID, *b.InstanceID)
		case a.InstanceID != nil:
			return -1
		case b.InstanceID != nil:
			return 1
		}
		return 0
	})
	for id, ti := range spec.Topics {
		var subs []AssignMember
		for _, m := range order {
			if slices.Contains(m.Subscribed, id) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 || ti.Partitions == 0 {
			continue
		}
		n, k := ti.Partitions, int32(len(subs))
		next := int32(0)
		for i, m := range subs {
			size := n / k
			if int32(i) < n%k {
				size++
			}
			var want []int32
			for p := next; p < next+size; p++ {
				want = append(want, p)
			}
			next += size
			if gotPs := got[m.MemberID][id]; !slices.Equal(gotPs, want) {
				t.Fatalf("range %x member %s: got %v want %v", id, m.MemberID, gotPs, want)
			}
		}
	}
}

func TestRangeCoPartitionedAndStatic(t *testing.T) {
	rg := mustAssignor(t, "range")
	spec := asgSpec(2, 3, 3)
	got := rg.Assign(spec)
	want := map[string]Assignment{
		"m000": {asgTopic(0): {0, 1}, asgTopic(1): {0, 1}},
		"m001": {asgTopic(0): {2}, asgTopic(1): {2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	// Static members keep their ranges under new member ids: the order
	// is by instance id first.
	i0, i1 := "i0", "i1"
	spec.Members[0].MemberID, spec.Members[0].InstanceID = "z-new", &i0
	spec.Members[1].MemberID, spec.Members[1].InstanceID = "a-new", &i1
	slices.SortFunc(spec.Members, func(a, b AssignMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	got = rg.Assign(spec)
	if !reflect.DeepEqual(got["z-new"], want["m000"]) || !reflect.DeepEqual(got["a-new"], want["m001"]) {
		t.Fatalf("static: %v", got)
	}
}

func TestAssignorsEdgeCases(t *testing.T) {
	for _, name := range []string{"uniform", "range"} {
		a := mustAssignor(t, name)
		// No members.
		if got := a.Assign(asgSpec(0, 4)); len(got) != 0 {
			t.Fatalf("%s: %v", name, got)
		}
		// Members without subscriptions, a topic nobody subscribes to, a
		// topic with 0 partitions, a subscription to a topic not in
		// Topics.
		spec := asgSpec(3, 4, 0)
		spec.Topics[asgTopic(7)] = TopicInfo{ID: asgTopic(7), Partitions: 5}
		spec.Members[1].Subscribed = nil
		spec.Members[2].Subscribed = append(slices.Clone(spec.Members[2].Subscribed), asgTopic(9))
		got := a.Assign(spec)
		if got["m001"] == nil || len(got["m001"]) != 0 {
			t.Fatalf("%s: member without topics: %v", name, got["m001"])
		}
		if total(got["m000"])+total(got["m002"]) != 4 {
			t.Fatalf("%s: %v", name, got)
		}
	}
	// Heterogeneous: A subscribes to t0 and t1, B to t1 only; balanced
	// 4/4 puts all of t0 on A and all of t1 on B.
	u := mustAssignor(t, "uniform")
	spec := asgSpec(2, 4, 4)
	spec.Members[1].Subscribed = []TopicID{asgTopic(1)}
	got := u.Assign(spec)
	checkAssignment(t, spec, got)
	if total(got["m000"]) != 4 || total(got["m001"]) != 4 || len(got["m001"][asgTopic(1)]) != 4 {
		t.Fatalf("heterogeneous: %v", got)
	}
	// ... and stays put when nothing changes.
	withCurrent(spec, got)
	if again := u.Assign(spec); moved(got, again) != 0 {
		t.Fatalf("heterogeneous not sticky: %v -> %v", got, again)
	}
}

// BenchmarkUniformAssign: 1,000 members x 10,000 partitions (10 topics of
// 1,000), the rebalance after one member left (its partitions move) from
// a balanced current assignment. The coordinator runs this under the
// group's lock.
func BenchmarkUniformAssign(b *testing.B) {
	for _, hetero := range []bool{false, true} {
		b.Run(fmt.Sprintf("heterogeneous=%v", hetero), func(b *testing.B) {
			u := mustAssignor(b, "uniform")
			spec := asgSpec(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
			if hetero {
				for i := range spec.Members {
					if i%3 == 0 {
						spec.Members[i].Subscribed = spec.Members[i].Subscribed[:5]
					}
				}
			}
			withCurrent(spec, u.Assign(spec))
			spec.Members = spec.Members[1:]
			b.ResetTimer()
			for range b.N {
				u.Assign(spec)
			}
		})
	}
}

func BenchmarkRangeAssign(b *testing.B) {
	r := mustAssignor(b, "range")
	spec := asgSpec(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
	b.ResetTimer()
	for range b.N {
		r.Assign(spec)
	}
}
