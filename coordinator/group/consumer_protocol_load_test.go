package group

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

func recLoad(t *testing.T, recs []statelog.KV) *Snapshot {
	t.Helper()
	s, err := Load(Records(recs))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func recMember(client string, topics ...string) *ConsumerMemberRecord {
	return &ConsumerMemberRecord{ClientID: client, ClientHost: "/127.0.0.1", SubscribedTopicNames: topics, RebalanceTimeoutMs: 30000}
}

func recCurrent(epoch int32, a Assignment) *ConsumerAssignmentRecord {
	return &ConsumerAssignmentRecord{MemberEpoch: epoch, PreviousMemberEpoch: epoch - 1, Assigned: a, PendingRevocation: Assignment{}}
}

// joinRecords is what a coordinator writes when member m joins group g at
// epoch e, in Kafka's order: subscription, group epoch, target, target
// epoch, current assignment.
func recJoin(g, m string, e int32, a Assignment) []statelog.KV {
	return []statelog.KV{
		ConsumerMemberKV(g, m, recMember("c-"+m, "t")),
		ConsumerGroupMetadataKV(g, e, false),
		ConsumerTargetMemberKV(g, m, a, false),
		ConsumerTargetMetadataKV(g, e, false),
		ConsumerCurrentAssignmentKV(g, m, recCurrent(e, a)),
	}
}

// deleteConsumerRecords is Kafka's tombstone order for a consumer group
// (per member: current, target, subscription; then target epoch, then
// group epoch).
func recDelete(g string, members ...string) []statelog.KV {
	var kvs []statelog.KV
	for _, m := range members {
		kvs = append(kvs, ConsumerCurrentAssignmentKV(g, m, nil), ConsumerTargetMemberKV(g, m, nil, true), ConsumerMemberKV(g, m, nil))
	}
	return append(kvs, ConsumerTargetMetadataKV(g, 0, true), ConsumerGroupMetadataKV(g, 0, true))
}

func TestLoadConsumerGroupLifecycle(t *testing.T) {
	off := func(g string, o int64) statelog.KV {
		return statelog.KV{Key: EncodeOffsetKey(OffsetKey{g, "t", 0}), Value: EncodeOffsetValue(OffsetValue{Offset: o, LeaderEpoch: -1})}
	}
	a1 := Assignment{recTopicA: {0, 1}}
	a2 := Assignment{recTopicA: {0}}
	b2 := Assignment{recTopicA: {1}}
	var recs []statelog.KV
	recs = append(recs, recJoin("g", "m1", 1, a1)...)
	recs = append(recs, off("g", 10))
	// m2 joins: epoch 2; m1's target shrinks; m1 must revoke partition 1.
	recs = append(recs,
		ConsumerMemberKV("g", "m2", recMember("c-m2", "t")),
		ConsumerGroupMetadataKV("g", 2, false),
		ConsumerTargetMemberKV("g", "m1", a2, false),
		ConsumerTargetMemberKV("g", "m2", b2, false),
		ConsumerTargetMetadataKV("g", 2, false),
		ConsumerCurrentAssignmentKV("g", "m1", &ConsumerAssignmentRecord{MemberEpoch: 1, PreviousMemberEpoch: 0, State: MemberUnrevokedPartitions,
			Assigned: a2, PendingRevocation: Assignment{recTopicA: {1}}}),
		ConsumerCurrentAssignmentKV("g", "m2", &ConsumerAssignmentRecord{MemberEpoch: 2, PreviousMemberEpoch: 0, State: MemberUnreleasedPartitions, Assigned: Assignment{}}),
	)
	// A transactional commit and its marker interleave with the group.
	recs = append(recs,
		statelog.KV{Key: EncodeOffsetKey(OffsetKey{"g", "t", 1}), Value: EncodeOffsetValue(OffsetValue{Offset: 7, LeaderEpoch: -1}), Transactional: true, ProducerID: 4},
		ConsumerCurrentAssignmentKV("g", "m1", recCurrent(2, a2)),
		statelog.KV{Control: &statelog.Marker{Commit: true}, ProducerID: 4},
	)
	s := recLoad(t, recs)
	g := s.Groups["g"]
	if g == nil || g.Metadata != nil || g.Consumer == nil {
		t.Fatalf("group: %+v", g)
	}
	c := g.Consumer
	if c.GroupEpoch != 2 || c.AssignmentEpoch != 2 || len(c.Members) != 2 ||
		!reflect.DeepEqual(c.Target, map[string]Assignment{"m1": a2, "m2": b2}) {
		t.Fatalf("consumer: %+v", c)
	}
	if m := c.Members["m1"]; m.Metadata.ClientID != "c-m1" || m.Current.MemberEpoch != 2 || m.Current.State != MemberStable ||
		!reflect.DeepEqual(m.Current.Assigned, a2) {
		t.Fatalf("m1: %+v %+v", m.Metadata, m.Current)
	}
	if m := c.Members["m2"]; m.Current.State != MemberUnreleasedPartitions {
		t.Fatalf("m2: %+v", m.Current)
	}
	if len(g.Offsets) != 2 || g.Offsets[TopicPartition{"t", 1}].Offset != 7 || s.Skipped != 0 {
		t.Fatalf("offsets %+v skipped %d", g.Offsets, s.Skipped)
	}

	// m1 leaves: its three records are tombstoned.
	recs = append(recs, ConsumerCurrentAssignmentKV("g", "m1", nil), ConsumerTargetMemberKV("g", "m1", nil, true), ConsumerMemberKV("g", "m1", nil),
		ConsumerGroupMetadataKV("g", 3, false))
	c = recLoad(t, recs).Groups["g"].Consumer
	if _, ok := c.Members["m1"]; ok || len(c.Members) != 1 || len(c.Target) != 1 || c.GroupEpoch != 3 {
		t.Fatalf("after leave: %+v", c)
	}

	// The group is deleted: consumer state gone, offsets (with no
	// tombstones of their own) stay.
	recs = append(recs, recDelete("g", "m2")...)
	g = recLoad(t, recs).Groups["g"]
	if g == nil || g.Consumer != nil || g.Metadata != nil || len(g.Offsets) != 2 {
		t.Fatalf("after delete: %+v", g)
	}
	// Deleted with its offsets: the group is gone.
	recs = append(recs, statelog.KV{Key: EncodeOffsetKey(OffsetKey{"g", "t", 0})}, statelog.KV{Key: EncodeOffsetKey(OffsetKey{"g", "t", 1})})
	if g := recLoad(t, recs).Groups["g"]; g != nil {
		t.Fatalf("after full delete: %+v", g)
	}
	// Tombstones of a group that is gone create nothing.
	recs = append(recs, recDelete("g", "m2")...)
	if g := recLoad(t, recs).Groups["g"]; g != nil {
		t.Fatalf("late tombstones: %+v", g)
	}
}

// TestLoadConsumerOnlyGroupSurvives: a group with consumer records only
// (no offsets, no classic metadata) is kept, and a member whose current
// assignment is missing has Current nil.
func TestLoadConsumerOnlyGroupSurvives(t *testing.T) {
	s := recLoad(t, []statelog.KV{
		ConsumerMemberKV("g", "m", recMember("c")),
		ConsumerGroupMetadataKV("g", 1, false),
	})
	g := s.Groups["g"]
	if g == nil || g.Consumer == nil || g.Consumer.GroupEpoch != 1 || g.Consumer.Members["m"].Current != nil ||
		g.Consumer.AssignmentEpoch != 0 || g.Consumer.Target == nil {
		t.Fatalf("%+v", g)
	}
	// A current assignment without member metadata is not a member; one
	// whose metadata comes later joins it.
	s = recLoad(t, []statelog.KV{
		ConsumerGroupMetadataKV("g", 1, false),
		ConsumerCurrentAssignmentKV("g", "x", recCurrent(1, nil)),
		ConsumerCurrentAssignmentKV("g", "y", recCurrent(1, nil)),
		ConsumerMemberKV("g", "y", recMember("c")),
		ConsumerCurrentAssignmentKV("g", "z", recCurrent(1, nil)),
		ConsumerCurrentAssignmentKV("g", "z", nil),
		ConsumerMemberKV("g", "z", recMember("c")),
	})
	c := s.Groups["g"].Consumer
	if len(c.Members) != 2 || c.Members["y"].Current == nil || c.Members["y"].Current.MemberEpoch != 1 || c.Members["z"].Current != nil {
		t.Fatalf("%+v", c.Members)
	}
}

func TestLoadGroupConversion(t *testing.T) {
	classic := func(g string, gen int32) statelog.KV {
		return statelog.KV{Key: EncodeGroupKey(g), Value: EncodeGroupValue(GroupMetadata{ProtocolType: "consumer", Generation: gen})}
	}
	classicTomb := statelog.KV{Key: EncodeGroupKey("g")}
	// classic -> consumer: Kafka tombstones the classic group, then writes
	// the consumer records.
	recs := []statelog.KV{classic("g", 4), classicTomb}
	recs = append(recs, recJoin("g", "m", 5, Assignment{recTopicA: {0}})...)
	g := recLoad(t, recs).Groups["g"]
	if g.Metadata != nil || g.Consumer == nil || g.Consumer.GroupEpoch != 5 {
		t.Fatalf("to consumer: %+v", g)
	}
	// consumer -> classic: consumer tombstones, then the classic record.
	recs = append(recs, recDelete("g", "m")...)
	recs = append(recs, classic("g", 6))
	g = recLoad(t, recs).Groups["g"]
	if g.Consumer != nil || g.Metadata == nil || g.Metadata.Generation != 6 {
		t.Fatalf("back to classic: %+v", g)
	}
	// Both live (a conversion cut short): the later one wins, either way.
	g = recLoad(t, append([]statelog.KV{classic("g", 1)}, recJoin("g", "m", 2, nil)...)).Groups["g"]
	if g.Metadata != nil || g.Consumer == nil {
		t.Fatalf("consumer written last: %+v", g)
	}
	g = recLoad(t, append(recJoin("g", "m", 2, nil), classic("g", 1))).Groups["g"]
	if g.Consumer != nil || g.Metadata == nil {
		t.Fatalf("classic written last: %+v", g)
	}
}

func TestLoadConsumerRecordsSkippedAndCorrupt(t *testing.T) {
	// Key 4 is known (not skipped, not kept); key 9+ and value version 1
	// are unknown (skipped, counted).
	pm := statelog.KV{Key: consumerKey(consumerPartitionMetadataKeyVersion, "g", nil), Value: []byte{0, 0, 1, 0}}
	unknownValue := statelog.KV{Key: consumerKey(consumerGroupKeyVersion, "g", nil), Value: []byte{0, 1, 0, 0, 0, 9, 0}}
	s := recLoad(t, []statelog.KV{pm, {Key: []byte{0, 9, 0, 1, 'g'}, Value: []byte{0, 0}}, unknownValue, ConsumerGroupMetadataKV("g", 2, false)})
	if s.Skipped != 2 || s.Groups["g"].Consumer.GroupEpoch != 2 {
		t.Fatalf("skipped %d %+v", s.Skipped, s.Groups["g"])
	}
	// A partition-metadata record alone makes no group.
	if s := recLoad(t, []statelog.KV{pm}); len(s.Groups) != 0 {
		t.Fatalf("%+v", s.Groups)
	}
	kv := ConsumerCurrentAssignmentKV("g", "m", recCurrent(1, Assignment{recTopicA: {1}}))
	kv.Value = kv.Value[:len(kv.Value)-3]
	if _, err := Load(Records([]statelog.KV{ConsumerGroupMetadataKV("g", 1, false), kv})); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt consumer record must stop the load: %v", err)
	}
}
