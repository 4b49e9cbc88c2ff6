package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// __consumer_offsets records of share (KIP-932) groups. Kafka keeps a
// share group in ShareGroup* records (key versions 9-15); ringlog models
// the same state with fewer records of its own, so it uses key versions
// of its own, far above Kafka's: neither coordinator misreads the
// other's records, and Kafka's share records are skipped here as
// unknown. The layout follows the consumer records (classic key strings;
// flexible version-0 values with compact strings and arrays and a
// tagged-field section at the end):
//
//	key 0x7201 ShareGroup:            group        -> epoch:int32
//	key 0x7202 ShareMember:           group member -> memberEpoch:int32 rackId? clientId clientHost
//	                                                  [subscribedTopicName] assigned:[topicId [partition]]
//	key 0x7203 ShareInitializedTopics: group       -> [topicId]
//
// The member record is Kafka's member metadata and current assignment in
// one; the initialized-topics record is the set of topics whose
// share-partition state may exist somewhere (Kafka's
// ShareGroupStatePartitionMetadata, by topic rather than by partition).
// A group's records go as one append; DeleteGroups writes tombstones for
// every member and the topic set, then the group's.
const (
	shareGroupKeyVersion       int16 = 0x7201
	shareMemberKeyVersion      int16 = 0x7202
	shareInitializedKeyVersion int16 = 0x7203
	shareValueVersion          int16 = 0
)

// ShareMemberRecord is the value of a share member's record.
type ShareMemberRecord struct {
	MemberEpoch          int32
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	Assigned             Assignment
}

// ShareGroupKV is a share group's epoch record; tombstone writes the key
// with a nil value.
func ShareGroupKV(group string, epoch int32, tombstone bool) statelog.KV {
	kv := statelog.KV{Key: consumerKey(shareGroupKeyVersion, group, nil)}
	if !tombstone {
		kv.Value = epochValue(epoch) // the consumer group's epoch value, version 0 too
	}
	return kv
}

// ShareMemberKV is a share member's record; nil r is a tombstone.
func ShareMemberKV(group, memberID string, r *ShareMemberRecord) statelog.KV {
	kv := statelog.KV{Key: consumerKey(shareMemberKeyVersion, group, &memberID)}
	if r == nil {
		return kv
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(shareValueVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(r.MemberEpoch))
	b = appendCompactNullableString(b, r.RackID)
	b = appendCompactString(b, r.ClientID)
	b = appendCompactString(b, r.ClientHost)
	b = appendCompactStrings(b, r.SubscribedTopicNames)
	b = appendAssignment(b, r.Assigned)
	kv.Value = append(b, 0)
	return kv
}

// ShareInitializedKV is a share group's set of topics with state, in id
// order; tombstone writes the key with a nil value.
func ShareInitializedKV(group string, topics []TopicID, tombstone bool) statelog.KV {
	kv := statelog.KV{Key: consumerKey(shareInitializedKeyVersion, group, nil)}
	if tombstone {
		return kv
	}
	ids := slices.Clone(topics)
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	b := binary.BigEndian.AppendUint16(nil, uint16(shareValueVersion))
	b = binary.AppendUvarint(b, uint64(len(ids))+1)
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	kv.Value = append(b, 0)
	return kv
}

// decodeShareKey reads the fields of a share key after its version; it
// reports false for other versions.
func decodeShareKey(r *reader, ver int16, rec *Record) bool {
	switch ver {
	case shareGroupKeyVersion:
		rec.Kind = KindShareGroup
	case shareMemberKeyVersion:
		rec.Kind = KindShareMember
	case shareInitializedKeyVersion:
		rec.Kind = KindShareInitialized
	default:
		return false
	}
	rec.GroupID = r.string()
	if rec.Kind == KindShareMember {
		rec.MemberID = r.string()
	}
	return true
}

// decodeShareValue fills rec from the value of a share record.
func decodeShareValue(rec *Record, value []byte) error {
	r := reader{b: value}
	ver := r.int16()
	if r.err == nil && ver != shareValueVersion {
		return fmt.Errorf("%w: share record type %d value version %d", ErrUnknownRecord, rec.Kind, ver)
	}
	switch rec.Kind {
	case KindShareGroup:
		rec.ShareEpoch = r.int32()
	case KindShareMember:
		m := &ShareMemberRecord{}
		m.MemberEpoch = r.int32()
		m.RackID = r.compactNullableString()
		m.ClientID = r.compactString()
		m.ClientHost = r.compactString()
		m.SubscribedTopicNames = r.compactStrings()
		m.Assigned = r.assignment()
		rec.ShareMember = m
	case KindShareInitialized:
		n := r.compactArrayLen(16)
		rec.ShareTopics = make([]TopicID, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			var id TopicID
			copy(id[:], r.take(16))
			rec.ShareTopics = append(rec.ShareTopics, id)
		}
	}
	r.skipTags()
	if err := r.done(); err != nil {
		return fmt.Errorf("%w: share record type %d value: %v", ErrCorruptRecord, rec.Kind, err)
	}
	return nil
}
