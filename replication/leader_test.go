package replication

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// leaderFixture: broker 1 leads {1,2,3} in epoch 5 with ten durable records.
func leaderFixture(t *testing.T) (*LeaderState, *memLog) {
	t.Helper()
	log := newMemLog()
	for i := range 10 {
		log.entries = append(log.entries, memEntry{epoch: 4, val: uint64(i)})
	}
	_ = log.cache.Assign(4, 0)
	log.flush()
	log.hw = 5
	cfg := DefaultConfig()
	l, err := BecomeLeader(cfg, simTP, 1, 2, PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7}, log, t0)
	if err != nil {
		t.Fatal(err)
	}
	return l, log
}

func fetch(t *testing.T, l *LeaderState, id int32, off int64, now time.Time) FetchOutcome {
	t.Helper()
	out, err := l.OnFollowerFetch(FollowerFetch{ReplicaID: id, CurrentLeaderEpoch: l.LeaderEpoch(), FetchOffset: off, LastFetchedEpoch: NoEpoch}, now)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLeaderHWIsMinOfISR(t *testing.T) {
	l, log := leaderFixture(t)
	if got := log.cache.Entries(); got[len(got)-1].Epoch != 5 || got[len(got)-1].StartOffset != 10 {
		t.Fatalf("BecomeLeader did not stamp epoch 5 at 10: %v", got)
	}
	if out := fetch(t, l, 2, 8, t0); out.HWChanged {
		t.Fatal("HW moved before every ISR member fetched")
	}
	if out := fetch(t, l, 3, 7, t0); !out.HWChanged || out.HW != 7 {
		t.Fatalf("HW %+v, want 7", out.Update)
	}
	// Unflushed leader records do not count.
	log.appendLeader(100)
	fetch(t, l, 2, 11, t0)
	out := fetch(t, l, 3, 11, t0)
	if out.HW != 10 {
		t.Fatalf("HW %d with leader durable end 10", out.HW)
	}
	log.flush()
	if u := l.OnLocalAppend(); u.HW != 11 {
		t.Fatalf("HW after flush %d", u.HW)
	}
	// A follower going back (it truncated) never lowers the HW.
	fetch(t, l, 2, 10, t0)
	if l.HighWatermark() != 11 {
		t.Fatalf("HW moved down to %d", l.HighWatermark())
	}
}

func TestLeaderFetchChecks(t *testing.T) {
	l, _ := leaderFixture(t)
	for _, tc := range []struct {
		f    FollowerFetch
		want error
	}{
		{FollowerFetch{ReplicaID: 2, CurrentLeaderEpoch: 4, FetchOffset: 1, LastFetchedEpoch: NoEpoch}, ErrFencedLeaderEpoch},
		{FollowerFetch{ReplicaID: 2, CurrentLeaderEpoch: 6, FetchOffset: 1, LastFetchedEpoch: NoEpoch}, ErrUnknownLeaderEpoch},
		{FollowerFetch{ReplicaID: 9, CurrentLeaderEpoch: 5, FetchOffset: 1, LastFetchedEpoch: NoEpoch}, ErrNotLeaderOrFollower},
		{FollowerFetch{ReplicaID: 2, CurrentLeaderEpoch: 5, FetchOffset: 11, LastFetchedEpoch: NoEpoch}, ErrOffsetOutOfRange},
	} {
		if _, err := l.OnFollowerFetch(tc.f, t0); !errors.Is(err, tc.want) {
			t.Errorf("%+v: err %v, want %v", tc.f, err, tc.want)
		}
	}
	// KIP-101 case: the follower has epoch-4 records up to 12 that we
	// never had (we have epoch 4 up to 10): it must truncate to 10, and its
	// offset must not count for the HW.
	out, err := l.OnFollowerFetch(FollowerFetch{ReplicaID: 2, CurrentLeaderEpoch: 5, FetchOffset: 12, LastFetchedEpoch: 4}, t0)
	if err != nil || out.Diverging == nil || *out.Diverging != (EpochEndOffset{Epoch: 4, EndOffset: 10}) {
		t.Fatalf("out %+v err %v: want diverging {4 10}", out, err)
	}
	if l.followers[2].leo != NoOffset {
		t.Fatal("a diverged fetch updated the follower's progress")
	}
}

func TestDivergingEpoch(t *testing.T) {
	log := newMemLog()
	for _, e := range []struct {
		ep  int32
		off int64
	}{{1, 0}, {3, 10}, {6, 20}} {
		_ = log.cache.Assign(e.ep, e.off)
	}
	for i := range 25 {
		log.entries = append(log.entries, memEntry{val: uint64(i)})
	}
	for _, tc := range []struct {
		last     int32
		fetch    int64
		diverged bool
		want     EpochEndOffset
	}{
		{6, 25, false, EpochEndOffset{}},
		{3, 20, false, EpochEndOffset{}},
		{3, 22, true, EpochEndOffset{3, 20}}, // follower wrote more epoch 3 than the leader kept
		{4, 15, true, EpochEndOffset{3, 20}}, // epoch 4 never reached us
		{1, 5, false, EpochEndOffset{}},
	} {
		got, div, err := DivergingEpoch(log, tc.last, tc.fetch)
		if err != nil || div != tc.diverged || got != tc.want {
			t.Errorf("last %d fetch %d: (%+v,%v,%v), want (%+v,%v)", tc.last, tc.fetch, got, div, err, tc.want, tc.diverged)
		}
	}
	if _, _, err := DivergingEpoch(newMemLog(), 2, 3); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("empty cache: %v", err)
	}
}

func TestLeaderISRShrinkAndExpand(t *testing.T) {
	l, log := leaderFixture(t)
	lag := l.cfg.ReplicaLagTimeMax
	fetch(t, l, 2, 10, t0)
	fetch(t, l, 3, 10, t0)
	log.appendLeader(1)
	log.flush()
	now := t0
	// Replica 2 keeps fetching but stays one behind; 3 stops fetching.
	for i := 0; i < 10; i++ {
		now = now.Add(lag / 8)
		fetch(t, l, 2, 10, now)
		if u := l.Tick(now); u.Proposal != nil {
			if now.Sub(t0) <= lag {
				t.Fatalf("shrink proposed after %v, lag window %v", now.Sub(t0), lag)
			}
			if !slices.Equal(u.Proposal.NewISR, []int32{1}) || u.Proposal.PartitionEpoch != 7 {
				t.Fatalf("proposal %+v", u.Proposal)
			}
			// While in flight the HW still waits for 2 and 3.
			if got := l.MaximalISR(); len(got) != 3 {
				t.Fatalf("maximal ISR %v", got)
			}
			l.OnAlterResult(*u.Proposal, PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8}, nil, now)
			break
		}
	}
	if !slices.Equal(l.ISR(), []int32{1}) || l.PartitionEpoch() != 8 || l.HighWatermark() != 11 {
		t.Fatalf("after shrink: isr %v pe %d hw %d", l.ISR(), l.PartitionEpoch(), l.HighWatermark())
	}
	if err := l.CheckProduce(-1); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("CheckProduce(-1) with ISR of 1: %v", err)
	}
	if err := l.CheckProduce(1); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckProduce(2); !errors.Is(err, ErrInvalidRequiredAcks) {
		t.Fatal(err)
	}
	// 2 reaches the HW: proposed back; a stale rejection keeps the
	// maximal ISR until metadata arrives.
	out := fetch(t, l, 2, 11, now)
	if out.Proposal == nil || !slices.Equal(out.Proposal.NewISR, []int32{1, 2}) {
		t.Fatalf("no expand: %+v", out)
	}
	// The member being added counts at once (the replication throttle
	// must not hold it back).
	if !l.InMaximalISR(2) || !l.InMaximalISR(1) || l.InMaximalISR(3) {
		t.Fatalf("InMaximalISR with 2 being added: %v", l.MaximalISR())
	}
	l.OnAlterResult(*out.Proposal, PartitionState{}, ErrInvalidUpdateVersion, now)
	if got := l.MaximalISR(); len(got) != 2 {
		t.Fatalf("maximal ISR after stale rejection %v", got)
	}
	if u := l.Tick(now.Add(time.Hour)); u.Proposal != nil {
		t.Fatal("re-sent a proposal while waiting for metadata")
	}
	if _, err := l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9}, now); err != nil {
		t.Fatal(err)
	}
	if l.AlterPending() || !slices.Equal(l.ISR(), []int32{1, 2}) {
		t.Fatalf("metadata not adopted: %v pending %v", l.ISR(), l.AlterPending())
	}
	if _, err := l.OnMetadata(PartitionState{Leader: 2, LeaderEpoch: 6}, now); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("leader change: %v", err)
	}
}

// An accepted expansion whose answer already names another leader (a
// reassignment completing in the same controller step that added the
// replica, electing that replica) must not release the HW past what the
// added replica has: the old leader keeps the maximal ISR until metadata
// ends its leadership. Found by TestAdminScaleOutUnderLoad: one
// acknowledged record lost during a decommission.
func TestLeaderAlterAcceptedWithNewLeaderKeepsMaximalISR(t *testing.T) {
	log := newMemLog()
	for i := range 10 {
		log.entries = append(log.entries, memEntry{epoch: 4, val: uint64(i)})
	}
	_ = log.cache.Assign(4, 0)
	log.flush()
	log.hw = 10
	// 1 leads {1,2,4} with 3 being added back (the decommission's target).
	l, err := BecomeLeader(DefaultConfig(), simTP, 1, 2, PartitionState{Replicas: []int32{3, 2, 4, 1}, ISR: []int32{1, 2, 4}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7}, log, t0)
	if err != nil {
		t.Fatal(err)
	}
	fetch(t, l, 2, 10, t0)
	fetch(t, l, 4, 10, t0)
	out := fetch(t, l, 3, 10, t0) // 3 reaches the HW: proposed
	if out.Proposal == nil || !slices.Contains(out.Proposal.NewISR, 3) {
		t.Fatalf("no expansion proposed: %+v", out)
	}
	// A record arrives while the proposal is in flight; 2 and 4 get it,
	// 3 does not.
	log.appendLeader(5)
	log.flush()
	fetch(t, l, 2, 11, t0)
	fetch(t, l, 4, 11, t0)
	if hw := l.HighWatermark(); hw != 10 {
		t.Fatalf("HW %d passed the member being added", hw)
	}
	// Accepted; the reassignment completed in the same step and elected 3.
	l.OnAlterResult(*out.Proposal, PartitionState{Replicas: []int32{3, 2, 4}, ISR: []int32{2, 4, 3}, Leader: 3, LeaderEpoch: 6, PartitionEpoch: 8}, nil, t0)
	fetch(t, l, 2, 11, t0)
	if hw := l.HighWatermark(); hw != 10 {
		t.Fatalf("HW %d after an answer that moved leadership to 3 (which has 10)", hw)
	}
	if !l.InMaximalISR(3) {
		t.Fatalf("maximal ISR %v lost the member the controller added", l.MaximalISR())
	}
	if _, err := l.OnMetadata(PartitionState{Replicas: []int32{3, 2, 4}, ISR: []int32{2, 4, 3}, Leader: 3, LeaderEpoch: 6, PartitionEpoch: 8}, t0); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("metadata with the new leader: %v", err)
	}
}

func TestLeaderAlterOutcomes(t *testing.T) {
	l, _ := leaderFixture(t)
	now := t0.Add(time.Hour) // everyone lags
	u := l.Tick(now)
	if u.Proposal == nil {
		t.Fatal("no shrink")
	}
	// Unknown outcome: same proposal again after the backoff.
	l.OnAlterResult(*u.Proposal, PartitionState{}, errors.New("timeout"), now)
	if l.Tick(now).Proposal != nil {
		t.Fatal("re-sent before backoff")
	}
	again := l.Tick(now.Add(l.cfg.AlterPartitionBackoff)).Proposal
	if again == nil || again.Seq != u.Proposal.Seq {
		t.Fatalf("resend %+v", again)
	}
	// Ineligible: nothing applied, old ISR back, new proposal after backoff.
	l.OnAlterResult(*again, PartitionState{}, ErrIneligibleReplica, now)
	if l.AlterPending() || len(l.MaximalISR()) != 3 {
		t.Fatal("ineligible did not revert")
	}
	if l.Tick(now).Proposal != nil {
		t.Fatal("re-proposed before backoff")
	}
	p := l.Tick(now.Add(l.cfg.AlterPartitionBackoff)).Proposal
	if p == nil || p.Seq == u.Proposal.Seq {
		t.Fatalf("new proposal %+v", p)
	}
	// A result for an old proposal is ignored.
	l.OnAlterResult(*u.Proposal, PartitionState{ISR: []int32{1}, LeaderEpoch: 5, PartitionEpoch: 50}, nil, now)
	if l.PartitionEpoch() != 7 || !l.AlterPending() {
		t.Fatal("stale result applied")
	}
}

// A new leader whose HW starts below the log end of its epoch start
// (its own HW lagged its predecessor's) refuses offset lookups until
// every ISR member has fetched up to the epoch start; local appends alone
// do not lift it, and once lifted it stays lifted.
func TestLeaderOffsetsUnavailableUntilHWReachesEpochStart(t *testing.T) {
	l, log := leaderFixture(t) // HW 5, epoch 5 starts at 10
	notAvailable := func(when string) {
		t.Helper()
		if err := l.CheckOffsetsAvailable(); !errors.Is(err, ErrOffsetNotAvailable) {
			t.Fatalf("%s (HW %d): %v, want ErrOffsetNotAvailable", when, l.HighWatermark(), err)
		}
	}
	notAvailable("as leader")
	log.appendLeader(100)
	log.flush()
	l.OnLocalAppend()
	notAvailable("after a local append")
	fetch(t, l, 2, 11, t0)
	notAvailable("after one follower fetched")
	fetch(t, l, 3, 9, t0)
	notAvailable("HW 9, below the epoch start")
	fetch(t, l, 3, 10, t0)
	if err := l.CheckOffsetsAvailable(); err != nil || l.HighWatermark() != 10 {
		t.Fatalf("HW %d at the epoch start: %v", l.HighWatermark(), err)
	}
	fetch(t, l, 2, 10, t0) // a follower going back never lowers the HW
	if err := l.CheckOffsetsAvailable(); err != nil {
		t.Fatal(err)
	}

	// A leader whose HW already covers its log end answers at once.
	caught := newMemLog()
	caught.entries = append(caught.entries, memEntry{epoch: 4}, memEntry{epoch: 4})
	_ = caught.cache.Assign(4, 0)
	caught.flush()
	caught.hw = 2
	l2, err := BecomeLeader(DefaultConfig(), simTP, 1, 2, PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 7}, caught, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.CheckOffsetsAvailable(); err != nil {
		t.Fatalf("HW at the log end: %v", err)
	}
}

// A follower fetch of one partition allocates nothing on the leader: it
// runs for every partition of every replica fetch.
func TestLeaderFollowerFetchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	l, _ := leaderFixture(t)
	// An AlterPartition in flight too: the maximal ISR is the union.
	l.pending = &pendingAlter{prop: AlterProposal{NewISR: []int32{1, 2, 3}}, inFlight: true}
	off := int64(5)
	allocs := testing.AllocsPerRun(100, func() {
		id := int32(2 + off%2)
		if _, err := l.OnFollowerFetch(FollowerFetch{ReplicaID: id, CurrentLeaderEpoch: 5, FetchOffset: min(off/2, 10), LastFetchedEpoch: NoEpoch}, t0); err != nil {
			t.Fatal(err)
		}
		off++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per follower fetch, want 0", allocs)
	}
}

// TestLeaderFollowsReassignment: a reassignment changes the replica set in
// the same leader epoch. The adding replica is tracked but does not hold
// the HW until it joins the ISR, which the leader proposes once it caught
// up; at completion the removed follower is forgotten and the HW is over
// the new ISR alone.
func TestLeaderFollowsReassignment(t *testing.T) {
	l, log := leaderFixture(t)
	fetch(t, l, 2, 10, t0)
	fetch(t, l, 3, 10, t0)
	if l.HighWatermark() != 10 {
		t.Fatalf("hw %d", l.HighWatermark())
	}
	// Start: replicas 1, 2, 4, 3 (adding 4, removing 3), ISR unchanged.
	if _, err := l.OnMetadata(PartitionState{Replicas: []int32{1, 2, 4, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8}, t0); err != nil {
		t.Fatal(err)
	}
	log.appendLeader(10)
	log.flush()
	fetch(t, l, 2, 11, t0)
	if out := fetch(t, l, 3, 11, t0); l.HighWatermark() != 11 || out.Proposal != nil {
		t.Fatalf("hw %d with the adding replica not fetching yet (proposal %+v)", l.HighWatermark(), out.Proposal)
	}
	// The new replica copies the log; caught up, it is proposed.
	if out := fetch(t, l, 4, 5, t0); out.Proposal != nil {
		t.Fatalf("proposed a replica at 5 of 11: %+v", out.Proposal)
	}
	out := fetch(t, l, 4, 11, t0)
	if out.Proposal == nil || !slices.Equal(sorted(out.Proposal.NewISR), []int32{1, 2, 3, 4}) {
		t.Fatalf("caught-up adding replica not proposed: %+v", out.Proposal)
	}
	// The controller completes the move in the same entry.
	done := PartitionState{Replicas: []int32{1, 2, 4}, ISR: []int32{1, 2, 4}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9}
	l.OnAlterResult(*out.Proposal, done, nil, t0)
	if !slices.Equal(l.Replicas(), []int32{1, 2, 4}) || !slices.Equal(l.ISR(), []int32{1, 2, 4}) {
		t.Fatalf("replicas %v isr %v after completion", l.Replicas(), l.ISR())
	}
	if _, err := l.OnFollowerFetch(FollowerFetch{ReplicaID: 3, CurrentLeaderEpoch: 5, FetchOffset: 11, LastFetchedEpoch: NoEpoch}, t0); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("removed replica's fetch: %v", err)
	}
	log.appendLeader(11)
	log.flush()
	fetch(t, l, 2, 12, t0)
	fetch(t, l, 4, 12, t0)
	if l.HighWatermark() != 12 {
		t.Fatalf("hw %d over the new ISR, want 12", l.HighWatermark())
	}
}

func sorted(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// QuietUntil lets a fetch session skip recording an unchanged partition
// only for an in-sync follower at the log end with no ISR change in
// flight; skipping up to it never costs a fetching follower its ISR
// place.
func TestLeaderQuietUntil(t *testing.T) {
	l, log := leaderFixture(t)
	lag := l.cfg.ReplicaLagTimeMax
	if out := fetch(t, l, 2, 10, t0); !out.QuietUntil.Equal(t0.Add(lag / quietMargin)) {
		t.Fatalf("in-sync follower at the log end: quiet until %v, want %v", out.QuietUntil, t0.Add(lag/quietMargin))
	}
	if out := fetch(t, l, 3, 9, t0); !out.QuietUntil.IsZero() {
		t.Fatalf("follower behind the log end: quiet until %v", out.QuietUntil)
	}
	// The followers' fetches are recorded only when their last quiet
	// time has run out (a session skips them before), across an idle
	// stretch of twice the lag time; then the leader appends, and their
	// next fetches (just before their quiet time would run out again)
	// still have the old end.
	now := t0
	for now.Sub(t0) < 2*lag {
		fetch(t, l, 2, 10, now)
		out := fetch(t, l, 3, 10, now)
		if out.QuietUntil.IsZero() {
			t.Fatal("in-sync follower at the log end not quiet")
		}
		if u := l.Tick(now); u.Proposal != nil {
			t.Fatalf("ISR change %v while quiet", u.Proposal.NewISR)
		}
		now = out.QuietUntil
	}
	log.appendLeader(1)
	log.flush()
	now = now.Add(lag/quietMargin - time.Millisecond)
	fetch(t, l, 2, 10, now)
	fetch(t, l, 3, 10, now)
	if u := l.Tick(now); u.Proposal != nil {
		t.Fatalf("ISR shrunk to %v after an append to a quiet partition", u.Proposal.NewISR)
	}

	// Outside the ISR, or while a change is in flight: never quiet.
	l2, _ := leaderFixture(t)
	if _, err := l2.OnMetadata(PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5, PartitionEpoch: 8}, t0); err != nil {
		t.Fatal(err)
	}
	out := fetch(t, l2, 3, 10, t0)
	if out.Proposal == nil || !out.QuietUntil.IsZero() {
		t.Fatalf("follower outside the ISR: proposal %v, quiet until %v", out.Proposal, out.QuietUntil)
	}
	if out := fetch(t, l2, 2, 10, t0); !out.QuietUntil.IsZero() {
		t.Fatalf("with an ISR change in flight: quiet until %v", out.QuietUntil)
	}
}
