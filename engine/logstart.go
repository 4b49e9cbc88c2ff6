package engine

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/ringlog/ringlog/internal/vfs"
)

// Log start offsets moved by DeleteRecords (Kafka's
// log-start-offset-checkpoint). Retention and follower restarts move the
// log start to a segment base, which the segment files themselves record;
// DeleteRecords can move it inside a segment, and only this file
// remembers that across a restart. It is rewritten (atomically, synced)
// before a DeleteRecords is answered, so an acknowledged start survives
// kill -9. A partition whose start is its first segment's base has no
// line.

// AdvanceLogStart moves the log start offset up to offset (Kafka's
// maybeIncrementLogStartOffset, used by DeleteRecords on the leader and
// by followers that learn the leader's start from fetch responses):
// segments wholly below the new start are deleted, the partially covered
// one stays, and reads below the start answer ErrOffsetOutOfRange.
// offset must not exceed the high watermark (ErrOffsetOutOfRange); an
// offset at or below the current start changes nothing. It returns the
// log start after the call, persisted when it moved. On a remote-storage
// topic an offset below the local log start only raises the start
// clients see (remote.go); that one is not persisted here.
func (p *Partition) AdvanceLogStart(offset int64) (int64, error) {
	p.mu.Lock()
	switch {
	case p.deleted:
		p.mu.Unlock()
		return -1, fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx)
	case p.failed != nil:
		err := p.failed
		p.mu.Unlock()
		return -1, err
	case offset > p.hw:
		start, hw := p.startLocked(), p.hw
		p.mu.Unlock()
		return start, fmt.Errorf("%w: new log start %d above the high watermark %d of %s-%d", ErrOffsetOutOfRange, offset, hw, p.topic.name, p.idx)
	case offset <= p.startLocked():
		start := p.startLocked()
		p.mu.Unlock()
		return start, nil
	}
	p.remoteFloor = max(p.remoteFloor, offset)
	if offset < p.logStart {
		// Inside the remote range of a remote-storage topic: the local
		// log keeps its segments; clients see the new start at once.
		// Deleting the remote segments below it, and recording the new
		// start in the remote-log metadata (which is what survives a
		// restart, as this floor does not), is the uploader's.
		p.notify()
		p.mu.Unlock()
		return offset, nil
	}
	p.logStart = offset
	n := 0
	for _, s := range p.segs[:len(p.segs)-1] {
		if s.next > offset {
			break
		}
		n++
	}
	p.deleteSegments(n)
	if err := p.epochs.TruncateFromStart(p.logStart); err != nil {
		p.e.log.Warn("trimming leader-epoch-checkpoint", "topic", p.topic.name, "partition", p.idx, "err", err)
	}
	p.ps.DropAbortedBefore(p.logStart)
	start := p.logStart
	// Long polls wake: a follower's fetch answers the new start at once
	// (netpath's Fetch), which DeleteRecords' answer waits for.
	p.notify()
	p.mu.Unlock()
	p.e.stats.segmentsDeleted.Add(int64(n))
	if n > 0 {
		p.e.disk.sample() // space freed: produce may resume now
	}
	if err := p.e.writeLogStartCheckpoint(); err != nil {
		return start, fmt.Errorf("%w: writing %s: %v", ErrStorage, lsCheckpointName, err)
	}
	return start, nil
}

// Size is the bytes of the partition's segment files (.log), as Kafka's
// DescribeLogDirs reports a replica's size.
func (p *Partition) Size() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var n int64
	for _, s := range p.segs {
		n += s.size
	}
	return n
}

// Dir is the data directory (the one log dir DescribeLogDirs reports).
func (e *Engine) Dir() string { return e.cfg.Dir }

// DiskUsage is the data directory's file system: bytes available to the
// broker and total bytes (statfs).
func (e *Engine) DiskUsage() (free, total int64, err error) {
	if e.cfg.StatFS != nil {
		return e.cfg.StatFS(e.cfg.Dir)
	}
	return OSStatFS(e.cfg.Dir)
}

// initLogStart applies the checkpointed log start at open: never below the
// first segment's base, never past the log end (an unsynced tail lost in
// a crash cannot move the start back over data we no longer have).
func (p *Partition) initLogStart(lss map[string]int64) {
	ls, ok := lss[partitionDirName(p.topic.name, p.idx)]
	if !ok || ls <= p.logStart {
		return
	}
	p.logStart = min(ls, p.logEnd)
	if err := p.epochs.TruncateFromStart(p.logStart); err != nil {
		p.e.log.Warn("trimming leader-epoch-checkpoint", "topic", p.topic.name, "partition", p.idx, "err", err)
	}
	p.ps.DropAbortedBefore(p.logStart)
}

// writeLogStartCheckpoint persists the log starts that lie above their
// partition's first segment base (atomic replace).
func (e *Engine) writeLogStartCheckpoint() error {
	e.ckMu.Lock()
	defer e.ckMu.Unlock()
	var lines bytes.Buffer
	n := 0
	for _, p := range e.allPartitions() {
		p.mu.RLock()
		if !p.deleted && len(p.segs) > 0 && p.logStart > p.segs[0].base {
			fmt.Fprintf(&lines, "%s %d %d\n", p.topic.name, p.idx, p.logStart)
			n++
		}
		p.mu.RUnlock()
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", n)
	buf.Write(lines.Bytes())
	return vfs.WriteFileAtomic(e.fs, filepath.Join(e.cfg.Dir, lsCheckpointName), buf.Bytes(), 0o644)
}
