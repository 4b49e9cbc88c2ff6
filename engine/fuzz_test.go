package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/records"
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
	f.Fuzz(func(t *testing.T, in []byte) {
		hdrs, err := validateBatches(in, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrInvalidRecord) &&
				!errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		rest := in
		for _, h := range hdrs {
			if len(rest) < 12 {
				t.Fatalf("accepted %d batches over %d bytes", len(hdrs), len(in))
			}
			n := 12 + int(binary.BigEndian.Uint32(rest[8:]))
			if n > len(rest) || records.CRC32C(rest[21:n]) != binary.BigEndian.Uint32(rest[17:]) {
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

// FuzzRecoverSegment writes arbitrary bytes as a partition's segment file
// (after a valid prefix, so recovery gets past the first batch) and, in
// the clean-shutdown variant, arbitrary bytes as its offset index, then
// opens the engine. Open must not panic: it either refuses the log with a
// classified error or recovers one whose every readable batch is valid.
func FuzzRecoverSegment(f *testing.F) {
	good := batchtest.Values("a", "bb", "ccc")
	f.Add([]byte{}, []byte{}, false)
	f.Add(good, []byte{}, false)
	f.Add(good[:len(good)-3], []byte{0, 0, 0, 0, 0, 0, 0, 0}, true)
	f.Add(bytes.Repeat([]byte{0xff}, 200), bytes.Repeat([]byte{0xff}, 16), true)
	huge := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(huge[8:], 0x7fffffff)
	f.Add(huge, []byte{0, 0, 0, 5, 0x7f, 0xff, 0xff, 0xff}, true)
	f.Fuzz(func(t *testing.T, tail, index []byte, clean bool) {
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.IOMode = "sync"
		cfg.Fsync = FsyncNever // speed: durability is not what is fuzzed
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateTopic("t", 1, nil); err != nil {
			t.Fatal(err)
		}
		p, _ := e.Partition("t", 0)
		if w, err := p.Append(batchtest.Values("seed")); err != nil {
			t.Fatal(err)
		} else if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(dir, "t-0", segmentName(0, logSuffix))
		fh, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(tail)
		fh.Close()
		if clean {
			os.WriteFile(filepath.Join(dir, "t-0", segmentName(0, indexSuffix)), index, 0o644)
		} else {
			os.Remove(filepath.Join(dir, cleanMarkerName))
		}
		e2, err := Open(cfg)
		if err != nil {
			if !errors.Is(err, ErrCorruptLog) && !errors.Is(err, ErrStorage) {
				t.Fatalf("unclassified open error: %v", err)
			}
			return
		}
		defer e2.Close()
		p2, err := e2.Partition("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < p2.HighWatermark(); {
			res, err := p2.Read(off, 1<<20, true)
			if err != nil {
				t.Fatalf("read at %d below HW %d: %v", off, p2.HighWatermark(), err)
			}
			n := res.Data.Len()
			if n == 0 {
				res.Data.Release()
				t.Fatalf("empty read at %d below HW %d", off, p2.HighWatermark())
			}
			b := make([]byte, n)
			res.Data.ReadAt(b, res.Data.Pos())
			res.Data.Release()
			hs, err := validateBatches(b, 0)
			if err != nil {
				t.Fatalf("recovered log serves an invalid batch at %d: %v", off, err)
			}
			off = hs[len(hs)-1].lastOffset() + 1
		}
	})
}
