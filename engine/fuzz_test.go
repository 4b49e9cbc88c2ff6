package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
)

// FuzzValidateBatches feeds arbitrary bytes to the produce-path validator.
// It must never panic, and whatever it accepts must really be back-to-back
// magic-2 batches whose lengths cover the input exactly and whose CRCs hold.
func FuzzValidateBatches(f *testing.F) {
	good := batchtest.Values("a", "bb", "ccc")
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 80))
	huge := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(huge[8:], 0x7fffffff) // batchLength claiming 2 GiB
	f.Add(huge)
	f.Fuzz(func(t *testing.T, records []byte) {
		hdrs, err := validateBatches(records, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrInvalidRecord) &&
				!errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		rest := records
		for _, h := range hdrs {
			if len(rest) < 12 {
				t.Fatalf("accepted %d batches over %d bytes", len(hdrs), len(records))
			}
			n := 12 + int(binary.BigEndian.Uint32(rest[8:]))
			if n > len(rest) || crc32c(rest[21:n]) != binary.BigEndian.Uint32(rest[17:]) {
				t.Fatalf("accepted a batch with a bad length or CRC")
			}
			_ = h
			rest = rest[n:]
		}
		if len(rest) != 0 {
			t.Fatalf("%d bytes left after the accepted batches", len(rest))
		}
	})
}
