package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/tiered/objstore"
)

const ts0 = 1_700_000_000_000

// produce appends n batches of 1-4 records of varied sizes; record j of
// batch i is stamped ts0 + 10*i + j.
func (f *fixture) produce(n int) {
	f.t.Helper()
	for i := range n {
		recs := make([]batchtest.Record, i%4+1)
		for j := range recs {
			recs[j] = batchtest.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 20+(i*37+j*11)%300), Timestamp: ts0 + int64(10*i+j)}
		}
		f.append(batchtest.Encode(batchtest.Options{}, recs...))
	}
}

type batchSpan struct {
	base, last int64
	size       int64
}

// splitBatches frames b into whole batches; a trailing partial batch is
// an error.
func splitBatches(b []byte) ([]batchSpan, error) {
	var out []batchSpan
	for len(b) > 0 {
		h, err := records.ParseHeader(b)
		if err != nil {
			return out, err
		}
		if h.Size() > int64(len(b)) {
			return out, fmt.Errorf("partial batch: %d of %d bytes", len(b), h.Size())
		}
		out = append(out, batchSpan{h.BaseOffset, h.LastOffset(), h.Size()})
		b = b[h.Size():]
	}
	return out, nil
}

// Every offset of the remote range, with several maxBytes and chunk
// sizes, reads whole batches that are a prefix of what the engine reads
// locally from the same segment: the same bytes from the batch holding
// the offset on, cut at a batch boundary (and with chunks large enough,
// exactly the local answer).
func TestReadMatchesLocal(t *testing.T) {
	for _, chunk := range []int64{1000, 1 << 20} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			f := newFixture(t, chunk, nil)
			f.produce(150)
			end := f.upload()
			if len(f.segs) < 5 {
				t.Fatalf("only %d segments uploaded", len(f.segs))
			}
			spans := 0
			for off := int64(0); off < end; off++ {
				for _, mb := range []int32{0, 100, 700, 3000, 1 << 20} {
					for _, minOne := range []bool{false, true} {
						loc, err := f.part.Read(off, mb, minOne)
						if err != nil {
							t.Fatal(err)
						}
						want := rangeBytes(t, loc.Data)
						got, err := f.read(off, mb, minOne)
						if err != nil {
							t.Fatalf("read %d max %d minOne %v: %v", off, mb, minOne, err)
						}
						where := fmt.Sprintf("offset %d max %d minOne %v: %d bytes, local %d", off, mb, minOne, len(got), len(want))
						bs, err := splitBatches(got)
						if err != nil {
							t.Fatalf("%s: %v", where, err)
						}
						if !bytes.HasPrefix(want, got) {
							t.Fatalf("%s: not a prefix of the local read", where)
						}
						if len(want) > 0 && len(got) == 0 {
							t.Fatalf("%s: nothing although the local read has data", where)
						}
						if len(bs) > 0 && (bs[0].last < off || bs[0].base > off) {
							t.Fatalf("%s: first batch [%d, %d] does not hold the offset", where, bs[0].base, bs[0].last)
						}
						if int64(len(got)) > int64(mb) && len(bs) != 1 {
							t.Fatalf("%s: over maxBytes with %d batches", where, len(bs))
						}
						if chunk >= 1<<20 && !bytes.Equal(got, want) {
							t.Fatalf("%s: differs from the local read", where)
						}
						if len(bs) == 1 && bs[0].size > chunk {
							spans++
						}
					}
				}
			}
			if chunk < 1<<20 && (spans == 0 || f.cache.Stats().SpanCopies == 0) {
				t.Fatalf("no batch crossed a chunk boundary (spans %d, stats %+v)", spans, f.cache.Stats())
			}
		})
	}
}

// An offset the metadata no longer lists (below the remote log start) is
// ErrOffsetGone; one at or past the remote end is ErrStorage.
func TestReadOutsideRemote(t *testing.T) {
	f := newFixture(t, 4096, nil)
	f.produce(60)
	end := f.upload()
	if _, err := f.read(end, 1<<20, true); !errors.Is(err, ErrStorage) {
		t.Fatalf("read at the remote end %d: %v, want ErrStorage", end, err)
	}
	f.expire(f.segs[1].BaseOffset)
	if _, err := f.read(0, 1<<20, true); !errors.Is(err, ErrOffsetGone) {
		t.Fatalf("read below the remote start: %v, want ErrOffsetGone", err)
	}
	if got, err := f.read(f.segs[1].BaseOffset, 1<<20, true); err != nil || len(got) == 0 {
		t.Fatalf("read at the new start: %d bytes, %v", len(got), err)
	}
}

// Retention deleting the objects between the lookup and the read: the
// store answers not found, the image (re-read) says the offset is below
// the start now, so the consumer gets ErrOffsetGone; the same missing
// object while still listed is a storage error naming it.
func TestReadRetentionRace(t *testing.T) {
	f := newFixture(t, 4096, nil)
	f.produce(60)
	f.upload()
	seg := f.segs[0]
	// Listed but missing: a clear storage error.
	if err := f.base.Delete(context.Background(), rlm.ObjectKey(&seg, "log")); err != nil {
		t.Fatal(err)
	}
	_, err := f.read(seg.BaseOffset, 1<<20, true)
	if !errors.Is(err, ErrStorage) || !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), rlm.ObjectKey(&seg, "log")) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing listed object: %v", err)
	}
	// Now retention expires it while the read is under way: the reader
	// looked the segment up in the old image.
	old := f.img.Load()
	f.expire(seg.NextOffset)
	expired := f.img.Load()
	calls := 0
	f.reader.image = func() *metadata.Image {
		calls++
		if calls == 1 {
			return old
		}
		return expired
	}
	if _, err := f.read(seg.BaseOffset, 1<<20, true); !errors.Is(err, ErrOffsetGone) || !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("read racing retention: %v, want ErrOffsetGone wrapping ErrNotFound", err)
	}
}

// Damaged objects and an unreachable store give ErrStorage saying which,
// wrapping the store's error; nothing panics.
func TestReadDamagedObjects(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 4096, nil)
	f.produce(60)
	f.upload()
	put := func(key string, b []byte) {
		if err := f.base.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	s0, s1, s2 := f.segs[0], f.segs[1], f.segs[2]

	// A log object with garbage of the right length.
	put(rlm.ObjectKey(&s0, "log"), bytes.Repeat([]byte{0xff}, int(s0.SizeBytes)))
	_, err := f.read(s0.BaseOffset, 1<<20, true)
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), rlm.ObjectKey(&s0, "log")) {
		t.Fatalf("garbage log: %v", err)
	}
	// A log object shorter than the metadata says.
	put(rlm.ObjectKey(&s1, "log"), []byte("short"))
	if _, err := f.read(s1.BaseOffset, 1<<20, true); !errors.Is(err, ErrStorage) || !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatalf("short log: %v", err)
	}
	// Indexes: a torn entry, an entry outside the segment.
	put(rlm.ObjectKey(&s2, "index"), []byte{0, 0, 0})
	if _, err := f.read(s2.BaseOffset, 1<<20, true); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "index corrupt") {
		t.Fatalf("torn index: %v", err)
	}
	f.reader = NewReader(f.img.Load, f.cache, f.store) // forget parsed indexes
	put(rlm.ObjectKey(&s2, "index"), []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0})
	if _, err := f.read(s2.BaseOffset, 1<<20, true); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "outside the segment") {
		t.Fatalf("index past the log: %v", err)
	}
	// Store outage: a cold read fails as unavailable, and recovers.
	s3 := f.segs[3]
	f.openCache(4096)
	f.store.SetOutage(true)
	if _, err := f.read(s3.BaseOffset, 1<<20, true); !errors.Is(err, ErrStorage) || !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("outage: %v", err)
	}
	f.store.SetOutage(false)
	if got, err := f.read(s3.BaseOffset, 1<<20, true); err != nil || len(got) == 0 {
		t.Fatalf("after the outage: %d bytes, %v", len(got), err)
	}
	// A damaged batch body (header intact) fails a timestamp lookup
	// cleanly: the CRC catches it before the record parser.
	s4 := f.segs[4]
	rc, err := f.base.GetRange(ctx, rlm.ObjectKey(&s4, "log"), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	log, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := records.ParseHeader(log)
	for i := int64(records.HeaderSize); i < h.Size(); i++ {
		log[i] ^= 0x55
	}
	put(rlm.ObjectKey(&s4, "log"), log)
	f.openCache(4096)
	if _, _, _, err := f.reader.OffsetForTimestamp(ctx, f.tid, 0, h.MaxTimestamp); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("timestamp lookup in a damaged batch: %v", err)
	}
	// Bits flipped in transit: caught by the batch header checks or,
	// past them, by the consumer's CRC; never a panic.
	f.openCache(4096)
	f.store.Inject(objstore.Fault{Ops: objstore.OpGetRange, KeyPrefix: rlm.ObjectKey(&s3, "log"), Corrupt: true})
	if got, err := f.read(s3.BaseOffset, 1<<20, true); err == nil {
		if _, err := splitBatches(got); err != nil {
			t.Fatalf("corrupted read returned unframed bytes: %v", err)
		}
	} else if !errors.Is(err, ErrStorage) {
		t.Fatalf("corrupted read: %v", err)
	}
}
