package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// __consumer_offsets records of consumer (KIP-848) groups, in Kafka's
// formats (group-coordinator/src/main/resources/common/message/
// ConsumerGroup*.json). The key's int16 version is the record type; keys
// are not flexible (classic int16-length strings). Values are flexible
// version 0: an int16 version, then compact strings and arrays (uvarint
// length+1, 0 for null), 16-byte Uuids, and a tagged-field section
// (uvarint count, then tag, size, bytes) after every struct.
//
//	key 3 ConsumerGroupMetadata:                group       -> epoch:int32
//	key 4 ConsumerGroupPartitionMetadata:       group       -> [topicId name numPartitions [partition [rack]]]
//	key 5 ConsumerGroupMemberMetadata:          group member -> instanceId? rackId? clientId clientHost
//	                                            [subscribedTopicName] subscribedTopicRegex? rebalanceTimeoutMs:int32
//	                                            serverAssignor? tag0:ClassicMemberMetadata?
//	key 6 ConsumerGroupTargetAssignmentMetadata: group      -> assignmentEpoch:int32
//	key 7 ConsumerGroupTargetAssignmentMember:  group member -> [topicId [partition:int32]]
//	key 8 ConsumerGroupCurrentMemberAssignment: group member -> memberEpoch:int32 previousMemberEpoch:int32
//	                                            state:int8 assigned:[topicId [partition]] pendingRevocation:[...]
//
// We write value version 0 of keys 3, 5, 6, 7 and 8, the only value
// version Kafka defines for them. Their optional parts are tagged fields
// (the member value's ClassicMemberMetadata, tag 0; the metadata value's
// topic-metadata hash of KIP-1101, Kafka 4.1+), which we never write,
// because we neither hash topic metadata nor let classic-protocol members
// join a consumer group, and skip on read like any unknown tag. Key 4 (subscription metadata, deprecated
// since Kafka 4.0) is decoded, so a corrupt one is noticed, and then
// ignored by Load: we resolve topics from the live cluster view instead.
// A value version other than 0 is ErrUnknownRecord, as for the classic
// records.
const (
	consumerGroupKeyVersion             int16 = 3
	consumerPartitionMetadataKeyVersion int16 = 4
	consumerMemberKeyVersion            int16 = 5
	consumerTargetKeyVersion            int16 = 6
	consumerTargetMemberKeyVersion      int16 = 7
	consumerCurrentKeyVersion           int16 = 8
	consumerValueVersion                int16 = 0
)

// ConsumerGroupMetadataKV is ConsumerGroupMetadata{Key,Value}: the group
// epoch. tombstone writes the key with a nil value.
func ConsumerGroupMetadataKV(group string, epoch int32, tombstone bool) statelog.KV {
	kv := statelog.KV{Key: consumerKey(consumerGroupKeyVersion, group, nil)}
	if !tombstone {
		kv.Value = epochValue(epoch)
	}
	return kv
}

// ConsumerTargetMetadataKV is ConsumerGroupTargetAssignmentMetadata: the
// epoch of the target assignment.
func ConsumerTargetMetadataKV(group string, assignmentEpoch int32, tombstone bool) statelog.KV {
	kv := statelog.KV{Key: consumerKey(consumerTargetKeyVersion, group, nil)}
	if !tombstone {
		kv.Value = epochValue(assignmentEpoch)
	}
	return kv
}

// ConsumerMemberKV is ConsumerGroupMemberMetadata; nil r is a tombstone.
func ConsumerMemberKV(group, memberID string, r *ConsumerMemberRecord) statelog.KV {
	kv := statelog.KV{Key: consumerKey(consumerMemberKeyVersion, group, &memberID)}
	if r == nil {
		return kv
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(consumerValueVersion))
	b = appendCompactNullableString(b, r.InstanceID)
	b = appendCompactNullableString(b, r.RackID)
	b = appendCompactString(b, r.ClientID)
	b = appendCompactString(b, r.ClientHost)
	b = appendCompactStrings(b, r.SubscribedTopicNames)
	b = appendCompactNullableString(b, r.SubscribedTopicRegex)
	b = binary.BigEndian.AppendUint32(b, uint32(r.RebalanceTimeoutMs))
	b = appendCompactNullableString(b, r.ServerAssignor)
	kv.Value = append(b, 0) // no tagged fields: ClassicMemberMetadata is null
	return kv
}

// ConsumerTargetMemberKV is ConsumerGroupTargetAssignmentMember: one
// member's target assignment.
func ConsumerTargetMemberKV(group, memberID string, a Assignment, tombstone bool) statelog.KV {
	kv := statelog.KV{Key: consumerKey(consumerTargetMemberKeyVersion, group, &memberID)}
	if tombstone {
		return kv
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(consumerValueVersion))
	b = appendAssignment(b, a)
	kv.Value = append(b, 0)
	return kv
}

// ConsumerCurrentAssignmentKV is ConsumerGroupCurrentMemberAssignment; nil
// r is a tombstone.
func ConsumerCurrentAssignmentKV(group, memberID string, r *ConsumerAssignmentRecord) statelog.KV {
	kv := statelog.KV{Key: consumerKey(consumerCurrentKeyVersion, group, &memberID)}
	if r == nil {
		return kv
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(consumerValueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(r.MemberEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(r.PreviousMemberEpoch))
	b = append(b, byte(r.State))
	b = appendAssignment(b, r.Assigned)
	b = appendAssignment(b, r.PendingRevocation)
	kv.Value = append(b, 0)
	return kv
}

func consumerKey(version int16, group string, member *string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(version))
	b = appendString(b, group)
	if member != nil {
		b = appendString(b, *member)
	}
	return b
}

func epochValue(epoch int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(consumerValueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(epoch))
	return append(b, 0)
}

// appendAssignment writes [TopicPartitions{TopicId, [Partitions]}] in
// topic id order, so equal assignments encode to equal bytes. Topics
// without partitions are left out: they hold nothing.
func appendAssignment(b []byte, a Assignment) []byte {
	ids := make([]TopicID, 0, len(a))
	for id, ps := range a {
		if len(ps) > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	b = binary.AppendUvarint(b, uint64(len(ids))+1)
	for _, id := range ids {
		b = append(b, id[:]...)
		ps := a[id]
		b = binary.AppendUvarint(b, uint64(len(ps))+1)
		for _, p := range ps {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
		b = append(b, 0) // the struct's empty tagged-field section
	}
	return b
}

func appendCompactString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

// appendCompactStrings writes a compact array of compact strings.
func appendCompactStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss))+1)
	for _, s := range ss {
		b = appendCompactString(b, s)
	}
	return b
}

func appendCompactNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendCompactString(b, *s)
}

// consumerKinds maps the consumer records' key versions to their kinds.
var consumerKinds = map[int16]RecordKind{
	consumerGroupKeyVersion:             KindConsumerGroup,
	consumerPartitionMetadataKeyVersion: KindConsumerPartitionMetadata,
	consumerMemberKeyVersion:            KindConsumerMember,
	consumerTargetKeyVersion:            KindConsumerTarget,
	consumerTargetMemberKeyVersion:      KindConsumerTargetMember,
	consumerCurrentKeyVersion:           KindConsumerCurrent,
}

// decodeConsumerKey reads the fields of a key of version 3-8 after its
// version; it reports false for other versions.
func decodeConsumerKey(r *reader, ver int16, rec *Record) bool {
	kind, ok := consumerKinds[ver]
	if !ok {
		return false
	}
	rec.Kind = kind
	rec.GroupID = r.string()
	switch kind {
	case KindConsumerMember, KindConsumerTargetMember, KindConsumerCurrent:
		rec.MemberID = r.string()
	}
	return true
}

// decodeConsumerValue fills rec from the value of a consumer record.
func decodeConsumerValue(rec *Record, value []byte) error {
	r := reader{b: value}
	ver := r.int16()
	if r.err == nil && ver != consumerValueVersion {
		return fmt.Errorf("%w: consumer record type %d value version %d", ErrUnknownRecord, rec.Kind, ver)
	}
	switch rec.Kind {
	case KindConsumerGroup, KindConsumerTarget:
		rec.ConsumerEpoch = r.int32()
	case KindConsumerPartitionMetadata:
		skipPartitionMetadata(&r)
	case KindConsumerMember:
		m := &ConsumerMemberRecord{}
		m.InstanceID = r.compactNullableString()
		m.RackID = r.compactNullableString()
		m.ClientID = r.compactString()
		m.ClientHost = r.compactString()
		m.SubscribedTopicNames = r.compactStrings()
		m.SubscribedTopicRegex = r.compactNullableString()
		m.RebalanceTimeoutMs = r.int32()
		m.ServerAssignor = r.compactNullableString()
		rec.ConsumerMember = m
	case KindConsumerTargetMember:
		rec.ConsumerTarget = r.assignment()
	case KindConsumerCurrent:
		c := &ConsumerAssignmentRecord{}
		c.MemberEpoch = r.int32()
		c.PreviousMemberEpoch = r.int32()
		if p := r.take(1); p != nil {
			c.State = int8(p[0])
		}
		c.Assigned = r.assignment()
		c.PendingRevocation = r.assignment()
		rec.ConsumerCurrent = c
	}
	r.skipTags()
	if err := r.done(); err != nil {
		return fmt.Errorf("%w: consumer record type %d value: %v", ErrCorruptRecord, rec.Kind, err)
	}
	return nil
}

// skipPartitionMetadata reads ConsumerGroupPartitionMetadataValue's topics
// without keeping them.
func skipPartitionMetadata(r *reader) {
	// A topic is at least uuid + name + count + partitions + tags.
	n := r.compactArrayLen(16 + 1 + 4 + 1 + 1)
	for i := 0; i < n && r.err == nil; i++ {
		r.take(16)
		r.compactString()
		r.int32()
		np := r.compactArrayLen(4 + 1 + 1)
		for j := 0; j < np && r.err == nil; j++ {
			r.int32()
			nr := r.compactArrayLen(1)
			for k := 0; k < nr && r.err == nil; k++ {
				r.compactString()
			}
			r.skipTags()
		}
		r.skipTags()
	}
}

// Flexible-version reads. They share reader's sticky error.

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// uvarint reads an unsigned varint that must fit an int32, as Kafka's do.
func (r *reader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > math.MaxInt32 {
		r.fail("bad unsigned varint")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// compactLen reads a compact length (stored +1); -1 is null.
func (r *reader) compactLen() int {
	return r.uvarint() - 1
}

func (r *reader) compactString() string {
	n := r.compactLen()
	if n < 0 {
		r.fail("null in a non-nullable string")
		return ""
	}
	return string(r.take(n))
}

func (r *reader) compactNullableString() *string {
	n := r.compactLen()
	if r.err != nil || n < 0 {
		return nil
	}
	p := r.take(n)
	if r.err != nil {
		return nil
	}
	s := string(p)
	return &s
}

// compactStrings reads a compact array of compact strings; an empty
// array is nil.
func (r *reader) compactStrings() []string {
	n := r.compactArrayLen(1)
	var ss []string
	if n > 0 {
		ss = make([]string, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		ss = append(ss, r.compactString())
	}
	return ss
}

// compactArrayLen reads the length of a non-nullable compact array whose
// elements take at least minSize bytes each; a count the remaining bytes
// cannot hold fails before anything is allocated for it.
func (r *reader) compactArrayLen(minSize int) int {
	n := r.compactLen()
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.fail("null in a non-nullable array")
		return 0
	}
	if n > len(r.b)/minSize {
		r.fail("array of %d with %d bytes left", n, len(r.b))
		return 0
	}
	return n
}

// assignment reads [TopicPartitions{TopicId, [Partitions], tags}]. Kafka
// never writes a topic twice or a partition out of order, but a hostile
// record could: the result is normalised to sorted, duplicate-free
// partitions so callers can rely on Assignment's invariant.
func (r *reader) assignment() Assignment {
	n := r.compactArrayLen(16 + 1 + 1)
	a := make(Assignment, n)
	for i := 0; i < n && r.err == nil; i++ {
		var id TopicID
		copy(id[:], r.take(16))
		np := r.compactArrayLen(4)
		ps := a[id]
		for j := 0; j < np && r.err == nil; j++ {
			ps = append(ps, r.int32())
		}
		r.skipTags()
		if len(ps) > 0 {
			a[id] = ps
		}
	}
	if r.err != nil {
		return nil
	}
	for id, ps := range a {
		slices.Sort(ps)
		a[id] = slices.Compact(ps)
	}
	return a
}

// skipTags skips a tagged-field section: we model no tagged field, so
// every tag is one a newer writer added and we may ignore.
func (r *reader) skipTags() {
	n := r.uvarint()
	if n > len(r.b)/2 {
		r.fail("%d tagged fields with %d bytes left", n, len(r.b))
		return
	}
	for i := 0; i < n && r.err == nil; i++ {
		r.uvarint() // tag
		r.take(r.uvarint())
	}
}
