package chunkcache_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// fakeStore serves objects from memory through a chunkcache.FetchFunc
// and counts calls; hooks inject latency, errors and wrong lengths.
type fakeStore struct {
	mu      sync.Mutex
	objects map[string][]byte

	calls atomic.Int64

	// before runs first and may block or fail the call.
	before func(ctx context.Context, key string, off, n int64) error
	// mangle may shorten or lengthen what is returned.
	mangle func(key string, off int64, b []byte) []byte
}

func newFakeStore() *fakeStore { return &fakeStore{objects: map[string][]byte{}} }

// add stores a random object of size bytes and returns its bytes.
func (s *fakeStore) add(key string, size int, seed int64) []byte {
	b := make([]byte, size)
	rand.New(rand.NewSource(seed)).Read(b)
	s.mu.Lock()
	s.objects[key] = b
	s.mu.Unlock()
	return b
}

func (s *fakeStore) fetch(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.calls.Add(1)
	if s.before != nil {
		if err := s.before(ctx, key, off, n); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	obj, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", objstore.ErrNotFound, key)
	}
	if off > int64(len(obj)) {
		return nil, fmt.Errorf("range past end")
	}
	b := obj[off:min(off+n, int64(len(obj)))]
	if s.mangle != nil {
		b = s.mangle(key, off, append([]byte(nil), b...))
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// blocker holds fetches until released, honouring ctx.
type blocker struct {
	ch      chan struct{}
	once    sync.Once
	entered atomic.Int64
}

func newBlocker() *blocker { return &blocker{ch: make(chan struct{})} }

func (b *blocker) wait(ctx context.Context) error {
	b.entered.Add(1)
	select {
	case <-b.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// blockAll makes every fetch wait for the returned blocker.
func (s *fakeStore) blockAll() *blocker {
	b := newBlocker()
	s.before = func(ctx context.Context, _ string, _, _ int64) error { return b.wait(ctx) }
	return b
}

func (b *blocker) release() { b.once.Do(func() { close(b.ch) }) }

func testConfig(t *testing.T, chunk, max int64) chunkcache.Config {
	cfg := chunkcache.DefaultConfig(t.TempDir())
	cfg.ChunkBytes = chunk
	cfg.MaxBytes = max
	cfg.FetchTimeout = 10 * time.Second
	return cfg
}

func testConfigNoReadAhead(t *testing.T, chunk, max int64) chunkcache.Config {
	cfg := testConfig(t, chunk, max)
	cfg.ReadAhead = -1
	return cfg
}

func openCache(t *testing.T, cfg chunkcache.Config, s *fakeStore) *chunkcache.Cache {
	t.Helper()
	c, err := chunkcache.Open(cfg, s.fetch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// read returns the range's bytes (through ReadAt, as the copy path does).
func read(t *testing.T, r chunkcache.FileRange) []byte {
	t.Helper()
	b := make([]byte, r.Len())
	if n, err := r.ReadAt(b, r.Pos()); n != len(b) {
		t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", len(b), r.Pos(), n, err)
	}
	return b
}

// mustGet gets and checks the bytes against the object, releasing the
// range unless keep.
func mustGet(t *testing.T, c *chunkcache.Cache, key string, obj []byte, off int64, max int32, keep bool) chunkcache.FileRange {
	t.Helper()
	r, err := c.Get(context.Background(), key, int64(len(obj)), off, max)
	if err != nil {
		t.Fatalf("Get(%s, %d, %d): %v", key, off, max, err)
	}
	if got, want := read(t, r), obj[off:off+int64(r.Len())]; !bytes.Equal(got, want) {
		t.Fatalf("Get(%s, %d, %d): wrong bytes", key, off, max)
	}
	if !keep {
		r.Release()
		return nil
	}
	return r
}

// dirFiles lists the cache directory: chunk files' total size, and every
// name.
func dirFiles(t *testing.T, dir string) (chunkBytes int64, names []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if os.IsNotExist(err) {
			continue // evicted since ReadDir (read-ahead still landing)
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name())
		if strings.HasSuffix(e.Name(), ".chunk") {
			chunkBytes += info.Size()
		}
	}
	return chunkBytes, names
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, what, cond)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

func chunkPaths(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.chunk"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
