package chunkcache_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ringlog/ringlog/tiered/chunkcache"
)

func TestGetHitMiss(t *testing.T) {
	s := newFakeStore()
	obj := s.add("t/0/a.log", 2500, 1)
	cfg := testConfigNoReadAhead(t, 1024, 8192)
	c := openCache(t, cfg, s)

	mustGet(t, c, "t/0/a.log", obj, 10, 100, false)
	mustGet(t, c, "t/0/a.log", obj, 500, 100, false)
	if got := s.calls.Load(); got != 1 {
		t.Fatalf("fetches = %d, want 1 (second Get hits)", got)
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 1 || st.CachedBytes != 1024 || st.CachedChunks != 1 || st.FetchedBytes != 1024 {
		t.Fatalf("stats %+v", st)
	}
	mustGet(t, c, "t/0/a.log", obj, 2048, 1000, false) // last chunk, 452 bytes
	if st := c.Stats(); st.Misses != 2 || st.CachedBytes != 1024+452 {
		t.Fatalf("stats %+v", st)
	}
	if n, _ := dirFiles(t, cfg.Dir); n != 1024+452 {
		t.Fatalf("chunk files hold %d bytes, want %d", n, 1024+452)
	}
}

func TestBytesAcrossChunkBoundaries(t *testing.T) {
	s := newFakeStore()
	const chunk = 1000
	obj := s.add("k", 7*chunk+123, 2)
	c := openCache(t, testConfig(t, chunk, 100*chunk), s)

	// A reader walking the object with odd-sized reads gets every byte
	// once, and no range crosses a chunk boundary.
	for _, max := range []int32{1, 333, 999, 1000, 1001, 5000} {
		var got []byte
		for off := int64(0); off < int64(len(obj)); {
			r, err := c.Get(context.Background(), "k", int64(len(obj)), off, max)
			if err != nil {
				t.Fatal(err)
			}
			if r.Len() <= 0 || r.Len() > max || off/chunk != (off+int64(r.Len())-1)/chunk {
				t.Fatalf("max %d off %d: Len %d", max, off, r.Len())
			}
			if r.Pos() != off%chunk {
				t.Fatalf("Pos %d, want %d", r.Pos(), off%chunk)
			}
			got = append(got, read(t, r)...)
			off += int64(r.Len())
			r.Release()
		}
		if !bytes.Equal(got, obj) {
			t.Fatalf("max %d: bytes differ", max)
		}
	}
	if got := s.calls.Load(); got != 8 {
		t.Fatalf("fetches = %d, want 8 (one per chunk)", got)
	}
	// The last chunk is the short one.
	r := mustGet(t, c, "k", obj, 7*chunk, 5000, true)
	if r.Len() != 123 {
		t.Fatalf("last chunk range Len %d, want 123", r.Len())
	}
	r.Release()
}

func TestInvalidRange(t *testing.T) {
	s := newFakeStore()
	c := openCache(t, testConfig(t, 1024, 4096), s)
	for _, tc := range []struct {
		size, off int64
		max       int32
	}{{100, 100, 10}, {100, -1, 10}, {100, 0, 0}, {0, 0, 10}} {
		if _, err := c.Get(context.Background(), "k", tc.size, tc.off, tc.max); !errors.Is(err, chunkcache.ErrInvalidRange) {
			t.Errorf("Get(size %d, off %d, max %d) = %v, want ErrInvalidRange", tc.size, tc.off, tc.max, err)
		}
	}
	if s.calls.Load() != 0 {
		t.Fatal("invalid ranges reached the store")
	}
}

func TestLRUEvictionAndBound(t *testing.T) {
	s := newFakeStore()
	const chunk = 1024
	obj := s.add("k", 10*chunk, 3)
	cfg := testConfigNoReadAhead(t, chunk, 3*chunk)
	c := openCache(t, cfg, s)

	for i := int64(0); i < 3; i++ {
		mustGet(t, c, "k", obj, i*chunk, 10, false)
	}
	mustGet(t, c, "k", obj, 0, 10, false)       // 0 is now the most recent: 1 is the oldest
	mustGet(t, c, "k", obj, 5*chunk, 10, false) // evicts 1
	if st := c.Stats(); st.Evictions != 1 || st.CachedBytes != 3*chunk {
		t.Fatalf("stats %+v", st)
	}
	calls := s.calls.Load()
	mustGet(t, c, "k", obj, 0, 10, false)
	mustGet(t, c, "k", obj, 2*chunk, 10, false)
	if s.calls.Load() != calls {
		t.Fatal("chunks 0 and 2 should still be cached")
	}
	mustGet(t, c, "k", obj, 1*chunk, 10, false) // refetched; evicts 5 (oldest now)
	if s.calls.Load() != calls+1 {
		t.Fatal("chunk 1 should have been evicted")
	}
	mustGet(t, c, "k", obj, 5*chunk, 10, false)
	if s.calls.Load() != calls+2 {
		t.Fatal("chunk 5 should have been evicted after 1 came back")
	}
	// Many more chunks: the directory never holds more than MaxBytes.
	for i := int64(0); i < 10; i++ {
		mustGet(t, c, "k", obj, i*chunk, 10, false)
		if n, _ := dirFiles(t, cfg.Dir); n > cfg.MaxBytes {
			t.Fatalf("directory holds %d bytes > MaxBytes %d", n, cfg.MaxBytes)
		}
	}
}

func TestPinnedChunksSurviveEvictionAndUnlink(t *testing.T) {
	s := newFakeStore()
	const chunk = 1024
	obj := s.add("k", 4*chunk, 4)
	cfg := testConfigNoReadAhead(t, chunk, 2*chunk)
	c := openCache(t, cfg, s)
	fds := openFDs(t)

	r0 := mustGet(t, c, "k", obj, 0, chunk, true)
	r1 := mustGet(t, c, "k", obj, chunk, chunk, true)
	// Everything is pinned: chunk 2 is served but not kept.
	r2 := mustGet(t, c, "k", obj, 2*chunk, chunk, true)
	st := c.Stats()
	if st.CachedBytes != 2*chunk || st.PinnedUnlinked != chunk || st.Evictions != 0 {
		t.Fatalf("stats %+v", st)
	}
	if n, _ := dirFiles(t, cfg.Dir); n != 2*chunk {
		t.Fatalf("directory holds %d bytes, want %d", n, 2*chunk)
	}
	// Drop unlinks the pinned chunks; their ranges still read right.
	c.Drop("k")
	if n, names := dirFiles(t, cfg.Dir); n != 0 || len(names) != 0 {
		t.Fatalf("after Drop the directory holds %v", names)
	}
	for i, r := range []chunkcache.FileRange{r0, r1, r2} {
		if got := read(t, r); !bytes.Equal(got, obj[i*chunk:(i+1)*chunk]) {
			t.Fatalf("range %d: wrong bytes after unlink", i)
		}
	}
	if st := c.Stats(); st.CachedBytes != 0 || st.PinnedUnlinked != 3*chunk {
		t.Fatalf("stats %+v", st)
	}
	r0.Release()
	r0.Release() // idempotent
	r1.Release()
	r2.Release()
	if st := c.Stats(); st.PinnedUnlinked != 0 {
		t.Fatalf("stats after release %+v", st)
	}
	if got := openFDs(t); got != fds {
		t.Fatalf("open fds %d, want %d: released ranges must close their files", got, fds)
	}
	if _, err := r0.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("ReadAt on a released range succeeded")
	}

	// Pinned chunks are skipped by eviction, unpinned ones go.
	p := mustGet(t, c, "k", obj, 0, 10, true)
	mustGet(t, c, "k", obj, chunk, 10, false)
	mustGet(t, c, "k", obj, 2*chunk, 10, false) // evicts 1, not the pinned 0
	calls := s.calls.Load()
	mustGet(t, c, "k", obj, 0, 10, false)
	if s.calls.Load() != calls {
		t.Fatal("the pinned chunk was evicted")
	}
	p.Release()
}

func TestSingleFlight(t *testing.T) {
	s := newFakeStore()
	obj := s.add("k", 4096, 5)
	b := s.blockAll()
	cfg := testConfig(t, 4096, 8192)
	c := openCache(t, cfg, s)

	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := c.Get(context.Background(), "k", 4096, int64(i*100), 100)
			if err != nil {
				errs <- err
				return
			}
			defer r.Release()
			got := make([]byte, r.Len())
			if _, err := r.ReadAt(got, r.Pos()); err != nil || !bytes.Equal(got, obj[i*100:i*100+100]) {
				errs <- errors.New("wrong bytes")
			}
		}(i)
	}
	waitFor(t, "all Gets to wait", func() bool { return c.Stats().Misses == n })
	b.release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := s.calls.Load(); got != 1 {
		t.Fatalf("fetches = %d, want 1", got)
	}
}

func TestSizeMismatchRefetches(t *testing.T) {
	s := newFakeStore()
	obj := s.add("k", 1500, 6)
	cfg := testConfig(t, 1024, 8192)
	c := openCache(t, cfg, s)
	mustGet(t, c, "k", obj, 1024, 100, false)
	// The caller now says the object is longer: the cached last chunk
	// (476 bytes) cannot be it.
	obj = s.add("k", 1800, 6)
	r := mustGet(t, c, "k", obj, 1024, 1000, true)
	if r.Len() != 776 || s.calls.Load() != 2 {
		t.Fatalf("Len %d, fetches %d", r.Len(), s.calls.Load())
	}
	r.Release()
	st := c.Stats()
	if n, names := dirFiles(t, cfg.Dir); n != 776 || st.CachedBytes != 776 {
		t.Fatalf("directory %v holds %d bytes, stats %+v; want only the new 776-byte chunk", names, n, st)
	}
}

func TestDropWhileFetching(t *testing.T) {
	s := newFakeStore()
	obj := s.add("k", 2048, 20)
	b := s.blockAll()
	cfg := testConfig(t, 1024, 8192)
	c := openCache(t, cfg, s)
	got := make(chan chunkcache.FileRange, 1)
	go func() {
		r, err := c.Get(context.Background(), "k", 2048, 1024, 1024)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitFor(t, "the fetch to start", func() bool { return b.entered.Load() == 1 })
	c.Drop("k")
	b.release()
	r := <-got
	if r == nil {
		t.FailNow()
	}
	// The waiter is served, but the dropped chunk is not cached.
	if !bytes.Equal(read(t, r), obj[1024:]) {
		t.Fatal("wrong bytes")
	}
	if st := c.Stats(); st.CachedBytes != 0 || st.PinnedUnlinked != 1024 {
		t.Fatalf("stats %+v", st)
	}
	if _, names := dirFiles(t, cfg.Dir); len(names) != 0 {
		t.Fatalf("directory %v", names)
	}
	r.Release()
	if st := c.Stats(); st.PinnedUnlinked != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNoUselessEviction(t *testing.T) {
	s := newFakeStore()
	const chunk = 1024
	objA := s.add("a", 3*chunk, 24)
	objB := s.add("b", 100, 25)
	objC := s.add("c", 100, 26)
	cfg := testConfigNoReadAhead(t, chunk, 3*chunk)
	c := openCache(t, cfg, s)
	r0 := mustGet(t, c, "a", objA, 0, 10, true)
	r1 := mustGet(t, c, "a", objA, chunk, 10, true)
	rb := mustGet(t, c, "b", objB, 0, 10, true)
	mustGet(t, c, "c", objC, 0, 10, false) // unpinned, 100 bytes
	// Chunk 2 cannot fit even with c gone: c must stay.
	mustGet(t, c, "a", objA, 2*chunk, 10, false)
	if st := c.Stats(); st.Evictions != 0 || st.CachedBytes != 2*chunk+200 {
		t.Fatalf("stats %+v", st)
	}
	calls := s.calls.Load()
	mustGet(t, c, "c", objC, 0, 10, false)
	if s.calls.Load() != calls {
		t.Fatal("c was evicted for nothing")
	}
	// With b released, evicting b and c makes room.
	rb.Release()
	mustGet(t, c, "a", objA, 2*chunk, 10, false)
	if st := c.Stats(); st.Evictions != 2 || st.CachedBytes != 3*chunk {
		t.Fatalf("stats %+v", st)
	}
	r0.Release()
	r1.Release()
}
