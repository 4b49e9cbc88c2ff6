package chunkcache_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

func TestWrongLengthIsCorruptAndNotCached(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mangle func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:len(b)-1] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"long", func(b []byte) []byte { return append(b, 'x') }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeStore()
			obj := s.add("k", 3000, 10)
			cfg := testConfig(t, 1024, 8192)
			c := openCache(t, cfg, s)
			s.mangle = func(_ string, _ int64, b []byte) []byte { return tc.mangle(b) }
			_, err := c.Get(context.Background(), "k", int64(len(obj)), 1500, 10)
			if !errors.Is(err, objstore.ErrCorrupt) {
				t.Fatalf("Get = %v, want ErrCorrupt", err)
			}
			if _, names := dirFiles(t, cfg.Dir); len(names) != 0 {
				t.Fatalf("a corrupt fetch left files: %v", names)
			}
			st := c.Stats()
			if st.CorruptChunks != 1 || st.FetchErrors != 1 || st.CachedBytes != 0 {
				t.Fatalf("stats %+v", st)
			}
			s.mangle = nil
			mustGet(t, c, "k", obj, 1500, 10, false)
			if s.calls.Load() != 2 {
				t.Fatalf("fetches = %d, want 2 (failure not cached)", s.calls.Load())
			}
		})
	}
}

func TestFetchErrorsKeepTheirKind(t *testing.T) {
	s := newFakeStore()
	c := openCache(t, testConfig(t, 1024, 8192), s)
	// Missing object: the store's ErrNotFound reaches the caller.
	if _, err := c.Get(context.Background(), "gone", 100, 0, 10); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
	// An error the store did not classify (a body broken mid-way) is
	// unavailability: the reader retries.
	s.add("k", 100, 11)
	s.before = func(context.Context, string, int64, int64) error { return errors.New("connection reset") }
	_, err := c.Get(context.Background(), "k", 100, 0, 10)
	if !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "connection reset") || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("unclassified error: %v", err)
	}
	if st := c.Stats(); st.FetchErrors != 2 || st.CorruptChunks != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A FetchFunc breaking its contract is an error, not a panic.
	nilFetch := func(context.Context, string, int64, int64) (io.ReadCloser, error) { return nil, nil }
	c2, err := chunkcache.Open(testConfig(t, 1024, 8192), nilFetch)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Get(context.Background(), "k", 100, 0, 10); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("nil reader: %v", err)
	}
}

func TestContextCancelWhileFetching(t *testing.T) {
	s := newFakeStore()
	obj := s.add("k", 1024, 12)
	b := s.blockAll()
	cfg := testConfig(t, 1024, 8192)
	c := openCache(t, cfg, s)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Get(ctx, "k", 1024, 0, 10)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("Get = %v after %v, want DeadlineExceeded promptly", err, time.Since(start))
	}
	// The fetch goes on for the next reader and is cached.
	b.release()
	waitFor(t, "the abandoned fetch to be cached", func() bool { return c.Stats().CachedChunks == 1 })
	mustGet(t, c, "k", obj, 0, 10, false)
	if s.calls.Load() != 1 {
		t.Fatalf("fetches = %d, want 1", s.calls.Load())
	}
	if n, names := dirFiles(t, cfg.Dir); n != 1024 || len(names) != 1 {
		t.Fatalf("directory %v", names)
	}
}

func TestFetchTimeout(t *testing.T) {
	s := newFakeStore()
	s.add("k", 1024, 13)
	s.before = func(ctx context.Context, _ string, _, _ int64) error { <-ctx.Done(); return ctx.Err() }
	cfg := testConfig(t, 1024, 8192)
	cfg.FetchTimeout = 20 * time.Millisecond
	c := openCache(t, cfg, s)
	if _, err := c.Get(context.Background(), "k", 1024, 0, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get = %v, want the fetch's deadline", err)
	}
}

func TestCloseCancelsAndReleasesEverything(t *testing.T) {
	s := newFakeStore()
	obj := s.add("k", 4096, 14)
	var cancelled sync.WaitGroup
	cancelled.Add(1)
	s.before = func(ctx context.Context, _ string, off, _ int64) error {
		if off == 0 {
			return nil
		}
		<-ctx.Done() // only Close ends this fetch
		cancelled.Done()
		return ctx.Err()
	}
	cfg := testConfigNoReadAhead(t, 1024, 8192)
	fds := openFDs(t)
	c, err := chunkcache.Open(cfg, s.fetch)
	if err != nil {
		t.Fatal(err)
	}
	held := mustGet(t, c, "k", obj, 0, 100, true)
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), "k", 4096, 2048, 10)
		waiter <- err
	}()
	waitFor(t, "the fetch to start", func() bool { return s.calls.Load() == 2 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cancelled.Wait()
	if err := <-waiter; !errors.Is(err, chunkcache.ErrClosed) {
		t.Fatalf("waiting Get = %v, want ErrClosed", err)
	}
	if _, err := c.Get(context.Background(), "k", 4096, 0, 10); !errors.Is(err, chunkcache.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	// A range handed out before Close stays readable until released.
	if got := read(t, held); string(got) != string(obj[:100]) {
		t.Fatal("held range unreadable after Close")
	}
	held.Release()
	if got := openFDs(t); got != fds {
		t.Fatalf("open fds %d, want %d", got, fds)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	// No temp file of the cancelled fetch is left.
	if _, names := dirFiles(t, cfg.Dir); len(names) != 1 || !strings.HasSuffix(names[0], ".chunk") {
		t.Fatalf("directory after Close: %v", names)
	}
}

func TestRestartReusesVerifiedChunks(t *testing.T) {
	s := newFakeStore()
	const chunk = 1024
	objA := s.add("t/0/a.log", 3*chunk, 15)
	objB := s.add("t/0/b.log", 2*chunk+100, 16)
	cfg := testConfigNoReadAhead(t, chunk, 100*chunk)
	c1, err := chunkcache.Open(cfg, s.fetch)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		mustGet(t, c1, "t/0/a.log", objA, i*chunk, 10, false)
	}
	mustGet(t, c1, "t/0/b.log", objB, 2*chunk, 10, false)
	c1.Close()

	// Leftovers of a crash, a torn chunk (size disagrees with its name),
	// a chunk whose bytes rotted (size right, CRC wrong), and a file that
	// is not the cache's.
	paths := chunkPaths(t, cfg.Dir)
	if len(paths) != 4 {
		t.Fatalf("%d chunk files, want 4", len(paths))
	}
	tmp := filepath.Join(cfg.Dir, "chunk-123.tmp")
	foreign := filepath.Join(cfg.Dir, "notes.txt")
	for _, p := range []string{tmp, foreign} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sizes := map[string]int64{}
	for _, p := range paths {
		info, _ := os.Stat(p)
		sizes[p] = info.Size()
	}
	var torn, rotten string
	for _, p := range paths {
		if sizes[p] == chunk && torn == "" {
			torn = p
		} else if sizes[p] == chunk && rotten == "" {
			rotten = p
		}
	}
	if err := os.Truncate(torn, 10); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(rotten)
	b[7] ^= 0xff
	if err := os.WriteFile(rotten, b, 0o644); err != nil {
		t.Fatal(err)
	}

	calls := s.calls.Load()
	c2 := openCache(t, cfg, s)
	_, names := dirFiles(t, cfg.Dir)
	for _, n := range names {
		if n == "chunk-123.tmp" || n == filepath.Base(torn) {
			t.Fatalf("Open kept %s", n)
		}
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatal("Open removed a file that is not the cache's:", err)
	}
	if st := c2.Stats(); st.CachedChunks != 3 || st.CachedBytes != 2*chunk+100 {
		t.Fatalf("stats after reopen %+v", st)
	}
	// Every chunk reads right: two of the three A chunks and B's come from
	// disk, the torn and the rotten one are fetched again.
	for i := int64(0); i < 3; i++ {
		mustGet(t, c2, "t/0/a.log", objA, i*chunk+5, 100, false)
	}
	mustGet(t, c2, "t/0/b.log", objB, 2*chunk, 100, false)
	if got := s.calls.Load() - calls; got != 2 {
		t.Fatalf("fetches after reopen = %d, want 2 (torn and rotten chunk)", got)
	}
	if st := c2.Stats(); st.CorruptChunks != 1 {
		t.Fatalf("stats %+v: want the rotten chunk counted", st)
	}
	// Verified once: later Gets are plain hits.
	before := c2.Stats().Hits
	mustGet(t, c2, "t/0/a.log", objA, 0, 100, false)
	if c2.Stats().Hits != before+1 {
		t.Fatal("a verified chunk is not a hit")
	}
}

func TestRestartWithOtherChunkSizeOrSmallerBound(t *testing.T) {
	s := newFakeStore()
	obj := s.add("k", 8192, 17)
	cfg := testConfigNoReadAhead(t, 1024, 100*1024)
	c1, err := chunkcache.Open(cfg, s.fetch)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 8; i++ {
		mustGet(t, c1, "k", obj, i*1024, 10, false)
	}
	c1.Close()
	// File times are as coarse as the kernel's tick: give each chunk its
	// own, later for later offsets (the name's second field).
	base := time.Now().Add(-time.Hour)
	for _, p := range chunkPaths(t, cfg.Dir) {
		off, err := strconv.ParseInt(strings.Split(filepath.Base(p), "-")[1], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(off) * time.Second)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}

	// A smaller MaxBytes keeps the newest chunks.
	cfg.MaxBytes = 3 * 1024
	c2 := openCache(t, cfg, s)
	if st := c2.Stats(); st.CachedBytes != 3*1024 {
		t.Fatalf("stats %+v", st)
	}
	calls := s.calls.Load()
	for i := int64(5); i < 8; i++ {
		mustGet(t, c2, "k", obj, i*1024, 10, false)
	}
	if s.calls.Load() != calls {
		t.Fatal("the newest chunks were not kept")
	}
	c2.Close()

	// Chunks of 2048: only files at offsets that are multiples of 2048
	// with a length that fits could be reused, and none has the right
	// length, so the chunks are fetched anew and read right.
	cfg.ChunkBytes, cfg.MaxBytes = 2048, 100*1024
	c3 := openCache(t, cfg, s)
	for i := int64(0); i < 4; i++ {
		r := mustGet(t, c3, "k", obj, i*2048, 2048, true)
		if r.Len() != 2048 {
			t.Fatalf("Len %d", r.Len())
		}
		r.Release()
	}
	if n, _ := dirFiles(t, cfg.Dir); n != c3.Stats().CachedBytes {
		t.Fatalf("directory holds %d bytes, stats say %d", n, c3.Stats().CachedBytes)
	}
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	if err := chunkcache.DefaultConfig(dir).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*chunkcache.Config){
		func(c *chunkcache.Config) { c.Dir = "" },
		func(c *chunkcache.Config) { c.ChunkBytes = -1 },
		func(c *chunkcache.Config) { c.ChunkBytes = 2 << 30 },
		func(c *chunkcache.Config) { c.MaxBytes = c.ChunkBytes - 1 },
		func(c *chunkcache.Config) { c.ReadAhead = -2 },
		func(c *chunkcache.Config) { c.ReadAheadConcurrency = 0 },
		func(c *chunkcache.Config) { c.FetchTimeout = -1 },
	} {
		cfg := chunkcache.DefaultConfig(dir)
		mod(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
	if _, err := chunkcache.Open(chunkcache.Config{Dir: dir}, nil); err == nil {
		t.Fatal("Open accepted a nil FetchFunc")
	}
}
