package group

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSimpleCommitAndFetch(t *testing.T) {
	h := newHarness(t, nil)
	if got := h.fetch("nobody", "t", 0); got != -1 {
		t.Fatalf("missing group: %d", got)
	}
	resp := wait(t, h.m.CommitOffsets(OffsetCommitRequest{Group: "s", Generation: -1, Offsets: []CommitOffset{
		{Topic: "b", Partition: 1, Offset: 11, LeaderEpoch: 4, Metadata: "x"},
		{Topic: "a", Partition: 0, Offset: 10, LeaderEpoch: -1},
		{Topic: "a", Partition: 2, Offset: 1, Metadata: strings.Repeat("m", 5000)},
	}}))
	if resp.Partitions[0].Err != nil || resp.Partitions[1].Err != nil {
		t.Fatal(resp)
	}
	mustErr(t, resp.Partitions[2].Err, ErrOffsetMetadataTooLarge)
	all, err := h.m.FetchOffsets("s", nil)
	if err != nil || len(all) != 2 || all[0] != (FetchedOffset{Topic: "a", Partition: 0, Offset: 10, LeaderEpoch: -1}) ||
		all[1] != (FetchedOffset{Topic: "b", Partition: 1, Offset: 11, LeaderEpoch: 4, Metadata: "x"}) {
		t.Fatalf("fetch all: %v %+v", err, all)
	}
	if got := h.fetch("s", "a", 2); got != -1 {
		t.Fatalf("rejected commit stored: %d", got)
	}
}

func TestCommitAcknowledgedOnlyWhenDurable(t *testing.T) {
	h := newHarness(t, nil)
	h.p.Hold()
	f := h.m.CommitOffsets(OffsetCommitRequest{Group: "s", Generation: -1, Offsets: []CommitOffset{{Topic: "t", Offset: 5}}})
	if !pending(f) {
		t.Fatal("commit acknowledged before durable")
	}
	if got := h.fetch("s", "t", 0); got != -1 {
		t.Fatalf("fetch saw an undurable commit: %d", got)
	}
	h.p.Release(nil)
	if r := wait(t, f); r.Partitions[0].Err != nil || h.fetch("s", "t", 0) != 5 {
		t.Fatal("durable commit not applied")
	}
	// A failed append is reported and leaves the old offset.
	h.p.Hold()
	f = h.m.CommitOffsets(OffsetCommitRequest{Group: "s", Generation: -1, Offsets: []CommitOffset{{Topic: "t", Offset: 6}}})
	h.p.Release(ErrAppendFailed)
	r := wait(t, f)
	mustErr(t, r.Partitions[0].Err, ErrCoordinatorNotAvailable)
	if !errors.Is(r.Partitions[0].Err, ErrAppendFailed) || h.fetch("s", "t", 0) != 5 {
		t.Fatal("failed commit applied")
	}
	h.p.Fail(fmt.Errorf("moved: %w", ErrNotCoordinator))
	r = wait(t, h.m.CommitOffsets(OffsetCommitRequest{Group: "s", Generation: -1, Offsets: []CommitOffset{{Topic: "t", Offset: 7}}}))
	mustErr(t, r.Partitions[0].Err, ErrNotCoordinator)
}

func TestOffsetsExpireOnlyWhenEmpty(t *testing.T) {
	const retention = time.Hour
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention = retention
		c.OffsetsRetentionCheckInterval = time.Second
	})
	sg := h.form("g", 1)
	id := sg.members[0]
	if err := h.commit("g", sg.gen, id, "topic-a", 0, 42); err != nil {
		t.Fatal(err)
	}
	// Two retention periods with a live member: nothing expires.
	for elapsed := time.Duration(0); elapsed < 2*retention; elapsed += 5 * time.Second {
		h.tick(5 * time.Second)
		if err := h.heartbeat("g", sg.gen, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.fetch("g", "topic-a", 0); got != 42 {
		t.Fatalf("offset of a live group expired: %d", got)
	}
	if _, err := h.m.Leave("g", []LeaveMember{{MemberID: id}}); err != nil {
		t.Fatal(err)
	}
	// Retention counts from when the group became empty.
	h.tick(retention - time.Second)
	if got := h.fetch("g", "topic-a", 0); got != 42 || h.state("g") != "Empty" {
		t.Fatalf("expired too early: %d %s", got, h.state("g"))
	}
	h.tick(time.Second)
	if got := h.fetch("g", "topic-a", 0); got != -1 {
		t.Fatalf("not expired: %d", got)
	}
	if s := h.state("g"); s != "Dead" {
		t.Fatalf("an empty group without offsets is removed, state %s", s)
	}
	snap, err := Load(Records(h.p.Records(h.m.Partition("g"))))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Groups["g"]; ok {
		t.Fatal("tombstones missing: the group survives a reload")
	}

	// A simple group: each offset counts from its own commit.
	if err := h.commit("s", -1, "", "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	h.tick(retention / 2)
	if err := h.commit("s", -1, "", "t", 1, 2); err != nil {
		t.Fatal(err)
	}
	h.tick(retention / 2)
	if h.fetch("s", "t", 0) != -1 || h.fetch("s", "t", 1) != 2 {
		t.Fatal("simple group expiry")
	}
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 1)
	for _, tp := range []TopicPartition{{"topic-a", 0}, {"other", 0}} {
		if err := h.commit("g", sg.gen, sg.members[0], tp.Topic, tp.Partition, 3); err != nil {
			t.Fatal(err)
		}
	}
	r := wait(t, h.m.DeleteOffsets("g", []TopicPartition{{"topic-a", 0}, {"other", 0}}))
	if r.Err != nil || r.Partitions[1].Err != nil {
		t.Fatalf("%+v", r)
	}
	mustErr(t, r.Partitions[0].Err, ErrGroupSubscribedToTopic)
	if h.fetch("g", "topic-a", 0) != 3 || h.fetch("g", "other", 0) != -1 {
		t.Fatal("wrong offsets deleted")
	}
	mustErr(t, wait(t, h.m.DeleteOffsets("missing", nil)).Err, ErrGroupIDNotFound)
	if _, err := h.m.Leave("g", []LeaveMember{{MemberID: sg.members[0]}}); err != nil {
		t.Fatal(err)
	}
	r = wait(t, h.m.DeleteOffsets("g", []TopicPartition{{"topic-a", 0}}))
	if r.Err != nil || r.Partitions[0].Err != nil || h.fetch("g", "topic-a", 0) != -1 {
		t.Fatalf("empty group offset delete: %+v", r)
	}
}

// TestReloadRebuildsState runs a group through its life, then rebuilds a
// second coordinator from the records the first one wrote, as a new
// partition leader would.
func TestReloadRebuildsState(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 3)
	if err := h.commit("g", sg.gen, sg.members[0], "topic-a", 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := h.commit("g", sg.gen, sg.members[1], "topic-a", 1, 200); err != nil {
		t.Fatal(err)
	}
	if err := h.commit("g", sg.gen, sg.members[1], "topic-a", 1, 201); err != nil {
		t.Fatal(err)
	}
	if err := h.commit("gone", -1, "", "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	wait(t, h.m.DeleteGroups([]string{"gone"}))

	m2, err := NewManager(h.m.cfg, h.p, h.clock)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(h.m.cfg.OffsetsTopicPartitions) {
		m2.BeginLoad(p)
		snap, err := Load(Records(h.p.Records(p)))
		if err != nil {
			t.Fatal(err)
		}
		m2.FinishLoad(p, snap)
	}
	d := m2.Describe([]string{"g", "gone"})
	if d[0].State != "Stable" || len(d[0].Members) != 3 || d[0].Protocol != "range" || d[1].State != "Dead" {
		t.Fatalf("reloaded: %+v", d)
	}
	fo, _ := m2.FetchOffsets("g", nil)
	if len(fo) != 2 || fo[0].Offset != 100 || fo[1].Offset != 201 {
		t.Fatalf("reloaded offsets: %+v", fo)
	}
	// Members carry on with their generation and assignment.
	for _, id := range sg.members {
		if err := m2.Heartbeat(HeartbeatRequest{Group: "g", Generation: sg.gen, MemberID: id}); err != nil {
			t.Fatal(err)
		}
		r := wait(t, m2.Sync(SyncRequest{Group: "g", Generation: sg.gen, MemberID: id}))
		if string(r.Assignment) != "assignment-for-"+id {
			t.Fatalf("reloaded assignment: %+v", r)
		}
	}
}

// TestConcurrentGroups exercises the locks under -race: many groups joining,
// committing and ticking at once.
func TestConcurrentGroups(t *testing.T) {
	h := newHarness(t, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				h.m.Tick(h.clock.Now())
			}
		}
	}()
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := fmt.Sprintf("group-%d", i)
			req := joinReq(g, "")
			req.RequireKnownMemberID = false
			r := wait(t, h.m.Join(req))
			if r.Err != nil {
				t.Error(r.Err)
				return
			}
			wait(t, h.m.Sync(SyncRequest{Group: g, Generation: r.Generation, MemberID: r.MemberID, Assignments: map[string][]byte{r.MemberID: {1}}}))
			for o := range 20 {
				resp := wait(t, h.m.CommitOffsets(OffsetCommitRequest{Group: g, Generation: r.Generation, MemberID: r.MemberID,
					Offsets: []CommitOffset{{Topic: "t", Offset: int64(o)}}}))
				if resp.Partitions[0].Err != nil {
					t.Error(resp.Partitions[0].Err)
				}
			}
			if got := h.fetch(g, "t", 0); got != 19 {
				t.Errorf("%s: offset %d", g, got)
			}
		}()
	}
	wg.Wait()
	close(stop)
}
