package chunkcache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// FetchFunc reads n bytes of the object key from byte off; it has the
// shape of objstore.Store.GetRange. The caller closes the reader.
type FetchFunc func(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)

// Errors of the cache itself; fetch failures are returned wrapped as the
// FetchFunc (or the length check: objstore.ErrCorrupt) produced them.
var (
	ErrClosed       = errors.New("chunkcache: cache closed")
	ErrInvalidRange = errors.New("chunkcache: invalid range")
)

// Stats are the cache's counters for metrics (monotonic unless noted).
type Stats struct {
	Hits             uint64 // Gets served from a chunk already cached and verified
	Misses           uint64 // Gets that had to wait for a fetch or a verification
	ReadAheadFetches uint64 // read-ahead fetches started
	ReadAheadSkipped uint64 // read-aheads not started: ReadAheadConcurrency in flight
	ReadAheadErrors  uint64 // read-ahead fetches that failed, nobody waiting (silent)
	Evictions        uint64 // chunks removed to make room (not Drop)
	FetchErrors      uint64 // failed fetches a Get was waiting for
	CorruptChunks    uint64 // fetches of the wrong length, cached chunks failing their CRC
	FetchedBytes     uint64 // bytes fetched from the store
	SpanCopies       uint64 // GetSpan ranges copied because they crossed chunks
	CachedBytes      int64  // gauge: bytes of chunk files in the directory (<= MaxBytes)
	CachedChunks     int    // gauge: number of those files
	PinnedUnlinked   int64  // gauge: bytes of unlinked files still pinned by ranges
}

// chunk states.
const (
	stateLoading    = iota // a flight is fetching or verifying it; done is open
	stateReady             // verified file at path (or unlinked, if !resident)
	stateUnverified        // found at Open; its CRC is checked on first use
)

// chunk is one chunk of one object. id and size never change; the other
// fields are guarded by Cache.mu (a flight reads path and crc of a chunk
// found at Open without it: nothing else writes them while it runs).
type chunk struct {
	id   chunkID
	size int64
	crc  uint32
	path string // the chunk file; "" until a fetch named it

	state     int
	done      chan struct{} // closed when the current flight finished
	err       error         // the flight's error, for its waiters
	readAhead bool          // the current flight is a read-ahead
	dropped   bool          // Drop or a size mismatch removed it while loading

	f        *roFile // open while refs > 0 (and handed over by a flight)
	refs     int     // pins: ranges not released, and Gets waiting
	resident bool    // its file is in the directory and counted in bytes
	unlinked bool    // pinned but no longer on disk by name: counted in pinnedUnlinked
	served   bool    // a Get returned it (sequential-read detection)
	elem     *list.Element
}

// Cache is an on-disk LRU cache of object chunks (see the package doc).
type Cache struct {
	cfg   Config
	fetch FetchFunc

	ctx    context.Context // cancelled by Close: every fetch runs under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // flights in flight
	raSem  chan struct{}  // read-ahead slots

	mu             sync.Mutex
	closed         bool
	index          map[chunkID]*chunk // resident and loading chunks
	lru            *list.List         // resident chunks, most recent first
	bytes          int64              // resident bytes
	pinnedUnlinked int64
	stats          Stats
}

// closedChan is the done channel of chunks that need no waiting.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Open opens (creating it if needed) the cache directory, removes leftover
// temp files and chunk files that are unusable under cfg, and keeps the
// others for reuse. fetch reads from the object store.
func Open(cfg Config, fetch FetchFunc) (*Cache, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if fetch == nil {
		return nil, errors.New("chunkcache: nil FetchFunc")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("chunkcache: %w", err)
	}
	c := &Cache{
		cfg:   cfg,
		fetch: fetch,
		raSem: make(chan struct{}, cfg.ReadAheadConcurrency),
		index: make(map[chunkID]*chunk),
		lru:   list.New(),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.load(); err != nil {
		c.cancel()
		return nil, err
	}
	return c, nil
}

// load scans the directory at Open.
func (c *Cache) load() error {
	entries, err := os.ReadDir(c.cfg.Dir)
	if err != nil {
		return fmt.Errorf("chunkcache: %w", err)
	}
	type found struct {
		ch    *chunk
		mtime time.Time
	}
	var keep []found
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(c.cfg.Dir, name)
		if isTempName(name) {
			os.Remove(path)
			continue
		}
		if filepath.Ext(name) != chunkSuffix || !e.Type().IsRegular() {
			continue // not ours
		}
		id, size, crc, ok := parseChunkName(name)
		info, err := e.Info()
		if !ok || err != nil || info.Size() != size || size <= 0 || size > c.cfg.ChunkBytes ||
			id.off%c.cfg.ChunkBytes != 0 || c.index[id] != nil {
			os.Remove(path)
			continue
		}
		ch := &chunk{id: id, size: size, crc: crc, path: path, state: stateUnverified, done: closedChan, resident: true}
		c.index[id] = ch
		keep = append(keep, found{ch, info.ModTime()})
	}
	// Most recently written first; the oldest go if MaxBytes shrank.
	sort.Slice(keep, func(i, j int) bool { return keep[i].mtime.After(keep[j].mtime) })
	for _, k := range keep {
		k.ch.elem = c.lru.PushBack(k.ch)
		c.bytes += k.ch.size
	}
	c.mu.Lock()
	c.evictLocked(0)
	c.mu.Unlock()
	return nil
}

// Get returns the bytes of object key (objectSize bytes long) from off, at
// most max of them and never past the end of off's chunk, as a range of
// the chunk file. The range pins the chunk until Release. A miss fetches
// the chunk (once, whoever else asks for it meanwhile); a Get of the
// chunk after the one a previous Get returned starts read-ahead. Errors:
// ErrInvalidRange, ErrClosed, ctx's error, or the fetch's error (wrapping
// objstore.ErrCorrupt when the store returned the wrong number of bytes).
func (c *Cache) Get(ctx context.Context, key string, objectSize, off int64, max int32) (FileRange, error) {
	if off < 0 || off >= objectSize || max <= 0 {
		return nil, fmt.Errorf("%w: %d bytes at %d of an object of %d bytes", ErrInvalidRange, max, off, objectSize)
	}
	idx := off / c.cfg.ChunkBytes
	id := chunkID{hashKey(key), idx * c.cfg.ChunkBytes}
	size := min(c.cfg.ChunkBytes, objectSize-id.off)
	// A ready chunk whose file vanished (deleted behind our back) is
	// dropped and fetched again: one retry is enough.
	for attempt := 0; ; attempt++ {
		ch, err := c.pin(key, id, size, objectSize, idx)
		if err != nil {
			return nil, err
		}
		select {
		case <-ch.done:
		default:
			select {
			case <-ch.done:
			case <-ctx.Done():
				c.unpin(ch)
				return nil, ctx.Err()
			}
		}
		r, retry, err := c.serve(ch, off-id.off, max)
		if retry && attempt == 0 {
			continue
		}
		return r, err
	}
}

// pin finds or starts the chunk's flight and pins it, starting read-ahead
// when the access is sequential.
func (c *Cache) pin(key string, id chunkID, size, objectSize, idx int64) (*chunk, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	ch := c.index[id]
	if ch != nil && ch.size != size {
		// The caller's object size disagrees with the cached chunk: the
		// object changed under its key. Trust the caller.
		c.removeLocked(ch)
		ch = nil
	}
	switch {
	case ch == nil:
		c.stats.Misses++
		ch = &chunk{id: id, size: size}
		c.index[id] = ch
		c.startLocked(ch, key, false)
	case ch.state == stateUnverified:
		c.stats.Misses++
		c.startLocked(ch, key, false)
	case ch.state == stateLoading:
		c.stats.Misses++
		// A reader caught up with read-ahead: the fetch is now a
		// foreground one, and its failure is counted as such.
		ch.readAhead = false
	default:
		c.stats.Hits++
	}
	ch.refs++
	c.readAheadLocked(key, id, objectSize, idx)
	return ch, nil
}

// serve turns a pinned, finished chunk into a range. retry says the
// chunk's file had vanished and was dropped.
func (c *Cache) serve(ch *chunk, pos int64, max int32) (FileRange, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.err != nil {
		err := ch.err
		c.unpinLocked(ch)
		return nil, false, err
	}
	if c.closed {
		c.unpinLocked(ch)
		return nil, false, ErrClosed
	}
	if ch.f == nil {
		// Opened under the lock so Drop cannot unlink the file between
		// the check and the open.
		f, err := openRO(ch.path)
		if err != nil {
			c.removeLocked(ch)
			c.unpinLocked(ch)
			return nil, true, fmt.Errorf("chunkcache: %w", err)
		}
		ch.f = f
	}
	ch.served = true
	if ch.resident {
		c.lru.MoveToFront(ch.elem)
	}
	n := min(int64(max), ch.size-pos)
	return &chunkRange{c: c, ch: ch, f: ch.f, pos: pos, n: int32(n)}, false, nil
}

// unpin drops one pin; the last one closes the file.
func (c *Cache) unpin(ch *chunk) {
	c.mu.Lock()
	c.unpinLocked(ch)
	c.mu.Unlock()
}

// Lock should be held.
func (c *Cache) unpinLocked(ch *chunk) {
	ch.refs--
	if ch.refs > 0 || ch.state == stateLoading {
		return // a flight still owns the file it is writing
	}
	if ch.f != nil {
		ch.f.close()
		ch.f = nil
	}
	if ch.unlinked {
		ch.unlinked = false
		c.pinnedUnlinked -= ch.size
	}
}

// readAheadLocked starts background fetches of the chunks after idx when
// the chunk before idx was served to a Get and is still cached: the
// reader is sequential. Lock should be held.
func (c *Cache) readAheadLocked(key string, id chunkID, objectSize, idx int64) {
	if c.cfg.ReadAhead <= 0 || idx == 0 {
		return
	}
	prev := c.index[chunkID{id.hash, id.off - c.cfg.ChunkBytes}]
	if prev == nil || !prev.resident || !prev.served {
		return
	}
	for j := int64(1); j <= int64(c.cfg.ReadAhead); j++ {
		next := chunkID{id.hash, id.off + j*c.cfg.ChunkBytes}
		if next.off >= objectSize {
			return
		}
		if c.index[next] != nil {
			continue
		}
		select {
		case c.raSem <- struct{}{}:
		default:
			c.stats.ReadAheadSkipped++
			return
		}
		c.stats.ReadAheadFetches++
		ch := &chunk{id: next, size: min(c.cfg.ChunkBytes, objectSize-next.off)}
		c.index[next] = ch
		c.startLocked(ch, key, true)
	}
}

// Drop removes the chunks of key from the cache (retention deleted the
// object). Pinned chunks stay readable until released.
func (c *Cache) Drop(key string) {
	h := hashKey(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ch := range c.index {
		if id.hash == h {
			c.removeLocked(ch)
		}
	}
}

// removeLocked takes a chunk out of the index: a loading one is not
// cached when its flight ends, a resident one is unlinked (its open file
// stays valid for the ranges pinning it). Lock should be held.
func (c *Cache) removeLocked(ch *chunk) {
	if c.index[ch.id] == ch {
		delete(c.index, ch.id)
	}
	if ch.state == stateLoading && !ch.resident {
		ch.dropped = true
		return
	}
	if ch.state == stateLoading {
		// Verification in flight of a resident chunk: the flight finds
		// it dropped and does not keep it.
		ch.dropped = true
	}
	c.unlinkLocked(ch)
}

// unlinkLocked deletes a resident chunk's file and forgets it. Lock
// should be held.
func (c *Cache) unlinkLocked(ch *chunk) {
	if !ch.resident {
		return
	}
	ch.resident = false
	c.lru.Remove(ch.elem)
	ch.elem = nil
	c.bytes -= ch.size
	os.Remove(ch.path)
	if ch.f != nil { // pinned ranges keep the blocks until released
		ch.unlinked = true
		c.pinnedUnlinked += ch.size
	}
}

// evictLocked removes least recently used unpinned chunks until need more
// bytes fit under MaxBytes; it reports whether they do. When they cannot
// (too much is pinned) it evicts nothing. Lock should be held.
func (c *Cache) evictLocked(need int64) bool {
	if c.bytes+need <= c.cfg.MaxBytes {
		return true
	}
	pinned := int64(0)
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if ch := e.Value.(*chunk); !evictable(ch) {
			pinned += ch.size
		}
	}
	if pinned+need > c.cfg.MaxBytes {
		return false
	}
	for e := c.lru.Back(); e != nil && c.bytes+need > c.cfg.MaxBytes; {
		ch := e.Value.(*chunk)
		e = e.Prev()
		if !evictable(ch) {
			continue
		}
		delete(c.index, ch.id)
		c.unlinkLocked(ch)
		c.stats.Evictions++
	}
	return c.bytes+need <= c.cfg.MaxBytes
}

// evictable: no range pins it and no flight verifies it. Lock should be
// held.
func evictable(ch *chunk) bool { return ch.refs == 0 && ch.state != stateLoading }

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.CachedBytes = c.bytes
	s.CachedChunks = c.lru.Len()
	s.PinnedUnlinked = c.pinnedUnlinked
	return s
}

// Close cancels fetches in flight and waits for them. Ranges handed out
// stay valid until released (a response may be mid-sendfile); their files
// close then. Cached chunks stay in the directory for the next Open. Get
// returns ErrClosed afterwards.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
