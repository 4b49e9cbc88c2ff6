package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Memory is a Store in memory, for unit tests that do not need the S3
// test server. It follows the same contract as the S3 client, checked by
// the conformance table both run: exact-size Put, ErrNotFound for a
// missing key, ErrCorrupt for a range past the object's end, idempotent
// Delete, sorted List. It honours ctx cancellation at the start of each
// call. Objects are copied in and out, so callers cannot alias them.
type Memory struct {
	mu   sync.RWMutex
	objs map[string][]byte
}

// NewMemory returns an empty in-memory Store.
func NewMemory() *Memory { return &Memory{objs: make(map[string][]byte)} }

var _ Store = (*Memory)(nil)

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ctxErr(ctx, "put", key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("objstore: put %s: negative size %d", key, size)
	}
	// Read in bounded steps rather than make([]byte, size) up front: a
	// wrong size must not allocate what the reader never had.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, size); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("objstore: put %s: reader ended before %d bytes: %w", key, size, err)
	}
	m.mu.Lock()
	m.objs[key] = buf.Bytes()
	m.mu.Unlock()
	return nil
}

// GetRange implements Store.
func (m *Memory) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := ctxErr(ctx, "get", key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("objstore: get %s: negative offset %d", key, off)
	}
	m.mu.RLock()
	b, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: get mem://%s", ErrNotFound, key)
	}
	size := int64(len(b))
	switch {
	case n == 0:
		return io.NopCloser(bytes.NewReader(nil)), nil
	case off == 0 && n < 0:
		// The whole object, even an empty one.
	case off >= size:
		return nil, fmt.Errorf("%w: get %s: range at %d past the object's end", ErrCorrupt, key, off)
	case n < 0:
		n = size - off
	case off+n > size:
		return nil, fmt.Errorf("%w: get %s: asked %d bytes at %d, store has %d", ErrCorrupt, key, n, off, size-off)
	}
	if n < 0 {
		n = size
	}
	// Objects are never modified in place (Put replaces the slice), so
	// the reader can share it without a copy.
	return io.NopCloser(bytes.NewReader(b[off : off+n])), nil
}

// Stat implements Store.
func (m *Memory) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctxErr(ctx, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	m.mu.RLock()
	b, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return ObjectInfo{}, fmt.Errorf("%w: stat mem://%s", ErrNotFound, key)
	}
	return ObjectInfo{Key: key, Size: int64(len(b))}, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := ctxErr(ctx, "delete", key); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctxErr(ctx, "list", prefix); err != nil {
		return nil, err
	}
	m.mu.RLock()
	var out []ObjectInfo
	for k, b := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(b))})
		}
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ctxErr maps a done ctx the way the S3 client does: a deadline is
// ErrUnavailable (the store did not answer in time), a cancel is the
// caller's own doing and stays context.Canceled.
func ctxErr(ctx context.Context, op, key string) error {
	err := ctx.Err()
	switch {
	case err == nil:
		return nil
	case err == context.DeadlineExceeded:
		return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, key, err)
	default:
		return fmt.Errorf("objstore: %s %s: %w", op, key, err)
	}
}
