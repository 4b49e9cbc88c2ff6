package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
)

func TestHappyPathOneToTenMembers(t *testing.T) {
	for n := 1; n <= 10; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t, nil)
			sg := h.form("g", n)
			if sg.gen != 1 || sg.leader != sg.members[0] {
				t.Fatalf("gen %d leader %s (first member %s)", sg.gen, sg.leader, sg.members[0])
			}
			for _, id := range sg.members {
				if err := h.heartbeat("g", sg.gen, id); err != nil {
					t.Fatalf("heartbeat %s: %v", id, err)
				}
			}
			d := h.m.Describe([]string{"g"})[0]
			if d.State != "Stable" || len(d.Members) != n || d.Protocol != "range" || string(d.Members[0].Assignment) != "assignment-for-"+sg.members[0] {
				t.Fatalf("describe: %+v", d)
			}
			// A follower that syncs again in Stable gets its assignment at once.
			if n > 1 {
				r := wait(t, h.m.Sync(SyncRequest{Group: "g", Generation: 1, MemberID: sg.members[1]}))
				if string(r.Assignment) != "assignment-for-"+sg.members[1] {
					t.Fatalf("late sync: %+v", r)
				}
			}
			// The stable assignment is the last record written.
			recs := h.p.Records(h.m.Partition("g"))
			rec, err := DecodeRecord(recs[len(recs)-1].Key, recs[len(recs)-1].Value)
			if err != nil || rec.Group == nil || rec.Group.Generation != 1 || len(rec.Group.Members) != n || *rec.Group.Leader != sg.leader {
				t.Fatalf("last record: %v %+v", err, rec)
			}
		})
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, nil)
	r := wait(t, h.m.Join(joinReq("", "")))
	mustErr(t, r.Err, ErrInvalidGroupID)
	bad := joinReq("g", "")
	bad.SessionTimeout = time.Second
	mustErr(t, wait(t, h.m.Join(bad)).Err, ErrInvalidSessionTimeout)
	bad = joinReq("g", "")
	bad.Protocols = nil
	mustErr(t, wait(t, h.m.Join(bad)).Err, ErrInconsistentGroupProtocol)
	mustErr(t, wait(t, h.m.Join(joinReq("nope", "made-up-id"))).Err, ErrUnknownMemberID)

	// v3 and older: no MEMBER_ID_REQUIRED round.
	old := joinReq("v3", "")
	old.RequireKnownMemberID = false
	r = wait(t, h.m.Join(old))
	if r.Err != nil || r.Generation != 1 || r.MemberID == "" || r.Leader != r.MemberID {
		t.Fatalf("v3 join: %+v", r)
	}
}

func TestProtocolSelection(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.newMemberID("g"), h.newMemberID("g")
	fa := h.m.Join(joinReq("g", a, "roundrobin", "range"))
	// b prefers range and does not know roundrobin: range is the only
	// common protocol.
	fb := h.m.Join(joinReq("g", b, "range"))
	ra, rb := wait(t, fa), wait(t, fb)
	if ra.Protocol != "range" || rb.Protocol != "range" {
		t.Fatalf("protocol %q/%q", ra.Protocol, rb.Protocol)
	}
	mustErr(t, wait(t, h.m.Join(joinReq("g", "", "sticky"))).Err, ErrInconsistentGroupProtocol)
	other := joinReq("g", "")
	other.ProtocolType = "connect"
	mustErr(t, wait(t, h.m.Join(other)).Err, ErrInconsistentGroupProtocol)
}

func TestRebalanceOnMemberAdd(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 2)
	newID := h.newMemberID("g")
	if h.state("g") != "Stable" {
		t.Fatal("the MEMBER_ID_REQUIRED round must not start a rebalance")
	}
	fc := h.m.Join(joinReq("g", newID))
	mustErr(t, h.heartbeat("g", sg.gen, sg.members[0]), ErrRebalanceInProgress)
	// Commits of the current generation are still fine while preparing.
	if err := h.commit("g", sg.gen, sg.members[1], "topic-a", 0, 10); err != nil {
		t.Fatal(err)
	}
	futs := []*Future[JoinResponse]{h.m.Join(joinReq("g", sg.members[0])), h.m.Join(joinReq("g", sg.members[1])), fc}
	sg2 := h.completeRebalance("g", futs)
	if sg2.gen != 2 || len(sg2.members) != 3 || sg2.leader != sg.leader {
		t.Fatalf("after add: %+v", sg2)
	}
}

func TestRebalanceOnLeave(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 4)
	res, err := h.m.Leave("g", []LeaveMember{{MemberID: sg.members[0]}, {MemberID: sg.members[1]}, {MemberID: "stranger"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("leave: %+v", res)
	}
	mustErr(t, res[2].Err, ErrUnknownMemberID)
	mustErr(t, h.heartbeat("g", sg.gen, sg.members[0]), ErrUnknownMemberID)
	mustErr(t, h.heartbeat("g", sg.gen, sg.members[2]), ErrRebalanceInProgress)
	sg2 := h.completeRebalance("g", []*Future[JoinResponse]{h.m.Join(joinReq("g", sg.members[2])), h.m.Join(joinReq("g", sg.members[3]))})
	// The leader left: the earliest remaining member leads.
	if sg2.gen != 2 || len(sg2.members) != 2 || sg2.leader != sg.members[2] {
		t.Fatalf("after leave: %+v", sg2)
	}
	// Everyone leaves: Empty, and the new generation is recorded.
	if _, err := h.m.Leave("g", []LeaveMember{{MemberID: sg.members[2]}, {MemberID: sg.members[3]}}); err != nil {
		t.Fatal(err)
	}
	if s := h.state("g"); s != "Empty" {
		t.Fatalf("state %s", s)
	}
	res, _ = h.m.Leave("missing", []LeaveMember{{MemberID: "x"}})
	mustErr(t, res[0].Err, ErrUnknownMemberID)
}

func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 2)
	a, b := sg.members[0], sg.members[1]
	h.tick(testSession / 2)
	if err := h.heartbeat("g", sg.gen, a); err != nil {
		t.Fatal(err)
	}
	h.tick(testSession/2 - time.Millisecond)
	if s := h.state("g"); s != "Stable" {
		t.Fatalf("expired early: %s", s)
	}
	h.tick(time.Millisecond) // b's session is over; a heartbeated half a session ago
	mustErr(t, h.heartbeat("g", sg.gen, a), ErrRebalanceInProgress)
	mustErr(t, h.heartbeat("g", sg.gen, b), ErrUnknownMemberID)
	// a is the only member left: its rejoin completes the rebalance at once.
	sg2 := h.completeRebalance("g", []*Future[JoinResponse]{h.m.Join(joinReq("g", a))})
	if sg2.gen != 2 || len(sg2.members) != 1 {
		t.Fatalf("%+v", sg2)
	}
}

func TestRebalanceTimeoutRemovesMemberThatDidNotRejoin(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 2)
	a, b := sg.members[0], sg.members[1]
	c := h.newMemberID("g")
	fc := h.m.Join(joinReq("g", c))
	fa := h.m.Join(joinReq("g", a))
	// b keeps heartbeating (so its session never expires) but never rejoins.
	for range 5 {
		h.tick(testRebalance / 6)
		mustErr(t, h.heartbeat("g", sg.gen, b), ErrRebalanceInProgress)
		if !pending(fa) {
			t.Fatal("join completed before the rebalance timeout")
		}
	}
	h.tick(testRebalance / 6)
	sg2 := h.completeRebalance("g", []*Future[JoinResponse]{fa, fc})
	if sg2.gen != 2 || len(sg2.members) != 2 {
		t.Fatalf("%+v", sg2)
	}
	mustErr(t, h.heartbeat("g", sg.gen, b), ErrUnknownMemberID)
}

func TestSyncTimeoutRemovesSilentLeader(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.newMemberID("g"), h.newMemberID("g")
	fa, fb := h.m.Join(joinReq("g", a)), h.m.Join(joinReq("g", b))
	ra, rb := wait(t, fa), wait(t, fb)
	follower := b
	if ra.Leader == b {
		follower = a
	}
	fs := h.m.Sync(SyncRequest{Group: "g", Generation: rb.Generation, MemberID: follower})
	h.tick(testSession - time.Second)
	if err := h.heartbeat("g", 1, follower); err != nil { // heartbeats are fine while completing
		t.Fatal(err)
	}
	h.tick(testRebalance)
	mustErr(t, wait(t, fs).Err, ErrRebalanceInProgress)
	if s := h.state("g"); s != "PreparingRebalance" {
		t.Fatalf("state %s", s)
	}
	d := h.m.Describe([]string{"g"})[0]
	if len(d.Members) != 1 || d.Members[0].MemberID != follower {
		t.Fatalf("members %+v", d.Members)
	}
}

func TestZombieFencing(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 2)
	a, b := sg.members[0], sg.members[1]
	if err := h.commit("g", 1, b, "topic-a", 0, 5); err != nil {
		t.Fatal(err)
	}
	c := h.newMemberID("g")
	sg2 := h.completeRebalance("g", []*Future[JoinResponse]{h.m.Join(joinReq("g", a)), h.m.Join(joinReq("g", b)), h.m.Join(joinReq("g", c))})
	if sg2.gen != 2 {
		t.Fatal(sg2)
	}
	// b missed generation 2 (a long GC pause, say) and still believes in 1.
	mustErr(t, h.commit("g", 1, b, "topic-a", 0, 6), ErrIllegalGeneration)
	mustErr(t, h.heartbeat("g", 1, b), ErrIllegalGeneration)
	mustErr(t, wait(t, h.m.Sync(SyncRequest{Group: "g", Generation: 1, MemberID: b})).Err, ErrIllegalGeneration)
	mustErr(t, h.commit("g", 2, "stranger", "topic-a", 0, 6), ErrUnknownMemberID)
	mustErr(t, h.commit("g", -1, "", "topic-a", 0, 6), ErrUnknownMemberID) // simple commit into a live group
	mustErr(t, h.commit("never-seen", 3, "x", "topic-a", 0, 6), ErrIllegalGeneration)
	if got := h.fetch("g", "topic-a", 0); got != 5 {
		t.Fatalf("offset %d, zombie commits must not land", got)
	}
	if err := h.commit("g", 2, b, "topic-a", 0, 7); err != nil {
		t.Fatal(err)
	}
	// Completing: the member knows the generation, not yet its partitions.
	d := h.newMemberID("g")
	fd := h.m.Join(joinReq("g", d))
	futs := []*Future[JoinResponse]{h.m.Join(joinReq("g", a)), h.m.Join(joinReq("g", b)), h.m.Join(joinReq("g", c)), fd}
	wait(t, futs[0])
	mustErr(t, h.commit("g", 3, b, "topic-a", 0, 8), ErrRebalanceInProgress)
}

func staticJoin(group, memberID, instance string, protos ...string) JoinRequest {
	r := joinReq(group, memberID, protos...)
	r.InstanceID = &instance
	return r
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = time.Second })
	// Static members skip the MEMBER_ID_REQUIRED round even on v4+; the
	// initial delay lets both land in the first generation.
	fa := h.m.Join(staticJoin("g", "", "inst-a"))
	fb := h.m.Join(staticJoin("g", "", "inst-b"))
	h.tick(time.Second)
	sg := h.completeRebalance("g", []*Future[JoinResponse]{fa, fb})
	oldA := sg.members[0]
	if sg.leader != oldA {
		t.Fatal("a should lead")
	}
	follower := sg.members[1]

	// The follower restarts: same instance id, no member id, same metadata.
	r := wait(t, h.m.Join(staticJoin("g", "", "inst-b")))
	if r.Err != nil || r.Generation != 1 || r.MemberID == follower || r.SkipAssignment {
		t.Fatalf("static rejoin: %+v", r)
	}
	if s := h.state("g"); s != "Stable" {
		t.Fatalf("static rejoin rebalanced: %s", s)
	}
	if err := h.heartbeat("g", 1, oldA); err != nil {
		t.Fatalf("leader disturbed: %v", err)
	}
	sr := wait(t, h.m.Sync(SyncRequest{Group: "g", Generation: 1, MemberID: r.MemberID, InstanceID: ptr("inst-b")}))
	if string(sr.Assignment) != "assignment-for-"+follower {
		t.Fatalf("kept assignment: %+v", sr)
	}
	// The old process is a zombie now.
	err := h.m.Heartbeat(HeartbeatRequest{Group: "g", Generation: 1, MemberID: follower, InstanceID: ptr("inst-b")})
	mustErr(t, err, ErrFencedInstanceID)
	cr := wait(t, h.m.CommitOffsets(OffsetCommitRequest{Group: "g", Generation: 1, MemberID: follower, InstanceID: ptr("inst-b"),
		Offsets: []CommitOffset{{Topic: "topic-a", Offset: 1}}}))
	mustErr(t, cr.Partitions[0].Err, ErrFencedInstanceID)

	// The static leader restarting keeps leading and is told to reuse the
	// current assignment (KIP-814).
	rl := wait(t, h.m.Join(staticJoin("g", "", "inst-a")))
	if rl.Err != nil || rl.Leader != rl.MemberID || !rl.SkipAssignment || len(rl.Members) != 2 || h.state("g") != "Stable" {
		t.Fatalf("static leader rejoin: %+v", rl)
	}
	// Changed metadata does rebalance.
	f := h.m.Join(staticJoin("g", "", "inst-b", "cooperative-sticky", "range"))
	if !pending(f) || h.state("g") != "PreparingRebalance" {
		t.Fatal("changed metadata must rebalance")
	}
}

func ptr(s string) *string { return &s }

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	fa := h.m.Join(staticJoin("g", "", "a"))
	h.tick(time.Second)
	if !pending(fa) {
		t.Fatal("the initial delay must hold a lone member")
	}
	fb := h.m.Join(staticJoin("g", "", "b")) // pushes the end to +4s
	h.tick(2500 * time.Millisecond)
	if !pending(fa) || !pending(fb) {
		t.Fatal("a newcomer extends the delay")
	}
	h.tick(500 * time.Millisecond)
	sg := h.completeRebalance("g", []*Future[JoinResponse]{fa, fb})
	if sg.gen != 1 || len(sg.members) != 2 {
		t.Fatalf("%+v", sg)
	}
}

func TestKIP394PendingMemberExpires(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 1)
	h.newMemberID("g") // never comes back
	leaver := h.newMemberID("g")
	if res, _ := h.m.Leave("g", []LeaveMember{{MemberID: leaver}}); res[0].Err != nil {
		t.Fatal("a pending member may leave")
	}
	// A rebalance now waits for the pending id until its session ends.
	b := h.newMemberID("g")
	fb := h.m.Join(joinReq("g", b))
	fa := h.m.Join(joinReq("g", sg.members[0]))
	h.tick(testSession - time.Millisecond)
	if !pending(fa) {
		t.Fatal("join completed with a pending member outstanding")
	}
	h.tick(time.Millisecond)
	h.completeRebalance("g", []*Future[JoinResponse]{fa, fb})
}

func TestRoutingAndLoading(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 4
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m, err := NewManager(cfg, NewMemoryPersister(), clock)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Partition("g")
	mustErr(t, m.Heartbeat(HeartbeatRequest{Group: "g"}), ErrNotCoordinator)
	m.BeginLoad(p)
	mustErr(t, wait(t, m.Join(joinReq("g", ""))).Err, ErrCoordinatorLoadInProgress)
	if _, err := m.List(nil); err == nil {
		t.Fatal("List must report the loading partition")
	}
	m.FinishLoad(p, nil)
	f := m.Join(joinReq("g", ""))
	mustErr(t, wait(t, f).Err, ErrMemberIDRequired)
	id := f.Result().MemberID
	jf := m.Join(joinReq("g", id)) // waits for the initial delay
	m.Unload(p)
	mustErr(t, wait(t, jf).Err, ErrNotCoordinator)
	mustErr(t, m.Heartbeat(HeartbeatRequest{Group: "g", MemberID: id}), ErrNotCoordinator)
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("zero Config must not validate")
	}
}

func TestListAndDescribe(t *testing.T) {
	h := newHarness(t, nil)
	h.form("stable", 2)
	if err := h.commit("simple", -1, "", "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	all, err := h.m.List(nil)
	if err != nil || len(all) != 2 || all[0].Group != "simple" || all[0].State != "Empty" || all[0].ProtocolType != "" ||
		all[1].State != "Stable" || all[1].ProtocolType != "consumer" {
		t.Fatalf("list: %v %+v", err, all)
	}
	st, _ := h.m.List([]string{"stable"})
	if len(st) != 1 || st[0].Group != "stable" {
		t.Fatalf("filtered: %+v", st)
	}
	d := h.m.Describe([]string{"missing", ""})
	if d[0].State != "Dead" || d[0].Err != nil {
		t.Fatalf("missing: %+v", d[0])
	}
	mustErr(t, d[1].Err, ErrInvalidGroupID)
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("live", 1)
	if err := h.commit("idle", -1, "", "t", 0, 9); err != nil {
		t.Fatal(err)
	}
	res := wait(t, h.m.DeleteGroups([]string{"live", "idle", "missing"}))
	mustErr(t, res[0].Err, ErrNonEmptyGroup)
	if res[1].Err != nil {
		t.Fatal(res[1].Err)
	}
	mustErr(t, res[2].Err, ErrGroupIDNotFound)
	if got := h.fetch("idle", "t", 0); got != -1 {
		t.Fatalf("deleted group still has offset %d", got)
	}
	if err := h.heartbeat("live", sg.gen, sg.members[0]); err != nil {
		t.Fatal(err)
	}
	// Tombstones for the offset and the group metadata were written.
	recs := h.p.Records(h.m.Partition("idle"))
	var tombs int
	for _, kv := range recs {
		r, err := DecodeRecord(kv.Key, kv.Value)
		if err == nil && r.GroupID == "idle" && r.Tombstone {
			tombs++
		}
	}
	if tombs != 2 {
		t.Fatalf("%d tombstones", tombs)
	}
}

// TestRunWakesWhenAGroupAppears: Run, started with no group, sleeps (no
// deadline to fire) and starts ticking once a group exists: a member
// whose session ran out is removed without the test calling Tick.
func TestRunWakesWhenAGroupAppears(t *testing.T) {
	h := newHarness(t, nil)
	asleep := make(chan struct{}, 1)
	runAsleep = func() { asleep <- struct{}{} }
	defer func() { runAsleep = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.m.Run(ctx, time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-asleep:
	case <-time.After(10 * time.Second):
		t.Fatal("Run, with no group, did not go to sleep")
	}
	sg := h.form("g", 1)
	h.clock.Advance(testSession + time.Millisecond)
	if !testwait.Until(10*time.Second, func() bool { return h.state("g") != "Stable" }) {
		t.Fatalf("the group is still %s a session after its last heartbeat: Run never ticked", h.state("g"))
	}
	mustErr(t, h.heartbeat("g", sg.gen, sg.members[0]), ErrUnknownMemberID)
}
