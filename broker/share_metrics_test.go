package broker

import (
	"testing"

	"github.com/ringlog/ringlog/coordinator/share"
)

// TestShareMetricsCountersMonotonic: a group's counters sum its
// share-partitions' and keep the counts of a copy this broker dropped
// (a partition's counters starting again at zero must not lower the
// group's total); once the broker neither holds nor coordinates the
// group, its series go.
func TestShareMetricsCountersMonotonic(t *testing.T) {
	var sm shareMetrics
	k0 := share.Key{Group: "g", Partition: 0}
	k1 := share.Key{Group: "g", Partition: 1}
	ps := func(k share.Key, delivered, redelivered, timeouts, archived int64) share.PartitionStats {
		return share.PartitionStats{Key: k, Acquired: 1, Available: 2,
			Counters: share.Counters{Delivered: delivered, Redelivered: redelivered, LockTimeouts: timeouts, Archived: archived}}
	}
	check := func(step string, got map[string]*shareGroupStats, want share.Counters, partitions int) {
		t.Helper()
		gs := got["g"]
		if gs == nil {
			t.Fatalf("%s: no group g in %v", step, got)
		}
		if gs.counters != want || gs.partitions != partitions || gs.acquired != partitions || gs.available != 2*partitions {
			t.Fatalf("%s: %+v, want counters %+v over %d partitions", step, *gs, want, partitions)
		}
	}
	got := sm.groups([]share.PartitionStats{ps(k0, 10, 2, 1, 1), ps(k1, 5, 0, 0, 0)}, map[string]int{"g": 3})
	check("first scrape", got, share.Counters{Delivered: 15, Redelivered: 2, LockTimeouts: 1, Archived: 1}, 2)
	if gs := got["g"]; gs.members != 3 || !gs.coordinated {
		t.Fatalf("members %d coordinated %v, want 3 true", gs.members, gs.coordinated)
	}
	// k0 re-read from the store: its counts restart below the old ones.
	got = sm.groups([]share.PartitionStats{ps(k0, 1, 1, 0, 0), ps(k1, 6, 0, 0, 0)}, nil)
	check("k0 restarted", got, share.Counters{Delivered: 17, Redelivered: 3, LockTimeouts: 1, Archived: 1}, 2)
	if got["g"].coordinated {
		t.Fatal("group reported as coordinated without members from the coordinator")
	}
	// k1 gone (leadership moved away): its last counts stay in the total.
	got = sm.groups([]share.PartitionStats{ps(k0, 2, 1, 0, 0)}, nil)
	check("k1 gone", got, share.Counters{Delivered: 18, Redelivered: 3, LockTimeouts: 1, Archived: 1}, 1)
	// Nothing of g here any more: its series and retired counts go.
	if got = sm.groups(nil, nil); len(got) != 0 || len(sm.retired) != 0 {
		t.Fatalf("after the group left: %v, retired %v", got, sm.retired)
	}
}
