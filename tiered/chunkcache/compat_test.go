package chunkcache_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// The remote reader puts cache ranges into engine.ReadResult.Data: the
// two interfaces must stay identical (this fails to compile otherwise).
var (
	_ engine.FileRange     = chunkcache.FileRange(nil)
	_ chunkcache.FileRange = engine.FileRange(nil)
)

// TestSendfileFromRange sends returned ranges the way netpath's
// plaintext fetch path does (unix.Sendfile at an explicit offset) and
// compares what comes out of the socket, including from a chunk that was
// unlinked while pinned.
func TestSendfileFromRange(t *testing.T) {
	s := newFakeStore()
	const chunk = 64 << 10
	obj := s.add("t/0/seg.log", 3*chunk+999, 18)
	cfg := testConfig(t, chunk, 10*chunk)
	c := openCache(t, cfg, s)

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Skip("socketpair:", err)
	}
	out := os.NewFile(uintptr(fds[0]), "out")
	in := os.NewFile(uintptr(fds[1]), "in")
	defer out.Close()
	defer in.Close()

	for _, tc := range []struct {
		off  int64
		max  int32
		drop bool
	}{{0, chunk, false}, {12345, 40000, false}, {3 * chunk, 1 << 20, false}, {chunk + 7, 1000, true}} {
		r, err := c.Get(context.Background(), "t/0/seg.log", int64(len(obj)), tc.off, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if tc.drop {
			c.Drop("t/0/seg.log")
		}
		got := make([]byte, r.Len())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the socket buffer may be smaller than the range
			defer wg.Done()
			io.ReadFull(in, got)
		}()
		o, left := r.Pos(), int(r.Len())
		for left > 0 {
			n, err := unix.Sendfile(fds[0], r.Fd(), &o, left)
			if err != nil && err != unix.EINTR && err != unix.EAGAIN {
				t.Fatal("sendfile:", err)
			}
			if n == 0 && err == nil {
				t.Fatal("sendfile: EOF before the range's end")
			}
			left -= max(n, 0)
		}
		wg.Wait()
		r.Release()
		if want := obj[tc.off : tc.off+int64(len(got))]; !bytes.Equal(got, want) {
			t.Fatalf("off %d: sendfile sent other bytes", tc.off)
		}
	}
}

// TestConcurrentStress mixes Gets, read-ahead, eviction under a small
// bound, held ranges and Drops across keys, checking every byte, and
// then the size accounting against the directory.
func TestConcurrentStress(t *testing.T) {
	s := newFakeStore()
	const chunk = 512
	keys := make([]string, 4)
	objs := make([][]byte, 4)
	for i := range keys {
		keys[i] = fmt.Sprintf("topic/%d/%020d-x.log", i, i*1000)
		objs[i] = s.add(keys[i], 9*chunk+i*37, int64(100+i))
	}
	cfg := testConfig(t, chunk, 5*chunk)
	cfg.ReadAhead = 2
	c := openCache(t, cfg, s)
	fdsBefore := openFDs(t)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			var held []chunkcache.FileRange
			for i := 0; i < 300; i++ {
				k := rng.Intn(len(keys))
				obj := objs[k]
				var off int64
				if g%2 == 0 { // sequential readers
					off = int64(i*200) % int64(len(obj))
				} else {
					off = rng.Int63n(int64(len(obj)))
				}
				if rng.Intn(50) == 0 {
					c.Drop(keys[k])
				}
				r, err := c.Get(context.Background(), keys[k], int64(len(obj)), off, int32(1+rng.Intn(700)))
				if err != nil {
					errs <- err
					return
				}
				b := make([]byte, r.Len())
				if _, err := r.ReadAt(b, r.Pos()); err != nil || !bytes.Equal(b, obj[off:off+int64(len(b))]) {
					errs <- fmt.Errorf("key %d off %d: wrong bytes (%v)", k, off, err)
					return
				}
				held = append(held, r)
				if len(held) > 3 || rng.Intn(2) == 0 {
					held[0].Release()
					held = held[1:]
				}
			}
			for _, r := range held {
				r.Release()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Read-aheads may still be landing; then every file is closed.
	waitFor(t, "read-aheads to settle", func() bool {
		st := c.Stats()
		n, names := dirFiles(t, cfg.Dir)
		return n == st.CachedBytes && len(names) == st.CachedChunks && openFDs(t) == fdsBefore
	})
	st := c.Stats()
	if st.CachedBytes > cfg.MaxBytes || st.PinnedUnlinked != 0 || st.Evictions == 0 || st.ReadAheadFetches == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// BenchmarkGetHit measures a Get of a cached chunk and its Release: what
// a fetch from a warm cache costs on top of the send.
func BenchmarkGetHit(b *testing.B) {
	s := newFakeStore()
	obj := s.add("k", 4<<20, 19)
	cfg := chunkcache.DefaultConfig(b.TempDir())
	c, err := chunkcache.Open(cfg, s.fetch)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	r, err := c.Get(ctx, "k", int64(len(obj)), 0, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	r.Release()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := c.Get(ctx, "k", int64(len(obj)), int64(i%4)<<20, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	b.StopTimer()
	if s.calls.Load() != 1 {
		b.Fatalf("fetches = %d, want 1", s.calls.Load())
	}
}

// An objstore.Store's GetRange is a FetchFunc: the broker passes
// store.GetRange to Open.
func _(s objstore.Store) chunkcache.FetchFunc { return s.GetRange }
