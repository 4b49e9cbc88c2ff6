package group

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record schemas of the __consumer_offsets topic, written exactly as Kafka
// writes them so kafka-console-consumer's offsets formatter, kcat decoders
// and Kafka itself (if it ever took over the data) can read them. All
// integers are big-endian; a string is an int16 length then UTF-8 bytes; a
// nullable string uses length -1 for null; bytes are an int32 length then
// the bytes. Every key and value opens with its int16 schema version.
//
//	OffsetCommitKey v1:    version=1 group topic partition:int32
//	OffsetCommitValue v3:  version=3 offset:int64 leaderEpoch:int32
//	                       metadata commitTimestamp:int64
//	GroupMetadataKey v2:   version=2 group
//	GroupMetadataValue v3: version=3 protocolType generation:int32
//	                       protocol:nullable leader:nullable
//	                       currentStateTimestamp:int64
//	                       [memberId instanceId:nullable clientId clientHost
//	                        rebalanceTimeout:int32 sessionTimeout:int32
//	                        subscription:bytes assignment:bytes]
//
// Key versions 3-8 are the consumer (KIP-848) group records, in
// consumer_protocol_records.go; 0x7201-0x7203 are ringlog's share-group
// records, in share_protocol_records.go. A nil value is a tombstone: compaction removes the key,
// and Load drops the state it named. We decode older value versions too (offset v0-v3,
// group v0-v3) because a partition may hold records written by an older
// Kafka; we always write the versions above.
const (
	offsetKeyVersion   int16 = 1
	groupKeyVersion    int16 = 2
	offsetValueVersion int16 = 3
	groupValueVersion  int16 = 3
)

// OffsetsTopic is the internal compacted topic that holds group records.
const OffsetsTopic = "__consumer_offsets"

// OffsetKey names one committed offset.
type OffsetKey struct {
	Group     string
	Topic     string
	Partition int32
}

// OffsetValue is one committed offset as stored.
type OffsetValue struct {
	Offset      int64
	LeaderEpoch int32 // -1 when the client did not send one
	Metadata    string
	// CommitTimestamp is in Unix milliseconds, as Kafka stores it.
	CommitTimestamp int64
}

// GroupMetadata is the stored form of a group's membership. Protocol and
// Leader are nil while the group is Empty.
type GroupMetadata struct {
	ProtocolType string
	Generation   int32
	Protocol     *string
	Leader       *string
	// CurrentStateTimestamp (Unix ms) is when the group entered its state;
	// for an Empty group it is when it became empty, which starts the
	// offsets retention clock after a reload.
	CurrentStateTimestamp int64
	Members               []MemberMetadata
}

// MemberMetadata is one member inside GroupMetadata.
type MemberMetadata struct {
	MemberID           string
	InstanceID         *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	Subscription       []byte // the member's metadata for the chosen protocol
	Assignment         []byte
}

// RecordKind tells which key schema a record uses.
type RecordKind int

// Record kinds.
const (
	KindOffset RecordKind = iota + 1
	KindGroup
	// The consumer (KIP-848) group records, key versions 3-8 (see
	// consumer_protocol_records.go).
	KindConsumerGroup             // 3: the group epoch
	KindConsumerPartitionMetadata // 4: decoded and ignored
	KindConsumerMember            // 5: a member's subscription
	KindConsumerTarget            // 6: the target assignment epoch
	KindConsumerTargetMember      // 7: a member's target assignment
	KindConsumerCurrent           // 8: a member's current assignment
	// The share (KIP-932) group records, ringlog's own key versions (see
	// share_protocol_records.go).
	KindShareGroup       // the group epoch
	KindShareMember      // a member's subscription, epoch and assignment
	KindShareInitialized // the topics with share-partition state
)

// Record is a decoded offsets-topic record. Unless the record is a
// tombstone (Tombstone true), the value field of its Kind is set: Offset,
// Group, ConsumerEpoch, ConsumerMember, ConsumerTarget or ConsumerCurrent
// (KindConsumerPartitionMetadata keeps nothing).
type Record struct {
	Kind      RecordKind
	OffsetKey OffsetKey // KindOffset
	GroupID   string    // every kind
	// MemberID is the key's member id for KindConsumerMember,
	// KindConsumerTargetMember and KindConsumerCurrent.
	MemberID  string
	Tombstone bool
	Offset    *OffsetValue
	Group     *GroupMetadata
	// ConsumerEpoch is the group epoch (KindConsumerGroup) or the
	// assignment epoch (KindConsumerTarget).
	ConsumerEpoch   int32
	ConsumerMember  *ConsumerMemberRecord
	ConsumerTarget  Assignment // non-nil, possibly empty, for a KindConsumerTargetMember value
	ConsumerCurrent *ConsumerAssignmentRecord
	// ShareEpoch is KindShareGroup's group epoch; ShareMember and
	// ShareTopics are the values of KindShareMember and
	// KindShareInitialized.
	ShareEpoch  int32
	ShareMember *ShareMemberRecord
	ShareTopics []TopicID
}

// ErrUnknownRecord marks a key or value whose schema version we do not
// model (for example Kafka's own share- and streams-group records, key
// versions 9-21, which newer Kafka writes to the same topic). Load skips such records
// instead of failing.
var ErrUnknownRecord = errors.New("group: unknown __consumer_offsets record version")

// ErrCorruptRecord marks a record that claims a known version but does not
// parse. It is not a Kafka error code: Load refuses such a partition.
var ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")

// EncodeOffsetKey writes an OffsetCommitKey v1.
func EncodeOffsetKey(k OffsetKey) []byte {
	b := make([]byte, 0, 2+2+len(k.Group)+2+len(k.Topic)+4)
	b = binary.BigEndian.AppendUint16(b, uint16(offsetKeyVersion))
	b = appendString(b, k.Group)
	b = appendString(b, k.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// EncodeOffsetValue writes an OffsetCommitValue v3.
func EncodeOffsetValue(v OffsetValue) []byte {
	b := make([]byte, 0, 2+8+4+2+len(v.Metadata)+8)
	b = binary.BigEndian.AppendUint16(b, uint16(offsetValueVersion))
	b = binary.BigEndian.AppendUint64(b, uint64(v.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = appendString(b, v.Metadata)
	return binary.BigEndian.AppendUint64(b, uint64(v.CommitTimestamp))
}

// EncodeGroupKey writes a GroupMetadataKey v2.
func EncodeGroupKey(group string) []byte {
	b := make([]byte, 0, 4+len(group))
	b = binary.BigEndian.AppendUint16(b, uint16(groupKeyVersion))
	return appendString(b, group)
}

// EncodeGroupValue writes a GroupMetadataValue v3.
func EncodeGroupValue(v GroupMetadata) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(groupValueVersion))
	b = appendString(b, v.ProtocolType)
	b = binary.BigEndian.AppendUint32(b, uint32(v.Generation))
	b = appendNullableString(b, v.Protocol)
	b = appendNullableString(b, v.Leader)
	b = binary.BigEndian.AppendUint64(b, uint64(v.CurrentStateTimestamp))
	b = binary.BigEndian.AppendUint32(b, uint32(len(v.Members)))
	for _, m := range v.Members {
		b = appendString(b, m.MemberID)
		b = appendNullableString(b, m.InstanceID)
		b = appendString(b, m.ClientID)
		b = appendString(b, m.ClientHost)
		b = binary.BigEndian.AppendUint32(b, uint32(m.RebalanceTimeoutMs))
		b = binary.BigEndian.AppendUint32(b, uint32(m.SessionTimeoutMs))
		b = appendBytes(b, m.Subscription)
		b = appendBytes(b, m.Assignment)
	}
	return b
}

// DecodeRecord parses one offsets-topic record. Unknown key versions give
// ErrUnknownRecord; malformed bytes give ErrCorruptRecord.
func DecodeRecord(key, value []byte) (Record, error) {
	r := reader{b: key}
	ver := r.int16()
	if r.err != nil {
		return Record{}, fmt.Errorf("%w: key too short", ErrCorruptRecord)
	}
	var rec Record
	switch ver {
	case 0, 1:
		rec.Kind = KindOffset
		rec.OffsetKey.Group = r.string()
		rec.OffsetKey.Topic = r.string()
		rec.OffsetKey.Partition = r.int32()
		rec.GroupID = rec.OffsetKey.Group
	case 2:
		rec.Kind = KindGroup
		rec.GroupID = r.string()
	default:
		if !decodeConsumerKey(&r, ver, &rec) && !decodeShareKey(&r, ver, &rec) {
			return Record{}, fmt.Errorf("%w: key version %d", ErrUnknownRecord, ver)
		}
	}
	if err := r.done(); err != nil {
		return Record{}, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	if value == nil {
		rec.Tombstone = true
		return rec, nil
	}
	var err error
	switch rec.Kind {
	case KindOffset:
		rec.Offset, err = decodeOffsetValue(value)
	case KindGroup:
		rec.Group, err = decodeGroupValue(value)
	case KindShareGroup, KindShareMember, KindShareInitialized:
		err = decodeShareValue(&rec, value)
	default:
		err = decodeConsumerValue(&rec, value)
	}
	if err != nil {
		return Record{}, err
	}
	return rec, nil
}

func decodeOffsetValue(b []byte) (*OffsetValue, error) {
	r := reader{b: b}
	v := &OffsetValue{LeaderEpoch: -1}
	ver := r.int16()
	if r.err == nil && (ver < 0 || ver > 3) {
		return nil, fmt.Errorf("%w: offset value version %d", ErrUnknownRecord, ver)
	}
	v.Offset = r.int64()
	if ver >= 3 {
		v.LeaderEpoch = r.int32()
	}
	v.Metadata = r.string()
	v.CommitTimestamp = r.int64()
	if ver == 1 {
		r.int64() // expireTimestamp: dropped by KIP-211, retention is broker-side now
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("%w: offset value: %v", ErrCorruptRecord, err)
	}
	return v, nil
}

func decodeGroupValue(b []byte) (*GroupMetadata, error) {
	r := reader{b: b}
	v := &GroupMetadata{CurrentStateTimestamp: -1}
	ver := r.int16()
	if r.err == nil && (ver < 0 || ver > 3) {
		return nil, fmt.Errorf("%w: group value version %d", ErrUnknownRecord, ver)
	}
	v.ProtocolType = r.string()
	v.Generation = r.int32()
	v.Protocol = r.nullableString()
	v.Leader = r.nullableString()
	if ver >= 2 {
		v.CurrentStateTimestamp = r.int64()
	}
	n := r.int32()
	// Each member takes at least 20 bytes; checking the count against the
	// bytes left keeps a corrupt count from allocating gigabytes.
	if r.err == nil && (n < 0 || int(n) > len(r.b)/20) {
		return nil, fmt.Errorf("%w: group value: member count %d with %d bytes left", ErrCorruptRecord, n, len(r.b))
	}
	for i := int32(0); i < n && r.err == nil; i++ {
		m := MemberMetadata{RebalanceTimeoutMs: -1}
		m.MemberID = r.string()
		if ver >= 3 {
			m.InstanceID = r.nullableString()
		}
		m.ClientID = r.string()
		m.ClientHost = r.string()
		if ver >= 1 {
			m.RebalanceTimeoutMs = r.int32()
		}
		m.SessionTimeoutMs = r.int32()
		m.Subscription = r.bytes()
		m.Assignment = r.bytes()
		v.Members = append(v.Members, m)
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("%w: group value: %v", ErrCorruptRecord, err)
	}
	return v, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return binary.BigEndian.AppendUint16(b, 0xffff)
	}
	return appendString(b, *s)
}

func appendBytes(b, p []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	return append(b, p...)
}

// reader is a sticky-error big-endian reader: after the first short read
// every call returns zero values, so decoders check r.err once at the end.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("not enough bytes")

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int16() int16 {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(p))
}

func (r *reader) int32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *reader) int64() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		if r.err == nil {
			r.err = errors.New("negative string length")
		}
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) nullableString() *string {
	n := r.int16()
	if r.err != nil || n == -1 {
		return nil
	}
	s := string(r.take(int(n)))
	if r.err != nil {
		return nil
	}
	return &s
}

func (r *reader) bytes() []byte {
	n := r.int32()
	if r.err != nil || n == -1 {
		return nil
	}
	p := r.take(int(n))
	if p == nil {
		return nil
	}
	return append([]byte{}, p...)
}

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return nil
}
