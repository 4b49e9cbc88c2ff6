package txn

import (
	"testing"
)

// FuzzDecodeRecords feeds arbitrary bytes to the __transaction_state
// record decoders, as a coordinator loading a corrupt or hostile
// partition would: they must never panic, and a value they accept must
// encode to bytes that decode and encode to the same bytes again (the
// encoder normalizes, e.g. it writes no partitions for an Empty state).
func FuzzDecodeRecords(f *testing.F) {
	f.Add(EncodeKey("txn-1"), EncodeValue(Metadata{ProducerID: 7, ProducerEpoch: 2, TimeoutMs: 60000, State: 1,
		Partitions: []TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 3}}, LastUpdateMs: 5, StartMs: 4}))
	f.Add([]byte{0, 0, 0x7f, 0xff}, []byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 0, 0, 0, 1, 1, 0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{}, []byte{0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		DecodeKey(key)
		m, err := DecodeValue(value)
		if err != nil {
			return
		}
		enc := EncodeValue(m)
		m2, err := DecodeValue(enc)
		if err != nil {
			t.Fatalf("re-encoded value refused: %v", err)
		}
		if again := EncodeValue(m2); string(again) != string(enc) {
			t.Fatalf("encoding is not stable: %+v -> %+v", m, m2)
		}
	})
}
