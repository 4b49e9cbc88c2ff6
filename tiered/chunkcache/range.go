package chunkcache

import (
	"errors"
	"sync/atomic"
)

// FileRange is a range of a chunk file. It has exactly the method set of
// engine.FileRange (a test asserts it), so the remote reader can put it
// in an engine.ReadResult and netpath sends it with sendfile; it is
// declared here so that the engine may import this package.
type FileRange interface {
	// Fd is the chunk file's descriptor; never -1 (chunks are OS files).
	Fd() int
	Pos() int64                              // byte position in the chunk file
	Len() int32                              // length in bytes
	ReadAt(p []byte, off int64) (int, error) // relative to the chunk file, not Pos
	Release()                                // idempotent
}

// errReleased is what ReadAt returns on a released range: its descriptor
// may be closed, or even reused by another file.
var errReleased = errors.New("chunkcache: read of a released range")

// chunkRange pins its chunk (and so its open file) until Release.
type chunkRange struct {
	c        *Cache
	ch       *chunk
	f        *roFile // ch.f when served: it stays open while pinned
	pos      int64
	n        int32
	released atomic.Bool
}

func (r *chunkRange) Fd() int    { return r.f.fd }
func (r *chunkRange) Pos() int64 { return r.pos }
func (r *chunkRange) Len() int32 { return r.n }

func (r *chunkRange) ReadAt(p []byte, off int64) (int, error) {
	if r.released.Load() {
		return 0, errReleased
	}
	return r.f.ReadAt(p, off)
}

func (r *chunkRange) Release() {
	if r.released.CompareAndSwap(false, true) {
		r.c.unpin(r.ch)
	}
}
