package chunkcache

import (
	"errors"
	"fmt"
	"time"
)

// Config configures a Cache. Zero fields other than Dir take the default
// shown in parentheses (DefaultConfig).
type Config struct {
	// Dir is the cache directory (required); created if missing.
	Dir string
	// ChunkBytes is the size objects are cut in (4 MiB); an object's last
	// chunk is shorter. Larger chunks mean fewer store requests per byte,
	// smaller ones less waste for a consumer reading a little at a random
	// offset.
	ChunkBytes int64
	// MaxBytes bounds the bytes of cached chunk files (1 GiB); at least
	// ChunkBytes.
	MaxBytes int64
	// ReadAhead is how many chunks after the one a sequential reader just
	// asked for are fetched in the background (1); -1 disables read-ahead
	// (0 means the default).
	ReadAhead int
	// ReadAheadConcurrency bounds read-ahead fetches in flight (4); a
	// read-ahead that finds them all busy is skipped (counted), never
	// queued.
	ReadAheadConcurrency int
	// FetchTimeout bounds one chunk fetch (30 s), so a hung store cannot
	// hold a flight (and its waiters) forever.
	FetchTimeout time.Duration
}

// DefaultConfig returns the defaults for a cache in dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:                  dir,
		ChunkBytes:           4 << 20,
		MaxBytes:             1 << 30,
		ReadAhead:            1,
		ReadAheadConcurrency: 4,
		FetchTimeout:         30 * time.Second,
	}
}

// maxChunkBytes keeps a chunk's length within a FileRange's int32 and the
// 8 hex digits of its file name.
const maxChunkBytes = 1 << 30

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig(c.Dir)
	if c.ChunkBytes == 0 {
		c.ChunkBytes = d.ChunkBytes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = d.ReadAhead
	}
	if c.ReadAheadConcurrency == 0 {
		c.ReadAheadConcurrency = d.ReadAheadConcurrency
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = d.FetchTimeout
	}
	return c
}

// Validate checks a config after defaults were applied.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("chunkcache: Dir is required")
	case c.ChunkBytes <= 0 || c.ChunkBytes > maxChunkBytes:
		return fmt.Errorf("chunkcache: ChunkBytes %d outside (0, %d]", c.ChunkBytes, maxChunkBytes)
	case c.MaxBytes < c.ChunkBytes:
		return fmt.Errorf("chunkcache: MaxBytes %d below ChunkBytes %d: no chunk would fit", c.MaxBytes, c.ChunkBytes)
	case c.ReadAhead < -1 || c.ReadAhead > 16:
		return fmt.Errorf("chunkcache: ReadAhead %d outside [-1, 16]", c.ReadAhead)
	case c.ReadAheadConcurrency < 1 || c.ReadAheadConcurrency > 64:
		return fmt.Errorf("chunkcache: ReadAheadConcurrency %d outside [1, 64]", c.ReadAheadConcurrency)
	case c.FetchTimeout < 0:
		return fmt.Errorf("chunkcache: FetchTimeout %v is negative", c.FetchTimeout)
	}
	return nil
}
