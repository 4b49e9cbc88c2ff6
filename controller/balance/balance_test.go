package balance

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// roundRobin places parts partitions of RF rf over brokers like a fresh
// topic: partition i starts at broker i mod n.
func roundRobin(topic string, parts, rf int, brokers []int32) []Partition {
	var out []Partition
	for i := range parts {
		var reps []int32
		for j := range rf {
			reps = append(reps, brokers[(i+j)%len(brokers)])
		}
		out = append(out, Partition{Topic: topic, Index: int32(i), Replicas: reps})
	}
	return out
}

func plain(ids ...int32) []Broker {
	var out []Broker
	for _, id := range ids {
		out = append(out, Broker{ID: id})
	}
	return out
}

// apply returns parts with the plan's moves applied.
func apply(parts []Partition, pl Plan) []Partition {
	out := slices.Clone(parts)
	for _, m := range pl.Moves {
		for i := range out {
			if out[i].Topic == m.Topic && out[i].Index == m.Index {
				out[i].Replicas = m.To
			}
		}
	}
	return out
}

// check asserts the plan's invariants against its input and returns the
// final assignment.
func check(t *testing.T, brokers []Broker, parts []Partition, pl Plan) []Partition {
	t.Helper()
	rack, excl := map[int32]string{}, map[int32]bool{}
	for _, b := range brokers {
		rack[b.ID], excl[b.ID] = b.Rack, b.Excluded
	}
	racks := func(reps []int32) int {
		s := map[string]bool{}
		for _, r := range reps {
			s[rack[r]] = true
		}
		return len(s)
	}
	final := apply(parts, pl)
	for i, p := range final {
		old := parts[i].Replicas
		if len(p.Replicas) != len(old) {
			t.Fatalf("%s-%d: RF %d -> %d", p.Topic, p.Index, len(old), len(p.Replicas))
		}
		for j, r := range p.Replicas {
			if slices.Contains(p.Replicas[:j], r) {
				t.Fatalf("%s-%d: broker %d twice in %v", p.Topic, p.Index, r, p.Replicas)
			}
			if excl[r] {
				t.Fatalf("%s-%d: replica left on excluded broker %d: %v", p.Topic, p.Index, r, p.Replicas)
			}
		}
		if racks(p.Replicas) < racks(old) {
			t.Fatalf("%s-%d: racks reduced: %v -> %v", p.Topic, p.Index, old, p.Replicas)
		}
	}
	return final
}

func loads(final []Partition) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, p := range final {
		for i, r := range p.Replicas {
			replicas[r]++
			if i == 0 {
				leaders[r]++
			}
		}
	}
	return
}

// within asserts every eligible broker's count is within [floor, ceil] of
// the mean.
func within(t *testing.T, what string, brokers []Broker, count map[int32]int) {
	t.Helper()
	total, n := 0, 0
	for _, b := range brokers {
		if !b.Excluded {
			total += count[b.ID]
			n++
		}
	}
	lo, hi := bounds(total, n)
	for _, b := range brokers {
		if !b.Excluded && (count[b.ID] < lo || count[b.ID] > hi) {
			t.Fatalf("%s of broker %d = %d, want %d..%d (all: %v)", what, b.ID, count[b.ID], lo, hi, count)
		}
	}
}

func TestBalancedClusterNoMoves(t *testing.T) {
	brokers := plain(1, 2, 3)
	parts := roundRobin("a", 64, 3, []int32{1, 2, 3})
	pl, err := Compute(brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Moves) != 0 {
		t.Fatalf("balanced cluster: %d moves, want 0: %v", len(pl.Moves), pl.Moves[0])
	}
}

func TestAddFourthBroker(t *testing.T) {
	brokers := plain(1, 2, 3, 4)
	parts := roundRobin("a", 64, 3, []int32{1, 2, 3})
	pl, err := Compute(brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	// 192 replicas over 4 brokers: 48 each, so 16 leave each old broker.
	if pl.ReplicasMoved != 48 {
		t.Fatalf("moved %d replicas, want 48", pl.ReplicasMoved)
	}
	final := check(t, brokers, parts, pl)
	reps, leads := loads(final)
	within(t, "replicas", brokers, reps)
	within(t, "leaders", brokers, leads)
	if reps[4] != 48 || leads[4] != 16 {
		t.Fatalf("broker 4: %d replicas, %d leaders; want 48, 16", reps[4], leads[4])
	}
	// Deterministic.
	pl2, _ := Compute(brokers, parts)
	if !reflect.DeepEqual(pl, pl2) {
		t.Fatal("two plans of the same input differ")
	}
	// Balanced afterwards: a second plan changes nothing.
	if again, _ := Compute(brokers, final); len(again.Moves) != 0 {
		t.Fatalf("replanning a balanced result: %d moves", len(again.Moves))
	}
}

func TestLeadersOnlyReorder(t *testing.T) {
	// Every partition prefers broker 1: replicas are balanced, leaders not.
	var parts []Partition
	for i := range 12 {
		parts = append(parts, Partition{Topic: "a", Index: int32(i), Replicas: []int32{1, 2, 3}})
	}
	brokers := plain(1, 2, 3)
	pl, err := Compute(brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	if pl.ReplicasMoved != 0 {
		t.Fatalf("moved %d replicas, want only reorders", pl.ReplicasMoved)
	}
	_, leads := loads(check(t, brokers, parts, pl))
	within(t, "leaders", brokers, leads)
	if len(pl.Moves) != 8 {
		t.Fatalf("%d reorders, want 8 (4 leaderships each to brokers 2 and 3)", len(pl.Moves))
	}
}

func TestDecommission(t *testing.T) {
	brokers := plain(1, 2, 3, 4)
	brokers[0].Excluded = true
	parts := roundRobin("a", 64, 3, []int32{1, 2, 3, 4})
	pl, err := Compute(brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	final := check(t, brokers, parts, pl)
	reps, leads := loads(final)
	if reps[1] != 0 || leads[1] != 0 {
		t.Fatalf("broker 1 keeps %d replicas", reps[1])
	}
	within(t, "replicas", brokers, reps)
	within(t, "leaders", brokers, leads)
	// Broker 1 held 48 replicas; they must all move, and nothing else
	// needs to (the rest is already even).
	if pl.ReplicasMoved != 48 {
		t.Fatalf("moved %d replicas, want 48", pl.ReplicasMoved)
	}
}

func TestDecommissionRefused(t *testing.T) {
	brokers := plain(1, 2, 3)
	brokers[2].Excluded = true
	_, err := Compute(brokers, roundRobin("a", 8, 3, []int32{1, 2, 3}))
	if !errors.Is(err, ErrCannotPlace) {
		t.Fatalf("RF 3 on 2 remaining brokers: err %v, want ErrCannotPlace", err)
	}
	// RF 2 fits.
	if _, err := Compute(brokers, roundRobin("a", 8, 2, []int32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
}

func TestRackRule(t *testing.T) {
	// Two racks; partitions span both. Decommissioning broker 1 (rack a)
	// must put its replicas on the other rack-a broker, never on rack b.
	brokers := []Broker{{ID: 1, Rack: "a", Excluded: true}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "b"}}
	parts := []Partition{
		{Topic: "t", Index: 0, Replicas: []int32{1, 3}},
		{Topic: "t", Index: 1, Replicas: []int32{4, 1}},
	}
	pl, err := Compute(brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	final := check(t, brokers, parts, pl)
	for _, p := range final {
		if !slices.Contains(p.Replicas, 2) {
			t.Fatalf("%v: broker 2 (the only rack-a broker left) must take broker 1's replica", p.Replicas)
		}
	}
	// Without broker 2 there is no rack-a broker: refused, not collapsed
	// onto rack b.
	_, err = Compute([]Broker{{ID: 1, Rack: "a", Excluded: true}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "b"}, {ID: 5, Rack: "b"}}, parts)
	if !errors.Is(err, ErrCannotPlace) {
		t.Fatalf("err %v, want ErrCannotPlace (rack rule)", err)
	}
}

func TestRackSpread(t *testing.T) {
	// A new broker on a new rack: moves onto it spread partitions that
	// used one rack only.
	brokers := []Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}}
	parts := roundRobin("t", 6, 2, []int32{1, 2})
	pl, err := Compute(brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	final := check(t, brokers, parts, pl)
	reps, _ := loads(final)
	within(t, "replicas", brokers, reps)
}

func TestUnknownBrokersStay(t *testing.T) {
	// Broker 3 is missing (down): its replicas stay, it takes none.
	parts := roundRobin("t", 6, 2, []int32{1, 2, 3})
	pl, err := Compute(plain(1, 2, 4), parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range pl.Moves {
		if slices.Contains(m.From, 3) != slices.Contains(m.To, 3) {
			t.Fatalf("%s-%d: %v -> %v moved broker 3's replica", m.Topic, m.Index, m.From, m.To)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	if _, err := Compute(plain(1, 1), nil); err == nil {
		t.Fatal("duplicate broker accepted")
	}
	if _, err := Compute(plain(1, 2), []Partition{{Topic: "a", Replicas: []int32{1, 1}}}); err == nil {
		t.Fatal("duplicate replica accepted")
	}
}

// TestRandomClusters checks the invariants on random clusters: RF kept, no
// broker twice, nothing left on excluded brokers, racks never reduced,
// replica and leader counts within [floor, ceil] of the mean (without
// racks and with one RF, where that is always reachable), and, without
// exclusions or racks, exactly the minimum number of moves.
func TestRandomClusters(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	for iter := range 300 {
		n := 2 + rng.Intn(7)
		useRacks := iter%3 == 0
		var brokers []Broker
		var ids []int32
		for i := range n {
			b := Broker{ID: int32(i + 1)}
			if useRacks {
				b.Rack = fmt.Sprintf("r%d", rng.Intn(3))
			}
			brokers = append(brokers, b)
			ids = append(ids, b.ID)
		}
		rf := 1 + rng.Intn(min(3, n))
		// Existing topics live on a random subset of brokers (skew).
		var parts []Partition
		for ti := range 1 + rng.Intn(3) {
			sub := slices.Clone(ids)
			rng.Shuffle(len(sub), func(i, j int) { sub[i], sub[j] = sub[j], sub[i] })
			sub = sub[:rf+rng.Intn(n-rf+1)]
			parts = append(parts, roundRobin(fmt.Sprintf("t%d", ti), 1+rng.Intn(40), rf, sub)...)
		}
		exclude := iter%4 == 1 && n-1 >= rf
		if exclude {
			brokers[rng.Intn(n)].Excluded = true
		}
		name := fmt.Sprintf("iter%d n=%d rf=%d racks=%v exclude=%v", iter, n, rf, useRacks, exclude)
		pl, err := Compute(brokers, parts)
		if err != nil {
			if useRacks && errors.Is(err, ErrCannotPlace) {
				continue // the rack rule may refuse a decommission
			}
			t.Fatalf("%s: %v", name, err)
		}
		final := check(t, brokers, parts, pl)
		if useRacks {
			continue
		}
		reps, leads := loads(final)
		within(t, name+" replicas", brokers, reps)
		within(t, name+" leaders", brokers, leads)
		if !exclude {
			before, _ := loads(parts)
			lo, hi := bounds(len(parts)*rf, n)
			excess, deficit := 0, 0
			for _, id := range ids {
				excess += max(0, before[id]-hi)
				deficit += max(0, lo-before[id])
			}
			if want := max(excess, deficit); pl.ReplicasMoved != want {
				t.Fatalf("%s: moved %d replicas, minimum is %d", name, pl.ReplicasMoved, want)
			}
		}
	}
}
