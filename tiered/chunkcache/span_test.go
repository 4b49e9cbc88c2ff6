package chunkcache_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

func TestReadAtAcrossChunks(t *testing.T) {
	s := newFakeStore()
	const chunk = 1000
	obj := s.add("k", 3*chunk+50, 21)
	cfg := testConfigNoReadAhead(t, chunk, 100*chunk)
	c := openCache(t, cfg, s)
	ctx := context.Background()
	size := int64(len(obj))

	p := make([]byte, 12) // a batch header's offset and length, across 0|1
	if n, err := c.ReadAt(ctx, "k", size, p, chunk-5); n != 12 || err != nil || !bytes.Equal(p, obj[chunk-5:chunk+7]) {
		t.Fatalf("ReadAt across a boundary: %d, %v", n, err)
	}
	all := make([]byte, len(obj))
	if n, err := c.ReadAt(ctx, "k", size, all, 0); n != len(obj) || err != nil || !bytes.Equal(all, obj) {
		t.Fatalf("ReadAt of the whole object: %d, %v", n, err)
	}
	// Past the end: the bytes before it, then io.EOF.
	n, err := c.ReadAt(ctx, "k", size, make([]byte, 100), size-30)
	if n != 30 || err != io.EOF {
		t.Fatalf("ReadAt past the end: %d, %v", n, err)
	}
	if st := c.Stats(); st.PinnedUnlinked != 0 || s.calls.Load() != 4 {
		t.Fatalf("stats %+v, fetches %d", st, s.calls.Load())
	}
	// A store failure reaches the caller with its kind.
	s.mangle = func(_ string, _ int64, b []byte) []byte { return b[:1] }
	c.Drop("k")
	if _, err := c.ReadAt(ctx, "k", size, p, 0); !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatalf("ReadAt of a corrupt object: %v", err)
	}
}

func TestGetSpan(t *testing.T) {
	s := newFakeStore()
	const chunk = 1000
	obj := s.add("k", 5*chunk+10, 22)
	cfg := testConfigNoReadAhead(t, chunk, 100*chunk)
	c := openCache(t, cfg, s)
	ctx := context.Background()
	size := int64(len(obj))
	fds := openFDs(t)

	for _, tc := range []struct {
		off    int64
		n      int32
		copies uint64
	}{
		{100, 800, 0},             // within a chunk: a plain Get
		{chunk - 10, 20, 1},       // a batch straddling 0|1
		{chunk / 2, 3 * chunk, 1}, // across four chunks
		{4*chunk + 5, 995, 0},     // the rest of chunk 4
		{5 * chunk, 10, 0},        // the short last chunk
	} {
		before := c.Stats().SpanCopies
		r, err := c.GetSpan(ctx, "k", size, tc.off, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if r.Len() != tc.n || !bytes.Equal(read(t, r), obj[tc.off:tc.off+int64(tc.n)]) {
			t.Fatalf("span %d+%d: Len %d or bytes wrong", tc.off, tc.n, r.Len())
		}
		st := c.Stats()
		if st.SpanCopies-before != tc.copies {
			t.Fatalf("span %d+%d: %d copies, want %d", tc.off, tc.n, st.SpanCopies-before, tc.copies)
		}
		if tc.copies == 1 && st.PinnedUnlinked != int64(tc.n) {
			t.Fatalf("span %d+%d: PinnedUnlinked %d", tc.off, tc.n, st.PinnedUnlinked)
		}
		r.Release()
		r.Release()
	}
	if st := c.Stats(); st.PinnedUnlinked != 0 || st.CachedBytes != size {
		t.Fatalf("stats %+v", st)
	}
	if got := openFDs(t); got != fds {
		t.Fatalf("open fds %d, want %d", got, fds)
	}
	// Only chunk files remain: span files were never visible by name.
	if _, names := dirFiles(t, cfg.Dir); len(names) != 6 {
		t.Fatalf("directory %v", names)
	}
	for _, bad := range []struct {
		off int64
		n   int32
	}{{-1, 10}, {0, 0}, {size - 5, 10}} {
		if _, err := c.GetSpan(ctx, "k", size, bad.off, bad.n); !errors.Is(err, chunkcache.ErrInvalidRange) {
			t.Errorf("GetSpan(%d, %d) = %v", bad.off, bad.n, err)
		}
	}
	// A span whose second chunk cannot be fetched fails and leaves nothing.
	s.add("gone", 2*chunk, 23)
	s.mangle = func(_ string, off int64, b []byte) []byte {
		if off == chunk {
			return b[:5]
		}
		return b
	}
	if _, err := c.GetSpan(ctx, "gone", 2*chunk, chunk-10, 20); !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatalf("GetSpan over a corrupt chunk: %v", err)
	}
	if st := c.Stats(); st.PinnedUnlinked != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := openFDs(t); got != fds {
		t.Fatalf("open fds %d, want %d", got, fds)
	}
}
