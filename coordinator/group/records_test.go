package group

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// The golden bytes were cross-checked against franz-go's kmsg encoders
// (OffsetCommitKey v1, OffsetCommitValue v3, GroupMetadataKey v2,
// GroupMetadataValue v3), which follow Kafka's JSON schemas. coordinator
// must not import kmsg, so the check lives on as bytes.
func TestRecordGoldenBytes(t *testing.T) {
	p, l, inst := "range", "m1", "i1"
	gm := GroupMetadata{ProtocolType: "consumer", Generation: 3, Protocol: &p, Leader: &l, CurrentStateTimestamp: 1700000000456,
		Members: []MemberMetadata{
			{MemberID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/1.2.3.4", RebalanceTimeoutMs: 60000, SessionTimeoutMs: 45000, Subscription: []byte{1, 2}, Assignment: []byte{3}},
			{MemberID: "m2", ClientID: "c2", ClientHost: "h", RebalanceTimeoutMs: 1, SessionTimeoutMs: 2},
		}}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"offset key", EncodeOffsetKey(OffsetKey{"g1", "topic-a", 7}), "0001000267310007746f7069632d6100000007"},
		{"offset value", EncodeOffsetValue(OffsetValue{Offset: 42, LeaderEpoch: 5, Metadata: "meta", CommitTimestamp: 1700000000123}), "0003000000000000002a0000000500046d6574610000018bcfe5687b"},
		{"group key", EncodeGroupKey("g1"), "000200026731"},
		{"group value", EncodeGroupValue(gm), "00030008636f6e73756d657200000003000572616e676500026d310000018bcfe569c80000000200026d310002693100016300082f312e322e332e340000ea600000afc8000000020102000000010300026d32ffff0002633200016800000001000000020000000000000000"},
	} {
		if h := hex.EncodeToString(tc.got); h != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, h, tc.want)
		}
	}
	// Older versions written by kmsg: OffsetCommitValue v1 (with the
	// expire timestamp) and GroupMetadataValue v0 (no rebalance timeout,
	// no state timestamp).
	ok, _ := hex.DecodeString("0001000267310007746f7069632d6100000007")
	v1, _ := hex.DecodeString("00010000000000000009000178000000000000000a000000000000000b")
	r, err := DecodeRecord(ok, v1)
	if err != nil || r.Kind != KindOffset || *r.Offset != (OffsetValue{Offset: 9, LeaderEpoch: -1, Metadata: "x", CommitTimestamp: 10}) {
		t.Fatalf("v1 offset value: %v %+v", err, r.Offset)
	}
	g0, _ := hex.DecodeString("00000008636f6e73756d657200000001ffffffff000000010001610001620001630000000500000001090000000108")
	r, err = DecodeRecord(EncodeGroupKey("g1"), g0)
	if err != nil || r.Group.CurrentStateTimestamp != -1 || r.Group.Members[0].RebalanceTimeoutMs != -1 || r.Group.Protocol != nil ||
		!bytes.Equal(r.Group.Members[0].Assignment, []byte{8}) {
		t.Fatalf("v0 group value: %v %+v", err, r.Group)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	k := OffsetKey{"grp", "t", 3}
	v := OffsetValue{Offset: 1 << 40, LeaderEpoch: -1, Metadata: "", CommitTimestamp: 5}
	r, err := DecodeRecord(EncodeOffsetKey(k), EncodeOffsetValue(v))
	if err != nil || r.OffsetKey != k || r.GroupID != "grp" || *r.Offset != v {
		t.Fatalf("offset round trip: %v %+v", err, r)
	}
	r, err = DecodeRecord(EncodeOffsetKey(k), nil)
	if err != nil || !r.Tombstone || r.Offset != nil {
		t.Fatalf("offset tombstone: %v %+v", err, r)
	}
	empty := GroupMetadata{ProtocolType: "consumer", Generation: 9, CurrentStateTimestamp: 77}
	r, err = DecodeRecord(EncodeGroupKey("grp"), EncodeGroupValue(empty))
	if err != nil || r.Kind != KindGroup || r.Group.Generation != 9 || r.Group.Protocol != nil || r.Group.Leader != nil || len(r.Group.Members) != 0 {
		t.Fatalf("group round trip: %v %+v", err, r.Group)
	}

	// Key version 9 and above (share and streams groups) are not ours.
	if _, err := DecodeRecord([]byte{0, 9, 0, 0}, []byte{1}); !errors.Is(err, ErrUnknownRecord) {
		t.Fatalf("key version 9: %v", err)
	}
	full := EncodeOffsetValue(v)
	if _, err := DecodeRecord(EncodeOffsetKey(k), full[:len(full)-1]); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated value: %v", err)
	}
	if _, err := DecodeRecord(EncodeOffsetKey(k), append(full, 0)); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("trailing byte: %v", err)
	}
	// A member count far beyond the bytes left must fail before allocating.
	bad := EncodeGroupValue(empty)
	bad[len(bad)-1] = 0xff
	bad[len(bad)-2] = 0xff
	if _, err := DecodeRecord(EncodeGroupKey("grp"), bad); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("absurd member count: %v", err)
	}
}

func TestLoadLastValueWinsAndTombstones(t *testing.T) {
	off := func(g, topic string, p int32, o int64) statelog.KV {
		return statelog.KV{Key: EncodeOffsetKey(OffsetKey{g, topic, p}), Value: EncodeOffsetValue(OffsetValue{Offset: o, LeaderEpoch: -1, CommitTimestamp: o})}
	}
	tomb := func(g, topic string, p int32) statelog.KV {
		return statelog.KV{Key: EncodeOffsetKey(OffsetKey{g, topic, p})}
	}
	meta := func(g string, gen int32) statelog.KV {
		return statelog.KV{Key: EncodeGroupKey(g), Value: EncodeGroupValue(GroupMetadata{ProtocolType: "consumer", Generation: gen, CurrentStateTimestamp: 1})}
	}
	recs := []statelog.KV{
		off("a", "t", 0, 1), off("a", "t", 0, 5), off("a", "t", 1, 2),
		meta("a", 1), meta("a", 2),
		tomb("a", "t", 1),
		off("b", "t", 0, 9), meta("b", 1),
		tomb("b", "t", 0), {Key: EncodeGroupKey("b")}, // b deleted entirely
		off("c", "t", 0, 3), {Key: EncodeGroupKey("c")}, // c: metadata gone, offsets stay (simple group)
		{Key: []byte{0, 9}, Value: []byte{1}}, // unknown record type: skipped
	}
	s, err := Load(Records(recs))
	if err != nil {
		t.Fatal(err)
	}
	if s.Skipped != 1 || len(s.Groups) != 2 {
		t.Fatalf("skipped %d groups %v", s.Skipped, s.Groups)
	}
	a := s.Groups["a"]
	if a.Metadata.Generation != 2 || len(a.Offsets) != 1 || a.Offsets[TopicPartition{"t", 0}].Offset != 5 {
		t.Fatalf("a: %+v", a)
	}
	if c := s.Groups["c"]; c.Metadata != nil || c.Offsets[TopicPartition{"t", 0}].Offset != 3 {
		t.Fatalf("c: %+v", c)
	}
	if _, err := Load(Records([]statelog.KV{{Key: EncodeGroupKey("x"), Value: []byte{0, 3, 0}}})); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt record must stop the load: %v", err)
	}
}
