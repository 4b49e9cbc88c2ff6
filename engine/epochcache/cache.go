// Package epochcache is a partition's leader-epoch cache: the start offset
// of every leader epoch present in the log, persisted as Kafka's
// leader-epoch-checkpoint file (layout.LeaderEpochCheckpoint), one per
// partition directory, owned by the engine.
//
// # File format (Kafka's, text, '\n'-terminated lines)
//
//	0                       version
//	<count>                 number of entries
//	<epoch> <startOffset>   count lines, epochs and offsets strictly increasing
//
// The file is rewritten whole on every change with vfs.WriteFileAtomic
// (temporary file, fsync, rename, directory fsync), so a crash leaves the
// old or the new version, never a mix. Changes are rare (leader
// changes, truncation, retention), so the cost does not matter.
//
// # Crash consistency (the engine's duty)
//
// The checkpoint may be durable while the log bytes it describes were not:
// after recovery the engine must call TruncateFromEnd(recovered log end
// offset), as Kafka does, and TruncateFromStart(log start offset).
package epochcache

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/internal/vfs"
)

// Undefined is both "no epoch" and "no offset" (Kafka's -1 sentinels).
const Undefined = -1

// ErrCorrupt marks a checkpoint file that cannot be parsed.
var ErrCorrupt = errors.New("corrupt leader-epoch-checkpoint")

// Entry says that leader epoch Epoch starts at StartOffset.
type Entry struct {
	Epoch       int32
	StartOffset int64
}

// Cache holds the entries in memory and, when opened on a file, writes the
// file after every change. It is safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	entries []Entry // strictly increasing in both fields
	fs      vfs.FS  // nil: memory only (tests, or a log without a dir)
	path    string
}

// New returns an empty in-memory cache.
func New() *Cache { return &Cache{} }

// Open loads path (a missing file is an empty cache) and persists later
// changes there.
func Open(fs vfs.FS, path string) (*Cache, error) {
	c := &Cache{fs: fs, path: path}
	buf, err := vfs.ReadFile(fs, path, 64<<20)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case errors.Is(err, vfs.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	case err != nil:
		return nil, fmt.Errorf("epochcache: read %s: %w", path, err)
	}
	c.entries, err = parse(buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return c, nil
}

func parse(b []byte) ([]Entry, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 {
		return nil, errors.New("missing version or count line")
	}
	if lines[0] != "0" {
		return nil, fmt.Errorf("unsupported version %q", lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("count %q does not match %d entry lines", lines[1], len(lines)-2)
	}
	out := make([]Entry, 0, n)
	for i, ln := range lines[2:] {
		f := strings.Fields(ln)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: %q: want \"epoch startOffset\"", i+3, ln)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, fmt.Errorf("line %d: %q: bad numbers", i+3, ln)
		}
		e := Entry{Epoch: int32(ep), StartOffset: off}
		if len(out) > 0 && (e.Epoch <= out[len(out)-1].Epoch || e.StartOffset < out[len(out)-1].StartOffset) {
			return nil, fmt.Errorf("line %d: %q: not increasing", i+3, ln)
		}
		out = append(out, e)
	}
	return out, nil
}

func format(entries []Entry) []byte {
	b := make([]byte, 0, 16+len(entries)*16)
	b = append(b, "0\n"...)
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

// persist writes the file atomically. Lock should be held.
func (c *Cache) persist() error {
	if c.fs == nil {
		return nil
	}
	err := vfs.WriteFileAtomic(c.fs, c.path, format(c.entries), 0o644)
	if err != nil {
		return fmt.Errorf("epochcache: write %s: %w", c.path, err)
	}
	return nil
}

// assign changes memory only and reports whether anything changed. Lock
// should be held.
func (c *Cache) assign(epoch int32, start int64) bool {
	if epoch < 0 || start < 0 {
		// Batches without an epoch (written before epochs existed) carry
		// no information; Kafka ignores them too.
		return false
	}
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && start >= last.StartOffset {
			return false
		}
	}
	// An entry that is not below the new one in both fields contradicts
	// it; the newest information wins (a leader's own assignment after
	// truncation, or a follower's copy of the leader's history).
	c.entries = slices.DeleteFunc(c.entries, func(e Entry) bool {
		return e.Epoch >= epoch || e.StartOffset >= start
	})
	c.entries = append(c.entries, Entry{Epoch: epoch, StartOffset: start})
	return true
}

// Assign records that epoch starts at startOffset (a new leader does this
// at its log end offset; a follower for each batch whose epoch is new).
func (c *Cache) Assign(epoch int32, startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.assign(epoch, startOffset) {
		return nil
	}
	return c.persist()
}

// AssignFromBatches assigns the partitionLeaderEpoch of every record batch
// in b (whole batches back to back), writing the file at most once. The
// engine calls it on the follower path with the bytes it just appended.
func (c *Cache) AssignFromBatches(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for len(b) > 0 {
		bt, err := records.Parse(b)
		if err != nil {
			return fmt.Errorf("epochcache: %v", err)
		}
		if c.assign(bt.PartitionLeaderEpoch, bt.BaseOffset) {
			changed = true
		}
		b = b[len(bt.Raw):]
	}
	if !changed {
		return nil
	}
	return c.persist()
}

// TruncateFromEnd removes the entries starting at or after endOffset (the
// log was truncated to endOffset).
func (c *Cache) TruncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	c.entries = slices.DeleteFunc(c.entries, func(e Entry) bool { return e.StartOffset >= endOffset })
	if len(c.entries) == n {
		return nil
	}
	return c.persist()
}

// TruncateFromStart drops entries wholly below startOffset (retention or
// a fully truncated follower moved the log start). The epoch covering
// startOffset is kept, now starting there.
func (c *Cache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0 // number of entries starting at or below startOffset
	for i < len(c.entries) && c.entries[i].StartOffset <= startOffset {
		i++
	}
	if i == 0 || (i == 1 && c.entries[0].StartOffset == startOffset) {
		return nil
	}
	keep := c.entries[i-1]
	keep.StartOffset = startOffset
	c.entries = append([]Entry{keep}, c.entries[i:]...)
	return c.persist()
}

// Clear removes every entry (a log restarted empty at a new offset, when
// the caller has no epoch to assign).
func (c *Cache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return nil
	}
	c.entries = nil
	return c.persist()
}

// Reset replaces every entry with entries (a log restarted from another
// replica's history: the remote tier's epochs object). Entries must be
// strictly increasing in both fields and non-negative; otherwise nothing
// changes. The file is written before memory changes, so a failed write
// leaves the cache as it was.
func (c *Cache) Reset(entries []Entry) error {
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 || i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset <= entries[i-1].StartOffset) {
			return fmt.Errorf("epochcache: reset: entry %d (epoch %d at %d) not increasing or negative", i, e.Epoch, e.StartOffset)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := slices.Clone(entries)
	if c.fs != nil {
		if err := vfs.WriteFileAtomic(c.fs, c.path, format(next), 0o644); err != nil {
			return fmt.Errorf("epochcache: write %s: %w", c.path, err)
		}
	}
	c.entries = next
	return nil
}

// LatestEpoch is the newest epoch, Undefined when empty.
func (c *Cache) LatestEpoch() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return Undefined
	}
	return c.entries[len(c.entries)-1].Epoch
}

// EndOffsetFor answers OffsetForLeaderEpoch for requested with Kafka's
// semantics (LeaderEpochFileCache.endOffsetFor):
//   - requested is the latest epoch: (requested, logEndOffset);
//   - otherwise the end is the start offset of the first epoch above
//     requested, and the epoch returned is the largest one <= requested
//     (requested itself when no smaller epoch is known, which tells the
//     asker to truncate to our first known offset);
//   - no epoch above requested, or an empty cache, or requested
//     Undefined: (Undefined, Undefined).
func (c *Cache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if requested == Undefined || n == 0 {
		return Undefined, Undefined
	}
	if c.entries[n-1].Epoch == requested {
		return requested, logEndOffset
	}
	// The comparison never answers "equal", so the search returns the
	// index of the first entry with Epoch > requested.
	hi, _ := slices.BinarySearchFunc(c.entries, requested, func(e Entry, t int32) int {
		if e.Epoch <= t {
			return -1
		}
		return 1
	})
	if hi == n {
		return Undefined, Undefined
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// Entries returns a copy of the entries, oldest first.
func (c *Cache) Entries() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.entries)
}
