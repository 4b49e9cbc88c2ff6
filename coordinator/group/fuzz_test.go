package group

import (
	"reflect"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary key/value bytes to the
// __consumer_offsets record decoder, as a coordinator loading a corrupt or
// hostile partition would: it must never panic.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeOffsetKey(OffsetKey{Group: "g", Topic: "t", Partition: 1}), EncodeOffsetValue(OffsetValue{Offset: 42, LeaderEpoch: -1, Metadata: "m"}))
	f.Add(EncodeGroupKey("g"), []byte{0, 3, 0, 8, 'c', 'o', 'n', 's', 'u', 'm', 'e', 'r', 0, 0, 0, 1, 0x7f, 0xff})
	f.Add([]byte{0, 1, 0x7f, 0xff}, []byte{})
	f.Add([]byte{0, 2, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 0}, []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		DecodeRecord(key, value)
	})
}

// FuzzDecodeConsumerRecord feeds arbitrary values (and mutated keys) of
// the consumer-group record types, keys 3-8, to the decoder: it must never
// panic, and whatever decodes must re-encode to a record that decodes to
// the same thing.
func FuzzDecodeConsumerRecord(f *testing.F) {
	for _, kv := range recConsumerCases() {
		f.Add(kv.Key, kv.Value)
	}
	f.Add(consumerKey(consumerPartitionMetadataKeyVersion, "g", nil), []byte{0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 2, 't', 0, 0, 0, 3, 1, 0, 0})
	f.Add(consumerKey(consumerGroupKeyVersion, "g", nil), []byte{0, 0, 0, 0, 0, 5, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := DecodeRecord(key, value)
		if err != nil || r.Tombstone {
			return
		}
		kv, ok := reencodeConsumer(r)
		if !ok {
			return
		}
		r2, err := DecodeRecord(kv.Key, kv.Value)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(normRecord(r), normRecord(r2)) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, r2)
		}
	})
}

// normRecord drops topics without partitions, which the encoder leaves
// out, so a decoded record compares with its re-encoding.
func normRecord(r Record) Record {
	norm := func(a Assignment) Assignment {
		out := Assignment{}
		for id, ps := range a {
			if len(ps) > 0 {
				out[id] = ps
			}
		}
		return out
	}
	if r.ConsumerTarget != nil {
		r.ConsumerTarget = norm(r.ConsumerTarget)
	}
	if c := r.ConsumerCurrent; c != nil {
		cc := *c
		cc.Assigned, cc.PendingRevocation = norm(c.Assigned), norm(c.PendingRevocation)
		r.ConsumerCurrent = &cc
	}
	return r
}
