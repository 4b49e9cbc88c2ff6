package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

func recStr(s string) *string { return &s }

var (
	recTopicA = TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	recTopicB = TopicID{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
)

const recTopicAHex = "0102030405060708090a0b0c0d0e0f10"

// TestConsumerRecordGoldenBytes compares the encoders with bytes written
// by hand from Kafka's JSON schemas: key = int16 type + int16-length
// strings; value = int16 version 0, compact strings (uvarint len+1),
// compact arrays (uvarint count+1), 16-byte uuids, an empty tagged-field
// section (0x00) after each struct.
func TestConsumerRecordGoldenBytes(t *testing.T) {
	long := strings.Repeat("c", 200) // compact length 201 = uvarint c9 01
	for _, tc := range []struct {
		name     string
		kv       statelog.KV
		key, val string
	}{
		{"group epoch", ConsumerGroupMetadataKV("g", 5, false), "0003000167", "0000" + "00000005" + "00"},
		{"group tombstone", ConsumerGroupMetadataKV("g", 5, true), "0003000167", ""},
		{"target epoch", ConsumerTargetMetadataKV("g", 10, false), "0006000167", "0000" + "0000000a" + "00"},
		{"member", ConsumerMemberKV("g", "m", &ConsumerMemberRecord{
			RackID: recStr("r"), ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"t"},
			RebalanceTimeoutMs: 300000, ServerAssignor: recStr("uniform"),
		}), "0005000167" + "00016d",
			"0000" + "00" + "0272" + "0263" + "0268" + "02" + "0274" + "00" + "000493e0" + "08756e69666f726d" + "00"},
		{"member long client id, regex, no subscription", ConsumerMemberKV("g", "m", &ConsumerMemberRecord{
			InstanceID: recStr(""), ClientID: long, SubscribedTopicRegex: recStr("a.*"), RebalanceTimeoutMs: -1,
		}), "0005000167" + "00016d",
			"0000" + "01" + "00" + "c901" + hex.EncodeToString([]byte(long)) + "01" + "01" + "04612e2a" + "ffffffff" + "00" + "00"},
		{"target member", ConsumerTargetMemberKV("g", "m", Assignment{recTopicA: {0, 2}, recTopicB: {}}, false), "0007000167" + "00016d",
			"0000" + "02" + recTopicAHex + "03" + "00000000" + "00000002" + "00" + "00"},
		{"target member empty", ConsumerTargetMemberKV("g", "m", nil, false), "0007000167" + "00016d", "0000" + "01" + "00"},
		{"current", ConsumerCurrentAssignmentKV("g", "m", &ConsumerAssignmentRecord{
			MemberEpoch: 7, PreviousMemberEpoch: 6, State: MemberUnrevokedPartitions,
			Assigned: Assignment{recTopicA: {1}}, PendingRevocation: Assignment{recTopicA: {3}},
		}), "0008000167" + "00016d",
			"0000" + "00000007" + "00000006" + "01" + "02" + recTopicAHex + "02" + "00000001" + "00" + "02" + recTopicAHex + "02" + "00000003" + "00" + "00"},
		{"current tombstone", ConsumerCurrentAssignmentKV("g", "m", nil), "0008000167" + "00016d", ""},
	} {
		if got := hex.EncodeToString(tc.kv.Key); got != tc.key {
			t.Errorf("%s key:\n got %s\nwant %s", tc.name, got, tc.key)
		}
		if got := hex.EncodeToString(tc.kv.Value); got != tc.val {
			t.Errorf("%s value:\n got %s\nwant %s", tc.name, got, tc.val)
		}
		if tc.val == "" && tc.kv.Value != nil {
			t.Errorf("%s: tombstone value must be nil", tc.name)
		}
	}
}

// TestConsumerRecordDecodeKafkaExtras decodes hand-written values with
// the parts a newer Kafka adds that we do not model: tagged fields (the
// metadata hash, a classic member's metadata) and the partition-metadata
// record (key 4).
func TestConsumerRecordDecodeKafkaExtras(t *testing.T) {
	h := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	// ConsumerGroupMetadataValue with MetadataHash (tag 0, int64).
	r, err := DecodeRecord(h("0003000167"), h("0000"+"00000005"+"01"+"00"+"08"+"0102030405060708"))
	if err != nil || r.Kind != KindConsumerGroup || r.GroupID != "g" || r.ConsumerEpoch != 5 {
		t.Fatalf("metadata with hash: %v %+v", err, r)
	}
	// Member metadata with ClassicMemberMetadata (tag 0: non-null marker,
	// session timeout, one protocol "range" with 1 byte of metadata, tags).
	classic := "01" + "00002710" + "02" + "0672616e6765" + "0209" + "00" + "00"
	val := "0000" + "00" + "00" + "0263" + "0268" + "01" + "00" + "ffffffff" + "00" +
		"01" + "00" + hex.EncodeToString([]byte{byte(len(classic) / 2)}) + classic
	r, err = DecodeRecord(h("0005000167"+"00016d"), h(val))
	if err != nil || r.Kind != KindConsumerMember || r.MemberID != "m" || r.ConsumerMember.ClientID != "c" ||
		r.ConsumerMember.RebalanceTimeoutMs != -1 || len(r.ConsumerMember.SubscribedTopicNames) != 0 {
		t.Fatalf("member with classic metadata: %v %+v", err, r)
	}
	// ConsumerGroupPartitionMetadataValue: one topic "t" with 3 partitions,
	// partition 0 on rack "r".
	pm := "0000" + "02" + recTopicAHex + "0274" + "00000003" + "02" + "00000000" + "02" + "0272" + "00" + "00" + "00"
	r, err = DecodeRecord(h("0004000167"), h(pm))
	if err != nil || r.Kind != KindConsumerPartitionMetadata || r.GroupID != "g" {
		t.Fatalf("partition metadata: %v %+v", err, r)
	}
	if _, err := DecodeRecord(h("0004000167"), h(pm[:len(pm)-2])); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated partition metadata: %v", err)
	}
	// A later value version is not ours to guess at.
	if _, err := DecodeRecord(h("0003000167"), h("0001"+"00000005"+"00")); !errors.Is(err, ErrUnknownRecord) {
		t.Fatalf("value version 1: %v", err)
	}
}

func recConsumerCases() []statelog.KV {
	full := &ConsumerMemberRecord{
		InstanceID: recStr("i-1"), RackID: recStr("rack"), ClientID: "client", ClientHost: "/127.0.0.1",
		SubscribedTopicNames: []string{"a", "b", ""}, SubscribedTopicRegex: recStr("^x.*"),
		RebalanceTimeoutMs: 45000, ServerAssignor: recStr("range"),
	}
	return []statelog.KV{
		ConsumerGroupMetadataKV("grp", 1<<30, false),
		ConsumerGroupMetadataKV("", -1, false),
		ConsumerGroupMetadataKV("grp", 0, true),
		ConsumerTargetMetadataKV("grp", 3, false),
		ConsumerTargetMetadataKV("grp", 3, true),
		ConsumerMemberKV("grp", "m1", full),
		ConsumerMemberKV("grp", "", &ConsumerMemberRecord{}),
		ConsumerMemberKV("grp", "m1", nil),
		ConsumerTargetMemberKV("grp", "m1", Assignment{recTopicA: {0, 1, 5}, recTopicB: {2}}, false),
		ConsumerTargetMemberKV("grp", "m1", Assignment{}, false),
		ConsumerTargetMemberKV("grp", "m1", nil, true),
		ConsumerCurrentAssignmentKV("grp", "m1", &ConsumerAssignmentRecord{
			MemberEpoch: 9, PreviousMemberEpoch: 8, State: MemberUnreleasedPartitions,
			Assigned: Assignment{recTopicB: {0, 1 << 20}}, PendingRevocation: Assignment{recTopicA: {4}},
		}),
		ConsumerCurrentAssignmentKV("grp", "m1", &ConsumerAssignmentRecord{State: MemberUnknownState}),
		ConsumerCurrentAssignmentKV("grp", "m1", nil),
	}
}

func TestConsumerRecordRoundTrip(t *testing.T) {
	for i, kv := range recConsumerCases() {
		r, err := DecodeRecord(kv.Key, kv.Value)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if r.Tombstone != (kv.Value == nil) {
			t.Fatalf("case %d: tombstone %v", i, r.Tombstone)
		}
		if r.Tombstone {
			continue
		}
		// Re-encoding what was decoded must give the same bytes.
		if r.Kind == KindConsumerTargetMember && r.ConsumerTarget == nil {
			t.Fatalf("case %d: nil target", i)
		}
		again, ok := reencodeConsumer(r)
		if !ok {
			t.Fatalf("case %d: kind %d", i, r.Kind)
		}
		if !bytes.Equal(again.Key, kv.Key) || !bytes.Equal(again.Value, kv.Value) {
			t.Fatalf("case %d: re-encoded %x/%x, want %x/%x", i, again.Key, again.Value, kv.Key, kv.Value)
		}
	}
	// Field by field for the full member and the current assignment.
	cases := recConsumerCases()
	r, _ := DecodeRecord(cases[5].Key, cases[5].Value)
	want := ConsumerMemberRecord{
		InstanceID: recStr("i-1"), RackID: recStr("rack"), ClientID: "client", ClientHost: "/127.0.0.1",
		SubscribedTopicNames: []string{"a", "b", ""}, SubscribedTopicRegex: recStr("^x.*"),
		RebalanceTimeoutMs: 45000, ServerAssignor: recStr("range"),
	}
	if !reflect.DeepEqual(*r.ConsumerMember, want) || r.MemberID != "m1" || r.GroupID != "grp" {
		t.Fatalf("member: %+v", r.ConsumerMember)
	}
	r, _ = DecodeRecord(cases[6].Key, cases[6].Value)
	if m := r.ConsumerMember; m.InstanceID != nil || m.RackID != nil || m.SubscribedTopicRegex != nil || m.ServerAssignor != nil || r.MemberID != "" {
		t.Fatalf("empty member: %+v", m)
	}
	r, _ = DecodeRecord(cases[11].Key, cases[11].Value)
	wantCur := ConsumerAssignmentRecord{MemberEpoch: 9, PreviousMemberEpoch: 8, State: MemberUnreleasedPartitions,
		Assigned: Assignment{recTopicB: {0, 1 << 20}}, PendingRevocation: Assignment{recTopicA: {4}}}
	if !reflect.DeepEqual(*r.ConsumerCurrent, wantCur) {
		t.Fatalf("current: %+v", r.ConsumerCurrent)
	}
	r, _ = DecodeRecord(cases[12].Key, cases[12].Value)
	if r.ConsumerCurrent.State != MemberUnknownState || r.ConsumerCurrent.Assigned == nil || len(r.ConsumerCurrent.Assigned) != 0 {
		t.Fatalf("empty current: %+v", r.ConsumerCurrent)
	}
}

// TestConsumerRecordCorrupt cuts and pads every value and key: a known
// version that does not parse is ErrCorruptRecord, never a panic.
func TestConsumerRecordCorrupt(t *testing.T) {
	for i, kv := range recConsumerCases() {
		for n := 0; n < len(kv.Value); n++ {
			if _, err := DecodeRecord(kv.Key, kv.Value[:n]); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("case %d value cut to %d: %v", i, n, err)
			}
		}
		if kv.Value != nil {
			if _, err := DecodeRecord(kv.Key, append(append([]byte{}, kv.Value...), 0)); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("case %d trailing byte: %v", i, err)
			}
		}
		for n := 2; n < len(kv.Key); n++ {
			if _, err := DecodeRecord(kv.Key[:n], kv.Value); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("case %d key cut to %d: %v", i, n, err)
			}
		}
	}
	h := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	mk := h("0005000167" + "00016d")
	tk := h("0007000167" + "00016d")
	for _, tc := range []struct {
		name     string
		key, val []byte
	}{
		{"null client id", mk, h("0000" + "00" + "00" + "00" + "0268" + "01" + "00" + "ffffffff" + "00" + "00")},
		{"null topic list", mk, h("0000" + "00" + "00" + "0263" + "0268" + "00" + "00" + "ffffffff" + "00" + "00")},
		{"huge topic count", mk, h("0000" + "00" + "00" + "0263" + "0268" + "ffffffff07" + "00")},
		{"varint beyond int32", mk, h("0000" + "ffffffffff01" + "00")},
		{"huge partition count", tk, h("0000" + "02" + recTopicAHex + "ffffff7f" + "00000000")},
		{"huge tag count", h("0003000167"), h("0000" + "00000005" + "ffff03")},
		{"tag size beyond value", h("0003000167"), h("0000" + "00000005" + "01" + "00" + "10" + "00")},
		{"null assignment", tk, h("0000" + "00" + "00")},
	} {
		if _, err := DecodeRecord(tc.key, tc.val); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Duplicated topics and unsorted partitions (never written by Kafka)
	// still give a sorted, duplicate-free Assignment.
	r, err := DecodeRecord(tk, h("0000"+"03"+recTopicAHex+"03"+"00000005"+"00000001"+"00"+recTopicAHex+"03"+"00000001"+"00000000"+"00"+"00"))
	if err != nil || !reflect.DeepEqual(r.ConsumerTarget, Assignment{recTopicA: {0, 1, 5}}) {
		t.Fatalf("normalised target: %v %v", err, r.ConsumerTarget)
	}
}

// reencodeConsumer writes a decoded consumer record again with the
// encoders; false for kinds without an encoder.
func reencodeConsumer(r Record) (statelog.KV, bool) {
	switch r.Kind {
	case KindConsumerGroup:
		return ConsumerGroupMetadataKV(r.GroupID, r.ConsumerEpoch, false), true
	case KindConsumerTarget:
		return ConsumerTargetMetadataKV(r.GroupID, r.ConsumerEpoch, false), true
	case KindConsumerMember:
		return ConsumerMemberKV(r.GroupID, r.MemberID, r.ConsumerMember), true
	case KindConsumerTargetMember:
		return ConsumerTargetMemberKV(r.GroupID, r.MemberID, r.ConsumerTarget, false), true
	case KindConsumerCurrent:
		return ConsumerCurrentAssignmentKV(r.GroupID, r.MemberID, r.ConsumerCurrent), true
	}
	return statelog.KV{}, false
}
