package group

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func (h *consumerHarness) shb(member string, epoch int32, topics ...string) ShareHeartbeatResponse {
	h.t.Helper()
	req := ShareHeartbeatRequest{Group: "s", MemberID: member, MemberEpoch: epoch}
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return wait(h.t, h.m.ShareHeartbeat(req))
}

func TestShareGroupEveryMemberGetsEveryPartition(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.topics.set("u", 2)
	all := Assignment{topicID("t"): {0, 1, 2, 3, 4, 5}}
	a := h.shb("a", 0, "t")
	if a.Err != nil || !a.HasAssignment || !equalAssignment(a.Assignment, all) || a.MemberEpoch <= 0 {
		t.Fatalf("a joins: %+v", a)
	}
	b := h.shb("b", 0, "t", "u")
	want := Assignment{topicID("t"): {0, 1, 2, 3, 4, 5}, topicID("u"): {0, 1}}
	if b.Err != nil || !equalAssignment(b.Assignment, want) {
		t.Fatalf("b joins: %+v", b)
	}
	// a keeps all of t: no revocation in share groups, and no new
	// assignment when nothing changed for it.
	a2 := h.shb("a", a.MemberEpoch)
	if a2.Err != nil || a2.HasAssignment || a2.MemberEpoch != a.MemberEpoch {
		t.Fatalf("a heartbeats: %+v", a2)
	}
	// Partitions added to t reach both members with a new epoch.
	h.topics.set("t", 8)
	a3 := h.shb("a", a.MemberEpoch)
	if !a3.HasAssignment || len(a3.Assignment[topicID("t")]) != 8 || a3.MemberEpoch <= a.MemberEpoch {
		t.Fatalf("after partitions added: %+v", a3)
	}
	d := h.m.ShareDescribe([]string{"s"})[0]
	if d.Err != nil || d.State != ShareStable || len(d.Members) != 2 || d.Assignor != ShareAssignor {
		t.Fatalf("describe: %+v", d)
	}
	ls, _ := h.m.ListFiltered(nil, []string{"share"})
	if len(ls) != 1 || ls[0].Group != "s" || ls[0].GroupType != GroupTypeShare || ls[0].State != ShareStable {
		t.Fatalf("list: %+v", ls)
	}
	if dg := h.m.Describe([]string{"s"})[0]; dg.ProtocolType != ShareProtocolType || len(dg.Members) != 2 {
		t.Fatalf("DescribeGroups: %+v", dg)
	}
}

func TestShareGroupEpochs(t *testing.T) {
	h := newConsumerHarness(t, nil)
	if r := h.shb("a", 3); !errors.Is(r.Err, ErrGroupIDNotFound) {
		t.Fatalf("heartbeat to no group: %v", r.Err)
	}
	a := h.shb("a", 0, "t")
	if r := h.shb("a", a.MemberEpoch+1); !errors.Is(r.Err, ErrFencedMemberEpoch) {
		t.Fatalf("epoch ahead: %v", r.Err)
	}
	if r := h.shb("x", 1); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("unknown member: %v", r.Err)
	}
	h.shb("b", 0, "t") // bumps the group epoch
	// A member behind its own epoch (it lost an answer) gets the
	// assignment again.
	if r := h.shb("a", a.MemberEpoch-1); r.Err != nil || !r.HasAssignment {
		t.Fatalf("behind: %+v", r)
	}
	// Rejoining with the same id keeps the member.
	if r := h.shb("a", 0, "t"); r.Err != nil || !r.HasAssignment {
		t.Fatalf("rejoin: %+v", r)
	}
	if r := h.shb("a", 0); !errors.Is(r.Err, ErrInvalidRequest) {
		t.Fatalf("join without topics: %v", r.Err)
	}
}

func TestShareGroupLeaveAndExpiry(t *testing.T) {
	h := newConsumerHarness(t, nil)
	var gone []string
	h.m.SetShareMemberGone(func(g, m string) { gone = append(gone, g+"/"+m) })
	h.shb("a", 0, "t")
	b := h.shb("b", 0, "t")
	if r := h.shb("a", LeaveEpoch); r.Err != nil || r.MemberEpoch != LeaveEpoch {
		t.Fatalf("leave: %+v", r)
	}
	// Leaving twice is fine (a retried leave).
	if r := h.shb("a", LeaveEpoch); r.Err != nil {
		t.Fatalf("second leave: %v", r.Err)
	}
	h.tick(DefaultConfig().ConsumerSessionTimeout - time.Millisecond)
	if r := h.shb("b", b.MemberEpoch); r.Err != nil {
		t.Fatalf("b heartbeats: %v", r.Err)
	}
	h.tick(DefaultConfig().ConsumerSessionTimeout)
	if !slices.Equal(gone, []string{"s/a", "s/b"}) {
		t.Fatalf("gone %v", gone)
	}
	if d := h.m.ShareDescribe([]string{"s"})[0]; d.State != ShareEmpty {
		t.Fatalf("state %s", d.State)
	}
	// An empty share group is kept (no offsets to expire it by) until
	// deleted.
	h.tick(DefaultConfig().OffsetsRetentionCheckInterval)
	if !h.m.IsShareGroup("s") {
		t.Fatal("empty share group expired")
	}
	res := wait(t, h.m.DeleteGroups([]string{"s"}))
	if res[0].Err != nil || h.m.IsShareGroup("s") {
		t.Fatalf("delete: %+v", res)
	}
}

func TestShareGroupTypesDoNotMix(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.shb("a", 0, "t")
	if r := h.hb(ConsumerHeartbeatRequest{Group: "s", MemberID: "c", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}}); !errors.Is(r.Err, ErrGroupIDNotFound) {
		t.Fatalf("consumer heartbeat to a share group: %v", r.Err)
	}
	j := wait(t, h.m.Join(JoinRequest{Group: "s", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}}, SessionTimeout: 10 * time.Second}))
	if !errors.Is(j.Err, ErrInconsistentGroupProtocol) {
		t.Fatalf("join of a share group: %v", j.Err)
	}
	res := wait(t, h.m.DeleteGroups([]string{"s"}))
	if !errors.Is(res[0].Err, ErrNonEmptyGroup) {
		t.Fatalf("delete with members: %v", res[0].Err)
	}
	if err := h.m.ShareGroupEmpty("s", true, false); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("alter with members: %v", err)
	}
	// A consumer group is not a share group.
	h.hb(ConsumerHeartbeatRequest{Group: "c", MemberID: "m", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
	if r := wait(t, h.m.ShareHeartbeat(ShareHeartbeatRequest{Group: "c", MemberID: "x", SubscribedTopicNames: []string{"t"}})); !errors.Is(r.Err, ErrGroupIDNotFound) {
		t.Fatalf("share heartbeat to a consumer group: %v", r.Err)
	}
	if err := h.m.ShareGroupEmpty("c", true, true); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("share offsets of a consumer group: %v", err)
	}
	// AlterShareGroupOffsets may create the group.
	if err := h.m.ShareGroupEmpty("new", true, true); err != nil || !h.m.IsShareGroup("new") {
		t.Fatalf("create: %v", err)
	}
}
