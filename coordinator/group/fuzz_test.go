package group

import (
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
