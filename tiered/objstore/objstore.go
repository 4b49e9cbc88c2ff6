// Package objstore is the object storage the remote tier writes to and
// reads from.
//
// Implementations:
//   - NewS3 (s3.go): any S3-compatible service through minio-go. One
//     attempt per call, no retries (the uploader owns retry and backoff);
//     deadlines come from the caller's ctx. Put sends Content-MD5 on the
//     object or every multipart part, so the store refuses damaged bytes.
//   - NewMemory (memory.go): in memory, for unit tests.
//   - NewFaulty (faulty.go): wraps a Store with switchable faults (outage,
//     per-operation errors, latency, corrupted reads, dropped puts).
//
// All three follow the same contract (conformance_test.go runs one table
// against each):
//   - Put reads exactly size bytes; a reader that ends sooner fails with
//     io.ErrUnexpectedEOF and stores nothing; a Put either replaces the
//     whole object or leaves the old one.
//   - GetRange(off, n): n < 0 reads to the end; n == 0 returns an empty
//     reader (after checking the key exists); off 0 with n < 0 is the
//     whole object, even an empty one. A range the object does not hold
//     entirely (off past the end, or off+n beyond it) is ErrCorrupt: the
//     metadata that pointed there disagrees with the object. A body that
//     stops early while streaming gives ErrUnavailable from Read.
//   - A missing key is ErrNotFound from GetRange and Stat; Delete of a
//     missing key succeeds.
//   - A ctx past its deadline, a refused or reset connection, HTTP 5xx,
//     429 and SlowDown are ErrUnavailable; a cancelled ctx stays
//     context.Canceled. Errors that retrying cannot fix (access denied, a
//     missing bucket, bad config) are none of the three sentinels.
//   - Bytes damaged inside a range that has the right length are not
//     detected here: S3 checks no checksum on range reads. The record
//     batches' own CRCs catch that above the store.
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
