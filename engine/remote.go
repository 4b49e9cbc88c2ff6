package engine

// The engine's side of tiered storage (KIP-405). The uploader
// (a later package) lists sealed segments with UploadableSegments, copies
// them to the object store and commits them to the remote-log metadata;
// the broker reports what the metadata says through SetRemoteState. From
// that the engine derives two things:
//
//   - Local deletion. A remote-storage topic's local segments are deleted
//     by local.retention.* (the hot window), and only those wholly below
//     RemoteState.UploadedNext: nothing leaves the local disk before the
//     metadata says it is stored remotely. The watermark is never
//     persisted here; after a restart it is unknown until the broker sets
//     it, and until then nothing is deleted (kill -9 safe by
//     construction). retention.* (the total) is applied to the remote copy
//     by the uploader, not here. When uploads stall, the bytes retention
//     would have freed are counted (UploadHeldBackBytes) and the
//     free-space threshold (diskspace.go) still protects the disk.
//   - The log start. LogStartOffset, Info, read results and ListOffsets
//     earliest report the whole log (remote + local); LocalLogStartOffset
//     the local one. A read in [log start, local log start) fails with an
//     *OffsetRemoteError (errors.Is ErrOffsetRemote) for the caller to
//     serve from the remote tier.
//
// For a topic without remote.storage.enable, and without a RemoteState
// whose Enabled is set, every path behaves exactly as before.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/internal/vfs"
)

// ErrOffsetRemote says an offset lies below the local log start but
// inside the remote tier: the fetch is to be served from the object
// store. Reads return it as an *OffsetRemoteError.
var ErrOffsetRemote = errors.New("offset held by the remote tier only")

// ErrSegmentChanged says a listed segment was truncated or rewritten
// after UploadableSegments returned it; list again.
var ErrSegmentChanged = errors.New("segment changed since it was listed")

// OffsetRemoteError is the read error for an offset in [LogStart,
// LocalLogStart): it carries the local start so the caller knows where
// the remote range ends.
type OffsetRemoteError struct {
	Topic                   string
	Partition               int32
	Offset                  int64
	LogStart, LocalLogStart int64
}

func (e *OffsetRemoteError) Error() string {
	return fmt.Sprintf("%v: %d in [%d, %d) of %s-%d, below the local log start %d",
		ErrOffsetRemote, e.Offset, e.LogStart, e.LocalLogStart, e.Topic, e.Partition, e.LocalLogStart)
}

func (e *OffsetRemoteError) Unwrap() error { return ErrOffsetRemote }

// RemoteState is the remote tier of one partition as the committed
// remote-log metadata describes it.
type RemoteState struct {
	// Enabled says the metadata knows the partition's topic as remote
	// storage enabled. Without it the other fields are ignored.
	Enabled bool
	// UploadedNext is the NextOffset of the last committed segment of
	// the contiguous uploaded range (-1: nothing uploaded). Local
	// segments wholly below it may be deleted by local retention.
	UploadedNext int64
	// LogStart is the first offset the remote tier holds (-1: none),
	// raised as the uploader deletes remote segments past retention.*.
	LogStart int64
}

// SetRemoteState records the remote tier as the metadata describes it;
// the broker calls it on leaders and followers whenever the metadata of
// the partition changes (and once after start, which is what allows local
// deletion at all). Bad values are refused and change nothing. Deletion
// happens at the next retention pass (RunRetention).
func (p *Partition) SetRemoteState(rs RemoteState) error {
	if rs.UploadedNext < -1 || rs.LogStart < -1 || rs.LogStart >= 0 && rs.UploadedNext >= 0 && rs.LogStart > rs.UploadedNext {
		return fmt.Errorf("engine: bad remote state of %s-%d: log start %d, uploaded next %d (each -1 or an offset, start <= next)", p.topic.name, p.idx, rs.LogStart, rs.UploadedNext)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	before := p.startLocked()
	p.remote, p.remoteKnown = rs, true
	if p.startLocked() != before {
		p.notify() // long polls answer the new log start
	}
	return nil
}

// RemoteState returns what SetRemoteState last recorded, and whether it
// was called since the engine opened.
func (p *Partition) RemoteState() (RemoteState, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.remote, p.remoteKnown
}

// LocalLogStartOffset is the first offset held on local disk (Kafka's
// localLogStartOffset); equal to LogStartOffset except on remote-storage
// topics whose remote tier holds older data.
func (p *Partition) LocalLogStartOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.logStart
}

// UploadHeldBackBytes is the size of the local segments local retention
// would delete but keeps because they are not uploaded yet (or the upload
// watermark is not known yet), as of the last retention pass.
func (p *Partition) UploadHeldBackBytes() int64 { return p.heldBack.Load() }

// UploadHeldBackBytes sums Partition.UploadHeldBackBytes over the engine:
// non-zero means uploads lag the local window.
func (e *Engine) UploadHeldBackBytes() int64 {
	var n int64
	for _, p := range e.allPartitions() {
		n += p.heldBack.Load()
	}
	return n
}

// startLocked is the log start clients see. The remote tier counts when
// it reaches the local log (UploadedNext >= local start): its start then
// is the log's, above or below the local one (above once remote
// retention passed segments still held locally). A gap between the two
// tiers would leave offsets nobody holds, so then the local start holds.
// DeleteRecords may raise it inside the remote range (remoteFloor). Lock
// must be held.
func (p *Partition) startLocked() int64 {
	start := p.logStart
	if r := p.remote; p.remoteKnown && r.Enabled && r.LogStart >= 0 && r.UploadedNext >= p.logStart {
		start = min(r.LogStart, max(p.hw, p.logStart))
	}
	return max(start, min(p.remoteFloor, p.logStart))
}

// tieredLocked reports whether local deletion is gated by uploads: the
// topic has remote storage on, or the metadata says so (the two can
// differ briefly while a config change propagates; either is enough to
// keep data). Lock must be held.
func (p *Partition) tieredLocked(cfg TopicConfig) bool {
	return cfg.RemoteStorageEnable || p.remoteKnown && p.remote.Enabled
}

// uploadedNextLocked is the offset below which local segments are
// uploaded: -1 while the watermark is unknown. Lock must be held.
func (p *Partition) uploadedNextLocked() int64 {
	if !p.remoteKnown || !p.remote.Enabled {
		return -1
	}
	return p.remote.UploadedNext
}

// SegmentInfo is one sealed segment the uploader may copy. It pins the
// segment's open log file: reads stay valid after local retention or
// DeleteRecords removed the files, until Release. A truncation (a
// follower's divergence, rare on a leader) may rewrite the file in place:
// call Indexes after streaming Log, and drop the upload if it reports
// ErrSegmentChanged.
type SegmentInfo struct {
	BaseOffset int64
	// NextOffset is the offset after the segment's last batch.
	NextOffset int64
	// MaxTimestamp is the largest batch timestamp (ms), -1 if none.
	MaxTimestamp int64
	// Size is the bytes of the log file.
	Size int64
	// Epochs are the leader-epoch entries covering [BaseOffset,
	// NextOffset); the first starts at BaseOffset (its epoch began there
	// or earlier).
	Epochs []epochcache.Entry

	p   *Partition
	seg *segment
	gen uint64
	// pin is shared by copies of the value, so Release stays
	// idempotent however the slice is copied.
	pin *segmentPin
}

type segmentPin struct {
	seg      *segment
	released atomic.Bool
}

// Log reads the segment's log file, [0, Size).
func (si *SegmentInfo) Log() *io.SectionReader {
	return io.NewSectionReader(si.seg.log, 0, si.Size)
}

// Indexes returns the segment's offset index and time index in the
// on-disk formats of engine/doc.go (.index and .timeindex), built from
// memory so they exist even after local retention removed the files. It
// fails with ErrSegmentChanged if the partition was truncated since the
// listing (the segment may no longer be what was listed; any truncation
// counts, even one above the segment: listing again is cheap).
func (si *SegmentInfo) Indexes() (index, timeIndex []byte, err error) {
	p := si.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.gen != si.gen {
		return nil, nil, fmt.Errorf("%w: %s", ErrSegmentChanged, si.seg.path(logSuffix))
	}
	ib, tb := si.seg.indexBytes()
	return ib, tb, nil
}

// ProducerSnapshot returns the producer-state snapshot as of NextOffset
// (producerstate.State.Snapshot's format), the one written when the
// segment was rolled. Remote-storage partitions keep these snapshots until
// the segment is uploaded (writeProducerSnapshot), so only a snapshot
// whose write failed, or one pruned while the watermark said uploaded, is
// missing: that error wraps os.ErrNotExist.
func (si *SegmentInfo) ProducerSnapshot() ([]byte, error) {
	path := si.p.snapshotPath(si.NextOffset)
	b, err := vfs.ReadFile(si.p.e.fs, path, 0)
	if os.IsNotExist(err) {
		err = fmt.Errorf("%w: %s", os.ErrNotExist, path) // errors.Is works for every FS
	}
	if err != nil {
		return nil, fmt.Errorf("producer snapshot at %d of %s-%d: %w", si.NextOffset, si.p.topic.name, si.p.idx, err)
	}
	return b, nil
}

// Release unpins the segment's files. Idempotent.
func (si *SegmentInfo) Release() {
	if si.pin != nil && si.pin.released.CompareAndSwap(false, true) {
		si.pin.seg.release()
	}
}

// UploadableSegments lists, in offset order, the sealed segments (never
// the active one) whose NextOffset is above after and at or below both
// the high watermark and the last stable offset (Kafka's copy task stops
// at the LSO too: a remote segment never holds an undecided
// transaction, so the remote tier needs no transaction index of open
// transactions). Empty segments are left out. The caller must Release
// every result.
func (p *Partition) UploadableSegments(after int64) []SegmentInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.deleted || p.failed != nil || len(p.segs) < 2 {
		return nil
	}
	limit := min(p.hw, p.ps.LastStableOffset(p.hw))
	entries := p.epochs.Entries()
	var out []SegmentInfo
	for _, s := range p.segs[:len(p.segs)-1] {
		if s.next > limit {
			break
		}
		if s.next <= after || s.size == 0 {
			continue
		}
		s.acquire()
		out = append(out, SegmentInfo{
			BaseOffset: s.base, NextOffset: s.next, MaxTimestamp: s.maxTs, Size: s.size,
			Epochs: epochsIn(entries, s.base, s.next),
			p:      p, seg: s, gen: p.gen, pin: &segmentPin{seg: s},
		})
	}
	return out
}

// epochsIn returns the entries covering [base, next): the one in force at
// base (started at base, for the segment) and those starting inside.
func epochsIn(entries []epochcache.Entry, base, next int64) []epochcache.Entry {
	var out []epochcache.Entry
	for i, e := range entries {
		if e.StartOffset >= next {
			break
		}
		if i+1 < len(entries) && entries[i+1].StartOffset <= base {
			continue // superseded before the segment starts
		}
		out = append(out, epochcache.Entry{Epoch: e.Epoch, StartOffset: max(e.StartOffset, base)})
	}
	return out
}

// LocalBytesFrom is the size of the local segments whose base offset is
// at or above offset, the active one included: with offset the remote
// end, the bytes only the local tier holds, which Kafka counts with the
// remote copy against retention.bytes. A segment straddling offset is
// left out (it is in the remote tier already up to offset).
func (p *Partition) LocalBytesFrom(offset int64) int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var n int64
	for _, s := range p.segs {
		if s.base >= offset {
			n += s.size
		}
	}
	return n
}
