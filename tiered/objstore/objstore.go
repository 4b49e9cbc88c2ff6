// Package objstore is the object storage the remote tier writes to and
// reads from.
package objstore

import (
	"context"
	"errors"
	"io"
)

// Errors every Store maps its failures to (wrapped with %w, so the
// cause stays readable).
var (
	// ErrNotFound: the object does not exist (deleted by retention, or
	// never uploaded). Readers turn it into a clear consumer error.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrUnavailable: the store could not be reached or answered a
	// server error; the caller retries with backoff.
	ErrUnavailable = errors.New("objstore: object store unavailable")
	// ErrCorrupt: the object's bytes do not match what was written
	// (size or checksum).
	ErrCorrupt = errors.New("objstore: object corrupt")
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key  string
	Size int64
}

// Store is an object store. Implementations are safe for concurrent use.
type Store interface {
	// Put stores size bytes from r under key, replacing any object with
	// that key; it returns once the store acknowledged the whole object.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// GetRange returns n bytes of the object from off (n < 0: to the
	// end). The caller closes the reader.
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Stat returns the object's size.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes the object; deleting a missing object is not an
	// error.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose keys start with prefix, sorted by
	// key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}
