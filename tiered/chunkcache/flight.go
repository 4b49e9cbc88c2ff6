package chunkcache

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/ringlog/ringlog/tiered/objstore"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// startLocked starts a flight for ch: verification of a chunk found at
// Open, else a fetch. Lock should be held (and the cache open, so that
// Close's Wait cannot have begun).
func (c *Cache) startLocked(ch *chunk, key string, readAhead bool) {
	verify := ch.state == stateUnverified
	ch.state = stateLoading
	ch.done = make(chan struct{})
	ch.err = nil
	ch.readAhead = readAhead
	c.wg.Add(1)
	go c.run(ch, key, verify, readAhead)
}

// run is one flight. It owns the file it opens until it hands it over
// under the lock.
func (c *Cache) run(ch *chunk, key string, verify, readAhead bool) {
	defer c.wg.Done()
	if readAhead {
		defer func() { <-c.raSem }()
	}
	if verify {
		f, err := verifyFile(ch.path, ch.size, ch.crc)
		c.mu.Lock()
		if err == nil {
			c.handOverLocked(ch, f)
			c.mu.Unlock()
			return
		}
		// Not the bytes its name promises: fetch them again.
		c.stats.CorruptChunks++
		c.unlinkLocked(ch) // no-op if Drop already did
		ch.path = ""
		c.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.FetchTimeout)
	defer cancel()
	f, tmp, crc, err := c.fetchChunk(ctx, key, ch)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		// Whatever the fetch did (Close cancelled it, most likely), its
		// waiters are told the cache closed.
		if err == nil {
			f.close()
			os.Remove(tmp)
		}
		err = ErrClosed
	}
	if err != nil {
		c.failLocked(ch, err)
		return
	}
	c.stats.FetchedBytes += uint64(ch.size)
	ch.crc = crc
	if !ch.dropped && c.evictLocked(ch.size) {
		final := filepath.Join(c.cfg.Dir, chunkName(ch.id, ch.size, crc))
		if os.Rename(tmp, final) == nil {
			ch.path = final
			ch.resident = true
			ch.elem = c.lru.PushFront(ch)
			c.bytes += ch.size
			c.handOverLocked(ch, f)
			return
		}
	}
	// Dropped meanwhile, no room (everything pinned) or rename failed:
	// serve the waiters from the unlinked file, keep nothing.
	os.Remove(tmp)
	if c.index[ch.id] == ch {
		delete(c.index, ch.id)
	}
	c.handOverLocked(ch, f)
}

// handOverLocked ends a successful flight: pinned chunks get the open
// file, others close it. Lock should be held.
func (c *Cache) handOverLocked(ch *chunk, f *roFile) {
	ch.state = stateReady
	if ch.refs == 0 {
		f.close() // a read-ahead nobody waits for, or every waiter gave up
	} else {
		ch.f = f
		if !ch.resident {
			ch.unlinked = true
			c.pinnedUnlinked += ch.size
		}
	}
	close(ch.done)
}

// failLocked ends a failed flight: waiters get err, nothing is cached.
// Lock should be held.
func (c *Cache) failLocked(ch *chunk, err error) {
	if c.index[ch.id] == ch {
		delete(c.index, ch.id)
	}
	ch.state = stateReady
	ch.err = err
	if !c.closed {
		if errors.Is(err, objstore.ErrCorrupt) {
			c.stats.CorruptChunks++
		}
		if ch.readAhead {
			c.stats.ReadAheadErrors++
		} else {
			c.stats.FetchErrors++
		}
	}
	close(ch.done)
}

// fetchChunk reads ch from the store into a temp file of exactly ch.size
// bytes and returns it open read-only, with its path and the CRC-32C of
// its bytes. On error nothing is left on disk.
func (c *Cache) fetchChunk(ctx context.Context, key string, ch *chunk) (*roFile, string, uint32, error) {
	where := fmt.Sprintf("chunkcache: object %q bytes [%d, %d)", key, ch.id.off, ch.id.off+ch.size)
	rc, err := c.fetch(ctx, key, ch.id.off, ch.size)
	if err == nil && rc == nil {
		err = errors.New("no reader and no error")
	}
	if err != nil {
		return nil, "", 0, fetchError(ctx, where, err)
	}
	defer rc.Close()
	w, err := os.CreateTemp(c.cfg.Dir, tmpPattern)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%s: %w", where, err)
	}
	tmp := w.Name()
	h := crc32.New(castagnoli)
	// One byte past the chunk tells a long answer from an exact one.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(rc, ch.size+1))
	var pe *os.PathError
	switch {
	case err != nil && errors.As(err, &pe):
		err = fmt.Errorf("%s: writing cache file: %w", where, err) // local disk
	case err != nil:
		err = fetchError(ctx, where, err)
	case n != ch.size:
		err = fmt.Errorf("%w: %s: the store returned %d bytes", objstore.ErrCorrupt, where, n)
	}
	var f *roFile
	if err == nil {
		// The reading descriptor is opened before the rename or unlink
		// that follows, so it is the same file either way.
		f, err = openRO(tmp)
	}
	if cerr := w.Close(); err == nil && cerr != nil {
		f.close()
		err = fmt.Errorf("%s: writing cache file: %w", where, cerr)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, "", 0, err
	}
	return f, tmp, h.Sum32(), nil
}

// fetchError wraps a store failure so that callers can tell its kind
// with errors.Is: the store's own errors and context errors pass
// through; anything else (a connection broken mid-body) is unavailability.
func fetchError(ctx context.Context, where string, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()),
		errors.Is(err, objstore.ErrNotFound), errors.Is(err, objstore.ErrUnavailable),
		errors.Is(err, objstore.ErrCorrupt):
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %w: %w", where, objstore.ErrUnavailable, err)
}

// verifyFile opens a chunk found at Open and checks its length and CRC.
func verifyFile(path string, size int64, crc uint32) (*roFile, error) {
	f, err := openRO(path)
	if err != nil {
		return nil, err
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(f, 0, size+1))
	if err == nil && (n != size || h.Sum32() != crc) {
		err = fmt.Errorf("chunkcache: %s: %d bytes, crc %08x, want %d bytes, crc %08x", path, n, h.Sum32(), size, crc)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}
