package group

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// reloadShare moves the coordinator: a new Manager loads every partition
// from what the old one wrote, as a new leader would. It returns the
// snapshot of group "s"'s partition.
func (h *consumerHarness) reloadShare() *Snapshot {
	h.t.Helper()
	m2, err := NewManager(h.m.cfg, h.p, h.clock)
	if err != nil {
		h.t.Fatal(err)
	}
	m2.SetTopics(h.topics)
	var ours *Snapshot
	for q := range int32(h.m.cfg.OffsetsTopicPartitions) {
		snap, err := Load(Records(h.p.Records(q)))
		if err != nil {
			h.t.Fatal(err)
		}
		m2.FinishLoad(q, snap)
		if q == h.m.Partition("s") {
			ours = snap
		}
	}
	h.m = m2
	return ours
}

func TestShareRecordsRoundTrip(t *testing.T) {
	rack := "r1"
	mr := &ShareMemberRecord{MemberEpoch: 7, RackID: &rack, ClientID: "c", ClientHost: "/h",
		SubscribedTopicNames: []string{"a", "b"}, Assigned: Assignment{recTopicA: {0, 2}}}
	for _, kv := range []statelog.KV{ShareGroupKV("g", 9, false), ShareMemberKV("g", "m", mr), ShareInitializedKV("g", []TopicID{recTopicA}, false)} {
		rec, err := DecodeRecord(kv.Key, kv.Value)
		if err != nil || rec.GroupID != "g" || rec.Tombstone {
			t.Fatalf("%x: %+v %v", kv.Key, rec, err)
		}
		switch rec.Kind {
		case KindShareGroup:
			if rec.ShareEpoch != 9 {
				t.Fatalf("epoch %d", rec.ShareEpoch)
			}
		case KindShareMember:
			m := rec.ShareMember
			if rec.MemberID != "m" || m.MemberEpoch != 7 || *m.RackID != "r1" || m.ClientID != "c" || m.ClientHost != "/h" ||
				!slices.Equal(m.SubscribedTopicNames, mr.SubscribedTopicNames) || !equalAssignment(m.Assigned, mr.Assigned) {
				t.Fatalf("member %+v", m)
			}
		case KindShareInitialized:
			if !slices.Equal(rec.ShareTopics, []TopicID{recTopicA}) {
				t.Fatalf("topics %v", rec.ShareTopics)
			}
		default:
			t.Fatalf("kind %d", rec.Kind)
		}
		// Every truncation is corrupt, never a panic or a short read
		// taken for a value.
		for n := 2; n < len(kv.Value); n++ {
			if _, err := DecodeRecord(kv.Key, kv.Value[:n]); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("%x cut to %d: %v", kv.Key, n, err)
			}
		}
		// A newer value version is skipped, not misread.
		v := slices.Clone(kv.Value)
		v[1] = 1
		if _, err := DecodeRecord(kv.Key, v); !errors.Is(err, ErrUnknownRecord) {
			t.Fatalf("value version 1: %v", err)
		}
	}
	if rec, err := DecodeRecord(ShareMemberKV("g", "m", nil).Key, nil); err != nil || !rec.Tombstone || rec.Kind != KindShareMember || rec.MemberID != "m" {
		t.Fatalf("tombstone %+v %v", rec, err)
	}
	// An array count the value cannot hold fails before allocating.
	if _, err := DecodeRecord(ShareInitializedKV("g", nil, true).Key, []byte{0, 0, 0xff, 0xff, 0xff, 0x07, 0}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("huge count: %v", err)
	}
}

func TestLoadShareGroupSkipsKafkaShareRecords(t *testing.T) {
	// Kafka's own share records (key versions 10, 11, 15) are unknown
	// here: skipped and counted, they neither make nor end a group.
	kafka := []statelog.KV{
		{Key: consumerKey(11, "g", nil), Value: []byte{0, 0, 0, 0, 0, 3, 0}},
		{Key: consumerKey(10, "g", ptr("m")), Value: []byte{0, 0, 0}},
		{Key: consumerKey(15, "g", nil), Value: []byte{0, 0, 1, 1, 1, 0}},
	}
	s := recLoad(t, kafka)
	if s.Skipped != 3 || len(s.Groups) != 0 {
		t.Fatalf("skipped %d groups %+v", s.Skipped, s.Groups)
	}
	s = recLoad(t, append(kafka, ShareGroupKV("g", 4, false)))
	if g := s.Groups["g"]; g == nil || g.Share == nil || g.Share.Epoch != 4 || s.Skipped != 3 {
		t.Fatalf("%+v", s)
	}
}

func TestShareGroupSurvivesCoordinatorMove(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.topics.set("u", 2)
	a := h.shb("a", 0, "t")
	b := h.shb("b", 0, "t", "u")
	if a.Err != nil || b.Err != nil {
		t.Fatalf("%+v %+v", a, b)
	}
	if err := h.m.ShareGroupEmpty("e", true, true); err != nil { // an empty group made by AlterShareGroupOffsets
		t.Fatal(err)
	}
	if err := h.m.ShareInitialized("e", []TopicID{topicID("u")}, false); err != nil {
		t.Fatal(err)
	}
	before := h.m.ShareDescribe([]string{"s", "e"})
	if want := []TopicID{topicID("t"), topicID("u")}; !sameIDs(before[0].Initialized, want) {
		t.Fatalf("assigned topics are initialized: %v", before[0].Initialized)
	}
	h.clock.Advance(time.Second)
	h.reloadShare()
	after := h.m.ShareDescribe([]string{"s", "e"})
	for i := range before {
		x, y := before[i], after[i]
		if y.Err != nil || x.GroupEpoch != y.GroupEpoch || x.State != y.State || len(x.Members) != len(y.Members) || !sameIDs(x.Initialized, y.Initialized) {
			t.Fatalf("restored %+v, was %+v", y, x)
		}
		for j := range x.Members {
			mx, my := x.Members[j], y.Members[j]
			if mx.MemberID != my.MemberID || mx.MemberEpoch != my.MemberEpoch || !slices.Equal(mx.SubscribedTopicNames, my.SubscribedTopicNames) ||
				!equalAssignment(mx.Assignment, my.Assignment) || mx.ClientHost != my.ClientHost {
				t.Fatalf("member restored %+v, was %+v", my, mx)
			}
		}
	}
	ls, _ := h.m.ListFiltered(nil, []string{"share"})
	if len(ls) != 2 || ls[0].Group != "e" || ls[0].State != ShareEmpty || ls[1].Group != "s" || ls[1].State != ShareStable {
		t.Fatalf("list: %+v", ls)
	}
	// The members heartbeat on at their epochs, with nothing new to
	// learn, and a session counted from the load.
	h.clock.Advance(h.m.cfg.ConsumerSessionTimeout - 2*time.Second)
	b2 := h.shb("b", b.MemberEpoch)
	if b2.Err != nil || b2.MemberEpoch != b.MemberEpoch || b2.HasAssignment {
		t.Fatalf("b after the move: %+v", b2)
	}
	// a never heartbeats again: it expires, and that is written too.
	h.tick(3 * time.Second)
	if d := h.m.ShareDescribe([]string{"s"})[0]; len(d.Members) != 1 || d.Members[0].MemberID != "b" {
		t.Fatalf("after a's expiry: %+v", d)
	}
	h.reloadShare()
	d := h.m.ShareDescribe([]string{"s"})[0]
	if len(d.Members) != 1 || d.Members[0].MemberID != "b" || d.GroupEpoch <= before[0].GroupEpoch {
		t.Fatalf("after a second move: %+v", d)
	}
	if r := h.shb("a", a.MemberEpoch); !errors.Is(r.Err, ErrUnknownMemberID) {
		t.Fatalf("expired member: %+v", r)
	}
}

func sameIDs(a, b []TopicID) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	less := func(x, y TopicID) int { return slices.Compare(x[:], y[:]) }
	slices.SortFunc(a, less)
	slices.SortFunc(b, less)
	return slices.Equal(a, b)
}

func TestShareGroupInitializedTopics(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.topics.set("u", 2)
	if err := h.m.ShareInitialized("s", []TopicID{topicID("u")}, false); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	if err := h.m.ShareGroupEmpty("s", true, true); err != nil {
		t.Fatal(err)
	}
	n := len(h.p.Records(h.m.Partition("s")))
	for range 2 { // the second add changes nothing and writes nothing
		if err := h.m.ShareInitialized("s", []TopicID{topicID("u"), topicID("t")}, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(h.p.Records(h.m.Partition("s"))); got != n+1 {
		t.Fatalf("%d records written, want 1", got-n)
	}
	if err := h.m.ShareInitialized("s", []TopicID{topicID("u")}, true); err != nil {
		t.Fatal(err)
	}
	if d := h.m.ShareDescribe([]string{"s"})[0]; !sameIDs(d.Initialized, []TopicID{topicID("t")}) {
		t.Fatalf("after delete: %v", d.Initialized)
	}
	h.reloadShare()
	if d := h.m.ShareDescribe([]string{"s"})[0]; !sameIDs(d.Initialized, []TopicID{topicID("t")}) {
		t.Fatalf("reloaded: %v", d.Initialized)
	}
	// A failed append fails the call: the caller must not report state
	// the coordinator may lose.
	h.p.Fail(ErrAppendFailed)
	if err := h.m.ShareInitialized("s", []TopicID{topicID("u")}, false); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("failed append: %v", err)
	}
	h.p.Fail(nil)
}

func TestShareHeartbeatAnsweredWhenDurable(t *testing.T) {
	h := newConsumerHarness(t, nil)
	a := h.shb("a", 0, "t")
	h.p.Hold()
	f := h.m.ShareHeartbeat(ShareHeartbeatRequest{Group: "s", MemberID: "b", SubscribedTopicNames: []string{"t"}})
	// a's heartbeat writes nothing but waits for b's join all the same.
	fa := h.m.ShareHeartbeat(ShareHeartbeatRequest{Group: "s", MemberID: "a", MemberEpoch: a.MemberEpoch})
	if pending(f) != true || pending(fa) != true {
		t.Fatal("answered before the join was durable")
	}
	h.p.Release(ErrAppendFailed)
	if r := wait(t, f); !errors.Is(r.Err, ErrCoordinatorNotAvailable) {
		t.Fatalf("failed append: %+v", r)
	}
	if r := wait(t, fa); !errors.Is(r.Err, ErrCoordinatorNotAvailable) {
		t.Fatalf("waiting heartbeat: %+v", r)
	}
}

func TestShareGroupDeleteWritesTombstones(t *testing.T) {
	h := newConsumerHarness(t, nil)
	h.shb("a", 0, "t")
	h.shb("a", LeaveEpoch)
	res := wait(t, h.m.DeleteGroups([]string{"s"}))
	if res[0].Err != nil || !sameIDs(res[0].ShareTopics, []TopicID{topicID("t")}) {
		t.Fatalf("delete: %+v", res)
	}
	recs := h.p.Records(h.m.Partition("s"))
	// The last live value of every share key is followed by its
	// tombstone: compaction removes all of the group.
	live := map[string]bool{}
	for _, kv := range recs {
		live[string(kv.Key)] = kv.Value != nil
	}
	for k, v := range live {
		if v {
			t.Fatalf("key %x still live", k)
		}
	}
	if len(live) != 3 {
		t.Fatalf("%d keys, want group, member, initialized", len(live))
	}
	if last := recs[len(recs)-1]; string(last.Key) != string(ShareGroupKV("s", 0, true).Key) {
		t.Fatalf("the group's tombstone must come last: %x", last.Key)
	}
	if snap := h.reloadShare(); snap.Groups["s"] != nil || h.m.IsShareGroup("s") {
		t.Fatalf("deleted group loaded: %+v", snap.Groups["s"])
	}
}

// shareKV re-encodes a decoded share record.
func shareKV(r Record) statelog.KV {
	switch r.Kind {
	case KindShareGroup:
		return ShareGroupKV(r.GroupID, r.ShareEpoch, r.Tombstone)
	case KindShareMember:
		return ShareMemberKV(r.GroupID, r.MemberID, r.ShareMember)
	default:
		return ShareInitializedKV(r.GroupID, r.ShareTopics, r.Tombstone)
	}
}

// FuzzDecodeShareRecord feeds arbitrary values of the share record types
// to the decoder: it must never panic, and whatever decodes must encode
// to bytes that decode and encode to the same bytes again.
func FuzzDecodeShareRecord(f *testing.F) {
	rack := "r"
	f.Add(ShareGroupKV("g", 3, false).Key, ShareGroupKV("g", 3, false).Value)
	kv := ShareMemberKV("g", "m", &ShareMemberRecord{MemberEpoch: 2, RackID: &rack, ClientID: "c", SubscribedTopicNames: []string{"t"}, Assigned: Assignment{recTopicA: {0, 1}}})
	f.Add(kv.Key, kv.Value)
	kv = ShareInitializedKV("g", []TopicID{recTopicA, topicID("u")}, false)
	f.Add(kv.Key, kv.Value)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := DecodeRecord(key, value)
		if err != nil || r.Tombstone || (r.Kind != KindShareGroup && r.Kind != KindShareMember && r.Kind != KindShareInitialized) {
			return
		}
		once := shareKV(r)
		r2, err := DecodeRecord(once.Key, once.Value)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if twice := shareKV(r2); string(twice.Key) != string(once.Key) || string(twice.Value) != string(once.Value) {
			t.Fatalf("encoding not stable: %x then %x", once.Value, twice.Value)
		}
	})
}
