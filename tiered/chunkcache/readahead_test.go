package chunkcache_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ringlog/ringlog/tiered/chunkcache"
)

func TestReadAheadOnlyWhenSequential(t *testing.T) {
	s := newFakeStore()
	const chunk = 1024
	obj := s.add("k", 10*chunk, 7)
	c := openCache(t, testConfig(t, chunk, 100*chunk), s)

	// Random access: 6, 4, 8, 0: no chunk follows the one before.
	for _, i := range []int64{6, 4, 8, 0} {
		mustGet(t, c, "k", obj, i*chunk, 10, false)
	}
	if st := c.Stats(); st.ReadAheadFetches != 0 || s.calls.Load() != 4 {
		t.Fatalf("random reads started read-ahead: %+v, fetches %d", st, s.calls.Load())
	}
	// 0 then 1 is sequential: 2 is fetched in the background.
	mustGet(t, c, "k", obj, 1*chunk, 10, false)
	waitFor(t, "read-ahead of chunk 2", func() bool { return c.Stats().CachedChunks == 6 })
	if st := c.Stats(); st.ReadAheadFetches != 1 || s.calls.Load() != 6 {
		t.Fatalf("stats %+v, fetches %d", st, s.calls.Load())
	}
	mustGet(t, c, "k", obj, 2*chunk, 10, false)
	if st := c.Stats(); st.Hits != 1 {
		t.Fatalf("chunk 2 should be a hit: %+v", st)
	}
	// And reading 2 read ahead 3 (4 is not needed yet: ReadAhead 1).
	waitFor(t, "read-ahead of chunk 3", func() bool { return c.Stats().ReadAheadFetches == 2 && s.calls.Load() == 7 })

	// A chunk merely read ahead, never served, does not make its
	// successor sequential: a Get of 4 (after 3 that nobody read) does
	// not read ahead 5.
	mustGet(t, c, "k", obj, 4*chunk, 10, false)
	if st := c.Stats(); st.ReadAheadFetches != 2 {
		t.Fatalf("read ahead after an unread chunk: %+v", st)
	}
	// Read-ahead stops at the object's end.
	mustGet(t, c, "k", obj, 9*chunk, 10, false)
	if st := c.Stats(); st.ReadAheadFetches != 2 {
		t.Fatalf("read ahead past the end: %+v", st)
	}
}

func TestReadAheadDepth(t *testing.T) {
	s := newFakeStore()
	const chunk = 512
	obj := s.add("k", 6*chunk, 8)
	cfg := testConfig(t, chunk, 100*chunk)
	cfg.ReadAhead = 2
	c := openCache(t, cfg, s)
	mustGet(t, c, "k", obj, 0, 10, false)
	mustGet(t, c, "k", obj, chunk, 10, false)
	waitFor(t, "chunks 2 and 3 read ahead", func() bool { return c.Stats().CachedChunks == 4 })
	calls := s.calls.Load()
	mustGet(t, c, "k", obj, 2*chunk, 10, false)
	mustGet(t, c, "k", obj, 3*chunk, 10, false)
	waitFor(t, "chunks 4 and 5 read ahead", func() bool { return c.Stats().CachedChunks == 6 })
	if st := c.Stats(); st.Hits != 2 || st.ReadAheadFetches != 4 || s.calls.Load() != calls+2 {
		t.Fatalf("stats %+v, fetches %d", st, s.calls.Load())
	}
}

func TestReadAheadBoundedAndSilent(t *testing.T) {
	s := newFakeStore()
	const chunk = 256
	b := newBlocker()
	// Chunk 2 of every key (only ever read ahead here) blocks, then fails.
	s.before = func(ctx context.Context, _ string, off, _ int64) error {
		if off == 2*chunk {
			if err := b.wait(ctx); err != nil {
				return err
			}
			return errors.New("injected read-ahead failure")
		}
		return nil
	}
	cfg := testConfig(t, chunk, 1000*chunk)
	cfg.ReadAheadConcurrency = 2
	c := openCache(t, cfg, s)
	objs := map[string][]byte{}
	for i := 0; i < 6; i++ {
		key := fmt.Sprintf("t/%d/seg.log", i)
		objs[key] = s.add(key, 4*chunk, int64(i))
		mustGet(t, c, key, objs[key], 0, 10, false)
		mustGet(t, c, key, objs[key], chunk, 10, false)
	}
	waitFor(t, "two read-aheads blocked", func() bool { return b.entered.Load() == 2 })
	st := c.Stats()
	if st.ReadAheadFetches != 2 || st.ReadAheadSkipped != 4 {
		t.Fatalf("stats %+v: want 2 read-aheads in flight, 4 skipped", st)
	}
	b.release()
	waitFor(t, "read-aheads to fail", func() bool { return c.Stats().ReadAheadErrors == 2 })
	if st := c.Stats(); st.FetchErrors != 0 || b.entered.Load() != 2 {
		t.Fatalf("stats %+v, read-ahead fetches started %d", st, b.entered.Load())
	}
	// Nothing was cached for the failed chunks: a foreground Get fetches
	// them and sees the failure itself.
	s.before = nil
	for key, obj := range objs {
		mustGet(t, c, key, obj, 2*chunk, 10, false)
	}
	if st := c.Stats(); st.FetchErrors != 0 || st.ReadAheadErrors != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestForegroundJoinsReadAhead(t *testing.T) {
	s := newFakeStore()
	const chunk = 256
	obj := s.add("k", 4*chunk, 9)
	b := newBlocker()
	s.before = func(ctx context.Context, _ string, off, _ int64) error {
		if off == 2*chunk {
			if err := b.wait(ctx); err != nil {
				return err
			}
			return errors.New("injected failure")
		}
		return nil
	}
	c := openCache(t, testConfig(t, chunk, 100*chunk), s)
	mustGet(t, c, "k", obj, 0, 10, false)
	mustGet(t, c, "k", obj, chunk, 10, false)
	waitFor(t, "read-ahead in flight", func() bool { return b.entered.Load() == 1 })
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), "k", int64(len(obj)), 2*chunk, 10)
		done <- err
	}()
	waitFor(t, "the Get to join", func() bool { return c.Stats().Misses == 3 })
	b.release()
	// The reader waited for that fetch, so its failure is a foreground
	// one and is returned.
	if err := <-done; err == nil {
		t.Fatal("Get joined a failing fetch and succeeded")
	}
	// (Get of 2 after 1 also read ahead 3, which succeeds.)
	waitFor(t, "read-ahead of 3", func() bool { return c.Stats().CachedChunks == 3 })
	if st := c.Stats(); st.FetchErrors != 1 || st.ReadAheadErrors != 0 || st.ReadAheadFetches != 2 || s.calls.Load() != 4 {
		t.Fatalf("stats %+v, fetches %d", st, s.calls.Load())
	}
}

func TestCloseCancelsReadAhead(t *testing.T) {
	s := newFakeStore()
	const chunk = 256
	obj := s.add("k", 4*chunk, 27)
	cancelled := make(chan error, 1)
	s.before = func(ctx context.Context, _ string, off, _ int64) error {
		if off < 2*chunk {
			return nil
		}
		<-ctx.Done() // a hung store: only Close ends this
		cancelled <- ctx.Err()
		return ctx.Err()
	}
	cfg := testConfig(t, chunk, 100*chunk)
	c, err := chunkcache.Open(cfg, s.fetch)
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "k", obj, 0, 10, false)
	mustGet(t, c, "k", obj, chunk, 10, false)
	waitFor(t, "the read-ahead to start", func() bool { return s.calls.Load() == 3 })
	start := time.Now()
	c.Close()
	if err := <-cancelled; !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("read-ahead ended with %v after %v", err, time.Since(start))
	}
	if st := c.Stats(); st.ReadAheadErrors != 0 || st.FetchErrors != 0 {
		t.Fatalf("a cancelled read-ahead was counted as failed: %+v", st)
	}
	if _, names := dirFiles(t, cfg.Dir); len(names) != 2 {
		t.Fatalf("directory %v, want the two chunks read", names)
	}
}
