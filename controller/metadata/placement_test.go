package metadata

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func brokers(n int, racks int) []PlacementBroker {
	var out []PlacementBroker
	for i := range n {
		b := PlacementBroker{ID: int32(i + 1)}
		if racks > 0 {
			b.Rack = fmt.Sprintf("rack%d", i%racks)
		}
		out = append(out, b)
	}
	return out
}

func counts(a [][]int32) (leaders, replicas map[int32]int) {
	leaders, replicas = map[int32]int{}, map[int32]int{}
	for _, reps := range a {
		leaders[reps[0]]++
		for _, r := range reps {
			replicas[r]++
		}
	}
	return
}

func spread(m map[int32]int, ids []PlacementBroker) int {
	lo, hi := 1<<30, 0
	for _, b := range ids {
		lo, hi = min(lo, m[b.ID]), max(hi, m[b.ID])
	}
	return hi - lo
}

func TestPlaceSpreadAndBalance(t *testing.T) {
	for _, tc := range []struct{ brokers, parts, rf int }{{3, 3, 3}, {5, 10, 3}, {4, 7, 2}, {6, 12, 1}, {1, 4, 1}} {
		bs := brokers(tc.brokers, 0)
		a, err := Place(PlacementRequest{Brokers: bs, Partitions: tc.parts, ReplicationFactor: tc.rf})
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != tc.parts {
			t.Fatalf("%+v: %d partitions", tc, len(a))
		}
		for _, reps := range a {
			if len(reps) != tc.rf {
				t.Fatalf("%+v: %v", tc, reps)
			}
			s := slices.Clone(reps)
			slices.Sort(s)
			if len(slices.Compact(s)) != tc.rf {
				t.Fatalf("%+v: duplicate replica in %v", tc, reps)
			}
		}
		l, r := counts(a)
		if spread(l, bs) > 1 || spread(r, bs) > 1 {
			t.Fatalf("%+v: unbalanced leaders %v replicas %v (%v)", tc, l, r, a)
		}
	}
}

func TestPlaceRackAware(t *testing.T) {
	bs := brokers(6, 3) // two brokers per rack
	rack := map[int32]string{}
	for _, b := range bs {
		rack[b.ID] = b.Rack
	}
	a, err := Place(PlacementRequest{Brokers: bs, Partitions: 12, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, reps := range a {
		seen := map[string]bool{}
		for _, r := range reps {
			if seen[rack[r]] {
				t.Fatalf("partition %v uses rack %s twice", reps, rack[r])
			}
			seen[rack[r]] = true
		}
	}
	l, r := counts(a)
	if spread(l, bs) > 1 || spread(r, bs) > 1 {
		t.Fatalf("unbalanced leaders %v replicas %v", l, r)
	}
}

func TestPlaceBalancesAcrossTopics(t *testing.T) {
	bs := brokers(3, 0)
	// Broker 1 already leads many partitions: new leaders go elsewhere.
	a, err := Place(PlacementRequest{Brokers: bs, Partitions: 4, ReplicationFactor: 1, LeaderCounts: map[int32]int{1: 4}})
	if err != nil {
		t.Fatal(err)
	}
	for _, reps := range a {
		if reps[0] == 1 {
			t.Fatalf("broker 1 got a leader: %v", a)
		}
	}
	if _, err := Place(PlacementRequest{Brokers: bs, Partitions: 1, ReplicationFactor: 4}); !errors.Is(err, ErrInvalidReplication) {
		t.Fatal(err)
	}
	if _, err := Place(PlacementRequest{Brokers: bs, Partitions: 0, ReplicationFactor: 1}); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatal(err)
	}
}
