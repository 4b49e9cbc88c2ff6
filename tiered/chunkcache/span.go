package chunkcache

import (
	"context"
	"fmt"
	"io"
	"os"
)

// A fetch must return at least one whole record batch to let a consumer
// progress, and a batch can straddle a chunk boundary, where Get stops.
// The remote reader therefore reads batch headers with ReadAt and, when
// the batches it wants cross a boundary, asks GetSpan for exactly them.

// ReadAt reads len(p) bytes of object key from off through the cache,
// across chunk boundaries (batch headers, index entries). Reading past the
// object's end returns the bytes before it and io.EOF, as io.ReaderAt.
func (c *Cache) ReadAt(ctx context.Context, key string, objectSize int64, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: read at %d", ErrInvalidRange, off)
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= objectSize {
			return n, io.EOF
		}
		r, err := c.Get(ctx, key, objectSize, pos, int32(min(len(p)-n, maxChunkBytes)))
		if err != nil {
			return n, err
		}
		m, err := r.ReadAt(p[n:n+int(r.Len())], r.Pos())
		r.Release()
		n += m
		if err != nil {
			return n, fmt.Errorf("chunkcache: reading cached chunk of %q: %w", key, err)
		}
	}
	return n, nil
}

// GetSpan returns exactly the bytes [off, off+n) of object key as one
// range. Within one chunk it is Get. Across chunks the bytes are copied
// into an unlinked file of the cache directory that lives until Release
// (counted in Stats.PinnedUnlinked and SpanCopies): the price of keeping
// one descriptor per range for sendfile, paid once per batch that
// straddles a boundary.
func (c *Cache) GetSpan(ctx context.Context, key string, objectSize, off int64, n int32) (FileRange, error) {
	if off < 0 || n <= 0 || off+int64(n) > objectSize {
		return nil, fmt.Errorf("%w: span of %d bytes at %d of an object of %d bytes", ErrInvalidRange, n, off, objectSize)
	}
	if off/c.cfg.ChunkBytes == (off+int64(n)-1)/c.cfg.ChunkBytes {
		return c.Get(ctx, key, objectSize, off, n)
	}
	w, err := os.CreateTemp(c.cfg.Dir, tmpPattern) // a crash leaves it for Open to delete
	if err != nil {
		return nil, fmt.Errorf("chunkcache: %w", err)
	}
	f, err := openRO(w.Name())
	os.Remove(w.Name())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("chunkcache: %w", err)
	}
	err = c.copySpan(ctx, w, key, objectSize, off, int64(n))
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("chunkcache: writing span file: %w", cerr)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	// A chunk of its own, in no index: Release closes it like any
	// unlinked pinned chunk.
	ch := &chunk{size: int64(n), state: stateReady, f: f, refs: 1, unlinked: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		f.close()
		return nil, ErrClosed
	}
	c.pinnedUnlinked += ch.size
	c.stats.SpanCopies++
	return &chunkRange{c: c, ch: ch, f: f, pos: 0, n: n}, nil
}

// copySpan copies [off, off+n) of key into w, chunk by chunk.
func (c *Cache) copySpan(ctx context.Context, w *os.File, key string, objectSize, off, n int64) error {
	buf := make([]byte, min(n, 256<<10))
	for done := int64(0); done < n; {
		r, err := c.Get(ctx, key, objectSize, off+done, int32(n-done))
		if err != nil {
			return err
		}
		for pos, end := r.Pos(), r.Pos()+int64(r.Len()); pos < end; {
			m, err := r.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
			if err == nil {
				_, err = w.Write(buf[:m])
			}
			if err != nil {
				r.Release()
				return fmt.Errorf("chunkcache: copying a span of %q: %w", key, err)
			}
			pos += int64(m)
		}
		done += int64(r.Len())
		r.Release()
	}
	return nil
}
