package engine

import (
	"fmt"
	"os"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/internal/vfs"
)

// RestartFromRemote empties the log and restarts it at offset with the
// producer state and leader-epoch history of the remote tier (a follower
// whose fetch offset the leader answered with OFFSET_MOVED_TO_TIERED_STORAGE;
// Kafka's buildRemoteLogAuxState). producerSnapshot is the state at
// offset (producerstate format; its map end must be offset) and epochs
// the history up to offset (the "epochs" object). Bad arguments are
// refused before anything changes.
//
// The local log start becomes offset; LogStartOffset still reports the
// remote tier below it as SetRemoteState describes it.
//
// # Crash safety
//
// The steps are ordered so that a crash anywhere reopens to a consistent
// log: the old snapshots go first (a reopened old log replays producer
// state from its start), then the old segments from the last to the
// first (a crash keeps a prefix of the old log, which is a truncation),
// then a directory sync; with no segment left a reopen gives an empty
// log at 0 (the follower's next fetch asks again). The epoch checkpoint
// and the snapshot named for offset are written durably before the new
// segment's name is synced, so once the new segment exists after a crash
// both are there: reopening gives the restarted log with its producer
// state. (Open trims an empty log's epoch cache to nothing, as for any
// log; the first fetched batches bring the leader's epochs back.)
func (p *Partition) RestartFromRemote(offset int64, producerSnapshot []byte, epochs []epochcache.Entry) error {
	if offset < 0 {
		return fmt.Errorf("engine: restart of %s-%d at negative offset %d", p.topic.name, p.idx, offset)
	}
	ps, err := p.newProducerState()
	if err != nil {
		return err
	}
	if err := ps.Restore(producerSnapshot); err != nil {
		return fmt.Errorf("engine: restart of %s-%d at %d: producer snapshot: %w", p.topic.name, p.idx, offset, err)
	}
	if end := ps.MapEndOffset(); end != offset {
		return fmt.Errorf("engine: restart of %s-%d at %d: producer snapshot is of offset %d", p.topic.name, p.idx, offset, end)
	}
	entries, err := restartEpochs(epochs, offset)
	if err != nil {
		return fmt.Errorf("engine: restart of %s-%d at %d: %w", p.topic.name, p.idx, offset, err)
	}

	p.mu.Lock()
	err = p.restartFromRemoteLocked(offset, producerSnapshot, entries)
	if err == nil {
		p.ps = ps
		ps.OnHighWatermark(offset)
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	// A DeleteRecords start of the old log must not come back on reopen
	// once the new log grows past it.
	if err := p.e.writeLogStartCheckpoint(); err != nil {
		return fmt.Errorf("%w: writing %s: %v", ErrStorage, lsCheckpointName, err)
	}
	return nil
}

// restartFromRemoteLocked does RestartFromRemote's file work and swaps
// the in-memory log; see its crash-safety notes. Lock must be held.
func (p *Partition) restartFromRemoteLocked(offset int64, snapshot []byte, entries []epochcache.Entry) error {
	switch {
	case p.deleted:
		return fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx)
	case p.failed != nil:
		return p.failed
	}
	if err := p.quiesceLocked(); err != nil {
		return err
	}
	p.e.log.Info("restarting replica log from the remote tier", "topic", p.topic.name, "partition", p.idx, "leader_epoch", p.leaderEpoch, "at", offset, "log_start", p.logStart, "log_end", p.logEnd)
	p.gen++
	for _, off := range p.listSnapshots() {
		if err := p.e.fs.Remove(p.snapshotPath(off)); err != nil && !os.IsNotExist(err) {
			return p.fail(fmt.Errorf("removing producer snapshot at %d: %v", off, err))
		}
	}
	// Open files stay readable after their names go; memory keeps the old
	// segments until the new one exists, so a failure below leaves a
	// failed partition that still has its segments.
	for i := len(p.segs) - 1; i >= 0; i-- {
		s := p.segs[i]
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
			if err := p.e.fs.Remove(s.path(suffix)); err != nil && !os.IsNotExist(err) {
				return p.fail(fmt.Errorf("removing %s: %v", s.path(suffix), err))
			}
		}
	}
	if err := p.e.fs.SyncDir(p.dir); err != nil {
		return p.fail(err)
	}
	if err := p.epochs.Reset(entries); err != nil {
		return p.fail(err)
	}
	if err := vfs.WriteFileAtomic(p.e.fs, p.snapshotPath(offset), snapshot, 0o644); err != nil {
		return p.fail(fmt.Errorf("writing producer snapshot at %d: %v", offset, err))
	}
	seg, err := p.e.createSegment(p.dir, offset, time.Now().UnixMilli())
	if err != nil {
		return p.fail(err)
	}
	for _, s := range p.segs {
		p.dropDirty(s)
		s.release()
	}
	p.startEmptyLocked(seg, offset)
	p.e.kickCheckpoint()
	return nil
}

// restartEpochs turns the remote tier's epoch history into the epoch
// cache of a log starting empty at offset: the epoch in force at offset-1
// (the remote tier's last), starting at offset, as TruncateFromStart
// leaves a cache after retention. Entries at or above offset say nothing
// about records this log has. The history must be ordered (epochs
// increasing, offsets not decreasing).
func restartEpochs(epochs []epochcache.Entry, offset int64) ([]epochcache.Entry, error) {
	var last *epochcache.Entry
	for i := range epochs {
		e := &epochs[i]
		if e.Epoch < 0 || e.StartOffset < 0 || i > 0 && (e.Epoch <= epochs[i-1].Epoch || e.StartOffset < epochs[i-1].StartOffset) {
			return nil, fmt.Errorf("epoch history entry %d (epoch %d at %d) out of order", i, e.Epoch, e.StartOffset)
		}
		if e.StartOffset < offset {
			last = e
		}
	}
	if last == nil {
		return nil, nil
	}
	return []epochcache.Entry{{Epoch: last.Epoch, StartOffset: offset}}, nil
}
