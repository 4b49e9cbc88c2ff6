package group

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestConsumerJoinAssignStable(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := h.join("a", "t")
	if a.epoch != 1 || len(parts(a.owned, "t")) != 6 {
		t.Fatalf("after join: epoch %d owned %v", a.epoch, a.owned)
	}
	d := h.describe("g")
	if d.State != ConsumerStable || d.GroupEpoch != 1 || d.AssignmentEpoch != 1 || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	// A heartbeat that changes nothing writes nothing and carries no
	// assignment.
	n := h.nrec()
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1})
	if r.Err != nil || r.HasAssignment || r.MemberEpoch != 1 || h.nrec() != n {
		t.Fatalf("idle heartbeat: %+v, %d records written", r, h.nrec()-n)
	}
	// Owned differing from what it has: it is told again.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, Owned: Assignment{}})
	if r.Err != nil || !r.HasAssignment || len(parts(r.Assignment, "t")) != 6 {
		t.Fatalf("heartbeat with stale owned: %+v", r)
	}
}

func TestConsumerJoinRecords(t *testing.T) {
	h := newConsumerHarness(t, nil)
	// The order is the machine's business, whatever the codec.
	h.m.crec, h.real = testRecords, false
	h.join("a", "t")
	got := h.keysWritten(0)
	want := []string{"member/g/a", "group/g/", "target/g/a", "target-meta/g/", "current/g/a"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	n := h.nrec()
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, Owned: Assignment{}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: LeaveEpoch})
	if r.Err != nil || r.MemberEpoch != LeaveEpoch {
		t.Fatalf("leave: %+v", r)
	}
	got = h.keysWritten(n)
	want = []string{"current/g/a (tombstone)", "target/g/a (tombstone)", "member/g/a (tombstone)", "group/g/"}
	if !slices.Equal(got, want) {
		t.Fatalf("leave records %v, want %v", got, want)
	}
}

func TestConsumerAnswerAfterDurable(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.p.Hold()
	f := h.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 1, MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
	if !pending(f) {
		t.Fatal("heartbeat answered before its records were durable")
	}
	// A heartbeat that writes nothing still waits for what the one
	// before it wrote.
	f2 := h.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 1, MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1})
	if !pending(f2) {
		t.Fatal("idle heartbeat answered before the previous records were durable")
	}
	h.p.Release(nil)
	if r := wait(t, f); r.Err != nil || r.MemberEpoch != 1 {
		t.Fatalf("%+v", r)
	}
	if r := wait(t, f2); r.Err != nil || r.MemberEpoch != 1 || r.HasAssignment {
		t.Fatalf("idle: %+v", r)
	}
	h.p.Fail(ErrAppendFailed)
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "b", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
	mustErr(t, r.Err, ErrCoordinatorNotAvailable)
}

func TestConsumerSecondMemberRevokesFirst(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := h.join("a", "t")
	b := h.join("b", "t")
	// b is at the new epoch but a still holds everything.
	if b.epoch != 2 || b.owned.size() != 0 {
		t.Fatalf("b: epoch %d owned %v", b.epoch, b.owned)
	}
	if d := h.describe("g"); d.State != ConsumerReconciling {
		t.Fatalf("state %s", d.State)
	}
	// a is asked to revoke: it keeps its epoch and gets its kept set.
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: a.epoch, RebalanceTimeout: -1, Owned: a.owned})
	if r.Err != nil || r.MemberEpoch != 1 || !r.HasAssignment || len(parts(r.Assignment, "t")) != 3 {
		t.Fatalf("a revoking: %+v", r)
	}
	h.checkInvariant("g")
	// b still gets nothing: a has not confirmed.
	if err := h.step(b); err != nil || b.owned.size() != 0 {
		t.Fatalf("b before a acked: %v %v", err, b.owned)
	}
	// a confirms by owning only the kept set.
	a.owned = normalize(r.Assignment)
	if err := h.step(a); err != nil || a.epoch != 2 {
		t.Fatalf("a ack: %v epoch %d", err, a.epoch)
	}
	if err := h.step(b); err != nil || len(parts(b.owned, "t")) != 3 {
		t.Fatalf("b after a acked: %v %v", err, b.owned)
	}
	h.exactlyOnce(map[string]int32{"t": 6}, a, b)
	if d := h.describe("g"); d.State != ConsumerStable {
		t.Fatalf("state %s", d.State)
	}
}

func TestConsumerLeaveFreesPartitions(t *testing.T) {
	// -2 from a member without an instance id is a plain leave.
	for _, epoch := range []int32{LeaveEpoch, StaticLeaveEpoch} {
		h := newConsumerHarness(t, nil)
		a, b := h.join("a", "t"), h.join("b", "t")
		h.converge(a, b)
		r := h.hb(ConsumerHeartbeatRequest{MemberID: "b", MemberEpoch: epoch})
		if r.Err != nil || r.MemberEpoch != LeaveEpoch {
			t.Fatalf("leave with epoch %d: %+v", epoch, r)
		}
		h.converge(a)
		h.exactlyOnce(map[string]int32{"t": 6}, a)
		r = h.hb(ConsumerHeartbeatRequest{MemberID: "b", MemberEpoch: LeaveEpoch})
		mustErr(t, r.Err, ErrUnknownMemberID)
		if d := h.describe("g"); d.GroupEpoch != 3 || len(d.Members) != 1 {
			t.Fatalf("describe: %+v", d)
		}
	}
}

func TestConsumerStaticLeaveAndRejoin(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := &client{id: "a1", instance: strp("i-a"), topics: []string{"t"}}
	b := &client{id: "b1", instance: strp("i-b"), topics: []string{"t"}}
	h.converge(a, b)
	h.converge(a, b)
	h.exactlyOnce(map[string]int32{"t": 6}, a, b)
	epoch := h.describe("g").GroupEpoch
	held := a.owned
	// franz-go leaves with epoch -2 and its member id only.
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a1", MemberEpoch: StaticLeaveEpoch})
	if r.Err != nil || r.MemberEpoch != StaticLeaveEpoch {
		t.Fatalf("static leave: %+v", r)
	}
	// Nobody takes its partitions meanwhile.
	h.converge(b)
	if b.owned.size() != 3 {
		t.Fatalf("b took a's partitions: %v", b.owned)
	}
	// A live member may not take the instance id from b.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "b2", InstanceID: strp("i-b"), SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
	mustErr(t, r.Err, ErrUnreleasedInstanceID)
	// The restarted a comes back with a new id and the same partitions.
	a2 := &client{id: "a2", instance: strp("i-a"), topics: []string{"t"}}
	if err := h.step(a2); err != nil {
		t.Fatal(err)
	}
	if !equalAssignment(a2.owned, held) {
		t.Fatalf("rejoined with %v, had %v", a2.owned, held)
	}
	d := h.describe("g")
	if d.GroupEpoch != epoch || len(d.Members) != 2 || d.Members[0].MemberID != "a2" {
		t.Fatalf("after rejoin: %+v (epoch was %d)", d, epoch)
	}
	h.exactlyOnce(map[string]int32{"t": 6}, a2, b)
	// The old id is gone.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "a1", MemberEpoch: a.epoch, RebalanceTimeout: -1})
	mustErr(t, r.Err, ErrUnknownMemberID)
}

func TestConsumerStaticSessionExpiry(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := &client{id: "a1", instance: strp("i-a"), topics: []string{"t"}}
	b := h.join("b", "t")
	h.converge(a, b)
	h.hb(ConsumerHeartbeatRequest{MemberID: "a1", MemberEpoch: StaticLeaveEpoch, InstanceID: strp("i-a")})
	for range 10 {
		h.tick(h.m.cfg.ConsumerSessionTimeout / 10)
		h.step(b)
	}
	h.tick(time.Millisecond)
	h.converge(b)
	h.exactlyOnce(map[string]int32{"t": 6}, b)
}

func TestConsumerSessionExpiry(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a, b := h.join("a", "t"), h.join("b", "t")
	h.converge(a, b)
	// b keeps heartbeating, a goes silent.
	step := h.m.cfg.ConsumerSessionTimeout / 4
	for range 4 {
		h.tick(step)
		if err := h.step(b); err != nil {
			t.Fatal(err)
		}
	}
	if d := h.describe("g"); len(d.Members) != 1 || d.Members[0].MemberID != "b" {
		t.Fatalf("after a's session: %+v", d)
	}
	h.converge(b)
	h.exactlyOnce(map[string]int32{"t": 6}, b)
	mustErr(t, h.step(a), ErrUnknownMemberID)
}

func TestConsumerRevocationTimeoutFences(t *testing.T) {
	h := newConsumerHarness(t, func(c *Config) { c.ConsumerSessionTimeout = time.Hour })
	a := h.join("a", "t")
	b := h.join("b", "t")
	// a heartbeats but never gives anything up.
	stubborn := a.owned
	for range 3 {
		h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, Owned: stubborn})
		h.tick(testRebalance / 2)
	}
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, Owned: stubborn})
	mustErr(t, r.Err, ErrUnknownMemberID)
	h.converge(b)
	h.exactlyOnce(map[string]int32{"t": 6}, b)
}

func TestConsumerFencedEpochs(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := h.join("a", "t")
	b := h.join("b", "t")
	h.converge(a, b)
	if a.epoch != 2 {
		t.Fatalf("a at epoch %d", a.epoch)
	}
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 3, RebalanceTimeout: -1})
	mustErr(t, r.Err, ErrFencedMemberEpoch)
	// The previous epoch with an owned subset: it lost our answer.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, Owned: a.owned})
	if r.Err != nil || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch with owned subset: %+v", r)
	}
	// Without owned, or owning more than it has, it is fenced.
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1})
	mustErr(t, r.Err, ErrFencedMemberEpoch)
	r = h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeout: -1, Owned: Assignment{topicID("t"): {0, 1, 2, 3, 4, 5}}})
	mustErr(t, r.Err, ErrFencedMemberEpoch)
	// A fenced member rejoining with its id at epoch 0 gets its target back.
	a.epoch, a.owned = 0, nil
	if err := h.step(a); err != nil || a.epoch != 2 || a.owned.size() != 3 {
		t.Fatalf("rejoin: %v epoch %d owned %v", err, a.epoch, a.owned)
	}
	h.exactlyOnce(map[string]int32{"t": 6}, a, b)
}

func TestConsumerValidation(t *testing.T) {
	h := newConsumerHarness(t, nil)
	for _, c := range []struct {
		name string
		req  ConsumerHeartbeatRequest
		err  error
	}{
		{"no group", ConsumerHeartbeatRequest{Group: "", Version: 1, MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}}, ErrInvalidGroupID},
		{"no subscription", ConsumerHeartbeatRequest{MemberID: "a", Owned: Assignment{}}, ErrInvalidRequest},
		{"no owned", ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicNames: []string{"t"}}, ErrInvalidRequest},
		{"owned on join", ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{topicID("t"): {0}}}, ErrInvalidRequest},
		{"negative rebalance", ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}, RebalanceTimeout: -1}, ErrInvalidRequest},
		{"v1 no id", ConsumerHeartbeatRequest{SubscribedTopicNames: []string{"t"}, Owned: Assignment{}}, ErrInvalidRequest},
		{"epoch without id", ConsumerHeartbeatRequest{MemberEpoch: 3}, ErrInvalidRequest},
		{"epoch -3", ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: -3}, ErrInvalidRequest},
		{"assignor", ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}, ServerAssignor: strp("sticky")}, ErrUnsupportedAssignor},
		{"regex", ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicRegex: strp("t("), Owned: Assignment{}}, ErrInvalidRegularExpression},
		{"unknown member", ConsumerHeartbeatRequest{MemberID: "zz", MemberEpoch: 1, RebalanceTimeout: -1}, ErrUnknownMemberID},
	} {
		req := c.req
		if c.name != "no group" && req.Group == "" {
			req.Group = "g"
		}
		if req.Version == 0 {
			req.Version = 1
		}
		r := wait(t, h.m.ConsumerHeartbeat(req))
		if !errors.Is(r.Err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, r.Err, c.err)
		}
	}
	// v0: the coordinator names a joining member.
	r := wait(t, h.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 0, SubscribedTopicNames: []string{"t"}, Owned: Assignment{}}))
	if r.Err != nil || r.MemberID == "" || r.MemberEpoch != 1 {
		t.Fatalf("v0 join: %+v", r)
	}
	// No topic view yet.
	h2 := newHarness(t, nil)
	r = wait(t, h2.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 1, MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}}))
	mustErr(t, r.Err, ErrCoordinatorNotAvailable)
}

func TestConsumerRegexAndTopicChanges(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := &client{id: "a", regex: strp("orders-.*")}
	h.topics.set("orders-eu", 2)
	h.topics.set("xorders-eu", 2) // must not match: the whole name counts
	h.converge(a)
	if a.owned.size() != 2 || len(parts(a.owned, "orders-eu")) != 2 {
		t.Fatalf("regex owned %v", a.owned)
	}
	e := h.describe("g").GroupEpoch
	h.topics.set("orders-us", 3)
	h.converge(a)
	if a.owned.size() != 5 || h.describe("g").GroupEpoch != e+1 {
		t.Fatalf("after create: owned %v epoch %d (was %d)", a.owned, h.describe("g").GroupEpoch, e)
	}
	// Partition growth of a subscribed topic.
	h.topics.set("orders-us", 4)
	h.converge(a)
	if a.owned.size() != 6 || h.describe("g").GroupEpoch != e+2 {
		t.Fatalf("after growth: owned %v", a.owned)
	}
	// A topic nobody subscribes to changes nothing.
	h.topics.set("t", 12)
	h.converge(a)
	if h.describe("g").GroupEpoch != e+2 {
		t.Fatal("unsubscribed topic bumped the epoch")
	}
}

func TestConsumerMaxSize(t *testing.T) {
	h := newConsumerHarness(t, func(c *Config) { c.ConsumerMaxSize = 2 })
	h.join("a", "t")
	h.join("b", "t")
	r := h.hb(ConsumerHeartbeatRequest{MemberID: "c", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
	mustErr(t, r.Err, ErrGroupMaxSizeReached)
}

func TestConsumerConversion(t *testing.T) {
	for _, policy := range []string{"bidirectional", "upgrade", "downgrade", "disabled"} {
		t.Run(policy, func(t *testing.T) {
			h := newConsumerHarness(t, func(c *Config) { c.MigrationPolicy = policy })
			// A classic group with members refuses consumer members.
			sg := h.form("g", 1)
			r := h.hb(ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
			mustErr(t, r.Err, ErrGroupIDNotFound)
			if err := h.commit("g", sg.gen, sg.members[0], "t", 0, 42); err != nil {
				t.Fatal(err)
			}
			if res, err := h.m.Leave("g", []LeaveMember{{MemberID: sg.members[0]}}); err != nil || res[0].Err != nil {
				t.Fatal(err, res)
			}
			h.tick(time.Second) // the rebalance completes: Empty
			r = h.hb(ConsumerHeartbeatRequest{MemberID: "a", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}})
			if policy == "bidirectional" || policy == "upgrade" {
				if r.Err != nil {
					t.Fatalf("upgrade refused: %v", r.Err)
				}
				if h.fetch("g", "t", 0) != 42 {
					t.Fatal("offsets lost in the upgrade")
				}
				// The classic metadata got its tombstone.
				snap, err := Load(Records(h.p.Records(h.m.Partition("g"))))
				if err != nil || snap.Groups["g"] == nil || snap.Groups["g"].Metadata != nil {
					t.Fatalf("classic metadata after the upgrade: %v %+v", err, snap.Groups["g"])
				}
				if d := h.m.Describe([]string{"g"})[0]; d.ProtocolType != ConsumerProtocolType || d.State != string(ConsumerStable) {
					t.Fatalf("describe after upgrade: %+v", d)
				}
				// A classic join to the non-empty consumer group.
				jr := wait(t, h.m.Join(joinReq("g", "")))
				mustErr(t, jr.Err, ErrInconsistentGroupProtocol)
				h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: LeaveEpoch})
				jr = wait(t, h.m.Join(joinReq("g", "")))
				if policy == "bidirectional" {
					mustErr(t, jr.Err, ErrMemberIDRequired)
					if !h.real {
						if got := h.keysWritten(0); !slices.Contains(got, "group/g/ (tombstone)") || !slices.Contains(got, "target-meta/g/ (tombstone)") {
							t.Fatalf("downgrade wrote no consumer tombstones: %v", got)
						}
					}
					if h.fetch("g", "t", 0) != 42 {
						t.Fatal("offsets lost in the downgrade")
					}
				} else {
					mustErr(t, jr.Err, ErrInconsistentGroupProtocol)
				}
				return
			}
			mustErr(t, r.Err, ErrGroupIDNotFound)
			if policy == "downgrade" {
				// A fresh consumer group goes back to classic.
				wait(t, h.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g2", Version: 1, MemberID: "y", SubscribedTopicNames: []string{"t"}, Owned: Assignment{}}))
				wait(t, h.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g2", Version: 1, MemberID: "y", MemberEpoch: LeaveEpoch}))
				jr := wait(t, h.m.Join(joinReq("g2", "")))
				mustErr(t, jr.Err, ErrMemberIDRequired)
			}
		})
	}
}

func TestConsumerDescribeAndList(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.m.crec, h.real = testRecords, false
	a := h.join("a", "t")
	h.form("classic", 1)
	d := h.m.Describe([]string{"g"})[0]
	if d.Err != nil || d.ProtocolType != "consumer" || d.Protocol != "uniform" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	// Subscription v0: version 0, ["t"], null user data.
	md := d.Members[0].Metadata
	if want := consumerMeta("t"); !slices.Equal(md, want) {
		t.Fatalf("metadata %x, want %x", md, want)
	}
	as := reader{b: d.Members[0].Assignment}
	if as.int16() != 0 || as.int32() != 1 || as.string() != "t" || as.int32() != 6 {
		t.Fatalf("assignment blob %x", d.Members[0].Assignment)
	}
	cd := h.m.ConsumerDescribe([]string{"g", "classic", "none"})
	if cd[0].Err != nil || cd[0].Members[0].MemberEpoch != a.epoch || cd[0].Members[0].Assignment.size() != 6 ||
		cd[0].Members[0].TargetAssignment.size() != 6 || cd[0].Assignor != "uniform" {
		t.Fatalf("consumer describe: %+v", cd[0])
	}
	mustErr(t, cd[1].Err, ErrGroupIDNotFound)
	mustErr(t, cd[2].Err, ErrGroupIDNotFound)
	ls, err := h.m.ListFiltered(nil, nil)
	if err != nil || len(ls) != 2 || ls[0].GroupType != GroupTypeClassic || ls[1].GroupType != GroupTypeConsumer || ls[1].State != "Stable" {
		t.Fatalf("list: %+v %v", ls, err)
	}
	ls, _ = h.m.ListFiltered([]string{"stable"}, []string{"CONSUMER"})
	if len(ls) != 1 || ls[0].Group != "g" {
		t.Fatalf("filtered: %+v", ls)
	}
	ls, _ = h.m.ListFiltered(nil, []string{"Classic"})
	if len(ls) != 1 || ls[0].Group != "classic" {
		t.Fatalf("classic filter: %+v", ls)
	}
	// Delete refuses a non-empty consumer group and takes an empty one.
	res := wait(t, h.m.DeleteGroups([]string{"g"}))
	mustErr(t, res[0].Err, ErrNonEmptyGroup)
	h.hb(ConsumerHeartbeatRequest{MemberID: "a", MemberEpoch: LeaveEpoch})
	if d := h.describe("g"); d.State != ConsumerEmpty {
		t.Fatalf("state %s", d.State)
	}
	n := h.nrec()
	res = wait(t, h.m.DeleteGroups([]string{"g"}))
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if !h.real {
		got := h.keysWritten(n)
		want := []string{"target-meta/g/ (tombstone)", "group/g/ (tombstone)"}
		if !slices.Equal(got, want) {
			t.Fatalf("delete records %v, want %v", got, want)
		}
	}
	mustErr(t, h.m.ConsumerDescribe([]string{"g"})[0].Err, ErrGroupIDNotFound)
}

func TestConsumerOffsetRules(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := h.join("a", "t")
	commit := func(v int16, id string, epoch int32, p int32) error {
		r := wait(t, h.m.CommitOffsets(OffsetCommitRequest{Version: v, Group: "g", MemberID: id, Generation: epoch,
			Offsets: []CommitOffset{{Topic: "t", Partition: p, Offset: 7, LeaderEpoch: -1}}}))
		return r.Partitions[0].Err
	}
	if err := commit(9, "a", a.epoch, 0); err != nil {
		t.Fatal(err)
	}
	mustErr(t, commit(9, "zz", 1, 0), ErrUnknownMemberID)
	mustErr(t, commit(9, "a", a.epoch+1, 0), ErrStaleMemberEpoch)
	mustErr(t, commit(8, "a", a.epoch+1, 0), ErrIllegalGeneration)
	mustErr(t, commit(9, "", -1, 0), ErrUnknownMemberID) // simple commit while members exist
	b := h.join("b", "t")
	h.converge(a, b)
	// An older epoch may commit what the member still owns, nothing else.
	mine, theirs := parts(a.owned, "t")[0], parts(b.owned, "t")[0]
	if err := commit(9, "a", 1, mine); err != nil {
		t.Fatalf("relaxed rule: %v", err)
	}
	mustErr(t, commit(9, "a", 1, theirs), ErrStaleMemberEpoch)
	mustErr(t, commit(8, "a", 1, theirs), ErrIllegalGeneration)
	// OffsetFetch with member epochs.
	tps := []TopicPartition{{"t", 0}}
	if _, err := h.m.FetchOffsetsOpts("g", tps, FetchOptions{MemberID: "a", MemberEpoch: a.epoch}); err != nil {
		t.Fatal(err)
	}
	_, err := h.m.FetchOffsetsOpts("g", tps, FetchOptions{MemberID: "a", MemberEpoch: 1})
	mustErr(t, err, ErrStaleMemberEpoch)
	_, err = h.m.FetchOffsetsOpts("g", tps, FetchOptions{MemberID: "zz", MemberEpoch: 1})
	mustErr(t, err, ErrUnknownMemberID)
	if _, err := h.m.FetchOffsetsOpts("g", tps, FetchOptions{MemberID: "a", MemberEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	// TxnOffsetCommit: exact epoch only.
	txn := func(epoch int32) error {
		r := wait(t, h.m.CommitTxnOffsets(TxnOffsetCommitRequest{GroupID: "g", ProducerID: 1, ProducerEpoch: 0, Generation: epoch, MemberID: "a",
			Offsets: []CommitOffset{{Topic: "t", Partition: mine, Offset: 9, LeaderEpoch: -1}}}))
		return r.Partitions[0].Err
	}
	mustErr(t, txn(1), ErrIllegalGeneration)
	if err := txn(a.epoch); err != nil {
		t.Fatal(err)
	}
	// OffsetDelete keeps subscribed topics.
	od := wait(t, h.m.DeleteOffsets("g", []TopicPartition{{"t", 0}, {"other", 0}}))
	if od.Err != nil {
		t.Fatal(od.Err)
	}
	mustErr(t, od.Partitions[0].Err, ErrGroupSubscribedToTopic)
	if od.Partitions[1].Err != nil {
		t.Fatal(od.Partitions[1].Err)
	}
}

func TestConsumerRestoreAfterLoad(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a, b := h.join("a", "t"), h.join("b", "t")
	h.converge(a, b)
	s := &client{id: "s", instance: strp("i-s"), topics: []string{"t"}}
	h.converge(a, b, s)
	h.converge(a, b, s)
	h.commit("g", a.epoch, "a", "t", 0, 5)
	// A member mid-revocation when the coordinator moves.
	c := h.join("c", "t")
	for _, x := range []*client{a, b, s} {
		if err := h.step(x); err != nil {
			t.Fatal(err)
		}
	}
	before := h.describe("g")
	if g, _ := h.m.lockGroup("g", false); g != nil {
		revoking := 0
		for _, mem := range g.consumer.members {
			if mem.state == MemberUnrevokedPartitions && mem.pending.size() > 0 {
				revoking++
			}
		}
		g.mu.Unlock()
		if revoking == 0 {
			t.Fatal("no member is revoking: the restore would not cover pending revocations")
		}
	}
	p := h.m.Partition("g")
	var snap *Snapshot
	var err error
	if h.real {
		snap, err = Load(Records(h.p.Records(p)))
	} else {
		// The test encoders, replayed.
		lcs, rest := testLoad(t, h.p.Records(p))
		snap, err = Load(Records(rest))
		if err == nil {
			if snap.Groups["g"] == nil {
				snap.Groups["g"] = &LoadedGroup{}
			}
			snap.Groups["g"].Consumer = lcs["g"]
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(h.m.cfg, h.p, h.clock)
	if err != nil {
		t.Fatal(err)
	}
	m2.assignorFor, m2.crec = h.m.assignorFor, h.m.crec
	m2.SetTopics(h.topics)
	m2.FinishLoad(p, snap)
	h.m = m2
	h.checkInvariant("g")
	after := h.describe("g")
	if after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 4 || after.State != before.State {
		t.Fatalf("restored %+v, was %+v", after, before)
	}
	for i := range after.Members {
		x, y := before.Members[i], after.Members[i]
		if x.MemberID != y.MemberID || x.MemberEpoch != y.MemberEpoch || !equalAssignment(x.Assignment, y.Assignment) ||
			!equalAssignment(x.TargetAssignment, y.TargetAssignment) || !eqStrPtr(x.InstanceID, y.InstanceID) {
			t.Fatalf("member %d: restored %+v, was %+v", i, y, x)
		}
	}
	// Heartbeats go on at the same epochs, without a rebalance.
	h.converge(a, b, s, c)
	if h.describe("g").GroupEpoch != before.GroupEpoch {
		t.Fatal("restore bumped the group epoch")
	}
	if h.fetch("g", "t", 0) != 5 {
		t.Fatal("offset lost")
	}
	h.exactlyOnce(map[string]int32{"t": 6}, a, b, s, c)
}

// TestConsumerRandomized runs joins, leaves, static leaves, missed
// heartbeats, expiries and partition growth with random acks, checking
// after every step that no partition has two owners, and at the end that
// well-behaved members converge to exactly one owner per partition.
func TestConsumerRandomized(t *testing.T) {
	for seed := range uint64(4) {
		t.Run("", func(t *testing.T) {
			h := newConsumerHarness(t, func(c *Config) { c.ConsumerSessionTimeout = 20 * time.Second })
			h.topics.set("u", 5)
			rng := rand.New(rand.NewPCG(seed, 99))
			topics := map[string]int32{"t": 6, "u": 5}
			var cs []*client
			next := 0
			for step := range 500 {
				switch k := rng.IntN(20); {
				case k < 3 && len(cs) < 8:
					next++
					c := &client{id: "m" + string(rune('a'+next%26)) + strings.Repeat("x", next/26), topics: []string{"t", "u"}}
					if rng.IntN(3) == 0 {
						c.instance = strp("inst-" + c.id)
					}
					if err := h.step(c); err != nil {
						t.Fatalf("step %d join: %v", step, err)
					}
					cs = append(cs, c)
				case k == 3 && len(cs) > 0:
					i := rng.IntN(len(cs))
					c := cs[i]
					epoch := LeaveEpoch
					if c.instance != nil && rng.IntN(2) == 0 {
						epoch = StaticLeaveEpoch
					}
					h.hb(ConsumerHeartbeatRequest{MemberID: c.id, MemberEpoch: epoch, InstanceID: c.instance})
					cs = slices.Delete(cs, i, i+1)
				case k == 4:
					h.tick(time.Duration(rng.IntN(8)) * time.Second)
				case k == 5 && rng.IntN(10) == 0:
					topics["u"]++
					h.topics.set("u", topics["u"])
				default:
					if len(cs) == 0 {
						continue
					}
					c := cs[rng.IntN(len(cs))]
					req := ConsumerHeartbeatRequest{MemberID: c.id, MemberEpoch: c.epoch, RebalanceTimeout: -1, InstanceID: c.instance}
					if c.epoch == 0 {
						req.SubscribedTopicNames, req.Owned, req.RebalanceTimeout = c.topics, Assignment{}, testRebalance
					}
					switch rng.IntN(3) {
					case 0: // acks what it has
						req.Owned = c.owned
						if req.Owned == nil {
							req.Owned = Assignment{}
						}
					case 1: // still owns something more (not yet revoked)
						if c.epoch > 0 {
							req.Owned = c.owned
						}
					}
					r := h.hb(req)
					switch {
					case r.Err == nil:
						c.epoch = r.MemberEpoch
						if r.HasAssignment {
							c.owned = normalize(r.Assignment)
						}
					case errors.Is(r.Err, ErrUnknownMemberID), errors.Is(r.Err, ErrFencedMemberEpoch):
						c.epoch, c.owned = 0, nil
						if errors.Is(r.Err, ErrUnknownMemberID) && c.instance != nil {
							c.id += "r" // a restarted static member takes a new id
						}
					case errors.Is(r.Err, ErrUnreleasedInstanceID):
						c.instance = nil
					default:
						t.Fatalf("step %d: %v", step, r.Err)
					}
				}
				h.checkInvariant("g")
			}
			// Let the static members that left expire, then everyone acks.
			h.tick(time.Minute)
			for _, c := range cs {
				if err := h.step(c); err != nil {
					c.epoch, c.owned = 0, nil
				}
			}
			if len(cs) == 0 {
				return
			}
			h.converge(cs...)
			h.exactlyOnce(topics, cs...)
		})
	}
}

// BenchmarkConsumerHeartbeat measures a steady-state heartbeat (nothing
// changes, nothing written) in a group of 100 members over 1,000
// partitions.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	h := newConsumerHarness(b, nil)
	h.topics.set("t", 1000)
	cs := make([]*client, 100)
	for i := range cs {
		cs[i] = &client{id: "m" + strconv.Itoa(i), topics: []string{"t"}}
	}
	for range 5 {
		for _, c := range cs {
			if err := h.step(c); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		c := cs[i%len(cs)]
		r := wait(h.t, h.m.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 1, MemberID: c.id, MemberEpoch: c.epoch, RebalanceTimeout: -1}))
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}
