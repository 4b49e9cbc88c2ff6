package engine

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/ratelog"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/ringlog/ringlog/iouring"
)

// Engine owns the topics and partitions of one data directory.
type Engine struct {
	cfg  Config
	fs   vfs.FS
	log  *slog.Logger
	meta *metaStore
	wq   writeQueue
	// j is the broker-wide journal under FsyncAlways (journal.go), nil
	// when not in use.
	j *journal
	// ioReason says why wq is the write path it is.
	ioReason string

	mu     sync.RWMutex
	topics map[string]*topicState
	// dynDefaults are the topic defaults with the dynamic broker configs
	// applied (dynconfig.go); nil until the first SetDynamicDefaults.
	dynDefaults atomic.Pointer[TopicConfig]
	// dynKnown is set by the first SetDynamicDefaults.
	dynKnown atomic.Bool

	closed    atomic.Bool
	stopBg    chan struct{}
	bgDone    chan struct{}
	ckKick    chan struct{}
	ckMu      sync.Mutex // serializes checkpoint writes
	stats     engineStats
	cleaner   *cleaner // log compaction (cleaner.go)
	closeOnce sync.Once
	closeErr  error

	// disk is the free-space threshold (diskspace.go); ckFail and hwFail
	// log failing checkpoint writes once a minute, not every interval (a
	// full disk fails every attempt).
	disk           *diskMonitor
	ckFail, hwFail *ratelog.Failure
	// offline is closed and replaced whenever a partition fails
	// (offline.go).
	offlineMu sync.Mutex
	offline   chan struct{}
}

type engineStats struct {
	appends, appendedBytes, fdatasyncs, flushRounds, segmentsDeleted atomic.Int64
	// fsyncLatency times group-commit fdatasyncs (fsync_latency.go).
	fsyncLatency latencyHistogram
	// duplicates counts idempotent retries answered from producer state.
	duplicates atomic.Int64
	// diskFullRollbacks counts writes undone after failing for lack of
	// space, the partition kept online.
	diskFullRollbacks atomic.Int64
	// The journal (journal.go).
	journalWrites, journalBytes, journalRecords, journalCheckpoints atomic.Int64
	journalCheckpointNanos, journalReplayed                         atomic.Int64
}

// Stats are cumulative engine counters.
type Stats struct {
	Appends         int64 // successful Append calls
	AppendedBytes   int64
	Fdatasyncs      int64 // fdatasync calls on segment files
	FlushRounds     int64 // group-commit rounds of the flusher
	SegmentsDeleted int64 // by retention
	// DuplicateBatches counts idempotent retries answered with their
	// original offsets instead of being appended again.
	DuplicateBatches int64
	// DiskFullRollbacks counts segment writes that failed for lack of
	// space and were undone with the partition kept online: a rollback of
	// the partition on the io_uring path (uring_undo.go), the torn tail
	// cut after the failed pwrite on the sync path (writepath.go).
	DiskFullRollbacks int64
	// io_uring write path only (zero on the sync path): io_uring_enter
	// calls, SQEs submitted and completions reaped. SQEs/enter is the
	// batching factor; the owner's wakeup reads are included.
	RingEnters      int64
	RingSQEs        int64
	RingCompletions int64
	// The broker-wide journal (zero when not in use): writes (one
	// fdatasync each: the round's durability barrier), their bytes
	// (headers included) and records (one per append on the pwrite path,
	// per partition group on the ring), checkpoints and the time they
	// took, records replayed at Open, and the share of the journal
	// between its checkpoint and its last write (0..1).
	JournalWrites          int64
	JournalBytes           int64
	JournalRecords         int64
	JournalCheckpoints     int64
	JournalCheckpointNanos int64
	JournalReplayed        int64
	JournalFill            float64
}

// SQEsPerEnter is the io_uring batching factor (0 on the sync path).
func (s Stats) SQEsPerEnter() float64 {
	if s.RingEnters == 0 {
		return 0
	}
	return float64(s.RingSQEs) / float64(s.RingEnters)
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	st := Stats{
		Appends:         e.stats.appends.Load(),
		AppendedBytes:   e.stats.appendedBytes.Load(),
		Fdatasyncs:      e.stats.fdatasyncs.Load(),
		FlushRounds:     e.stats.flushRounds.Load(),
		SegmentsDeleted: e.stats.segmentsDeleted.Load(),

		DuplicateBatches:  e.stats.duplicates.Load(),
		DiskFullRollbacks: e.stats.diskFullRollbacks.Load(),

		JournalWrites:          e.stats.journalWrites.Load(),
		JournalBytes:           e.stats.journalBytes.Load(),
		JournalRecords:         e.stats.journalRecords.Load(),
		JournalCheckpoints:     e.stats.journalCheckpoints.Load(),
		JournalCheckpointNanos: e.stats.journalCheckpointNanos.Load(),
		JournalReplayed:        e.stats.journalReplayed.Load(),
	}
	if e.j != nil {
		st.JournalFill = e.j.fill()
	}
	if rs, ok := e.wq.ringStats(); ok {
		st.RingEnters, st.RingSQEs, st.RingCompletions = int64(rs.Enters), int64(rs.SQEs), int64(rs.CQEs)
	}
	return st
}

// JournalInUse reports whether FsyncAlways appends go through the
// broker-wide journal (journal.go).
func (e *Engine) JournalInUse() bool { return e.j != nil }

// IOPath names the write path in use: "uring" or "sync".
func (e *Engine) IOPath() string { return e.wq.name() }

// IOReason says why IOPath was chosen (Config.IOMode, the file system, or
// why io_uring is unavailable on this host).
func (e *Engine) IOReason() string { return e.ioReason }

// probeIO is iouring.Probe; tests replace it to act as a host without
// io_uring.
var probeIO = iouring.Probe

// ErrIOUringUnusable: io mode uring was asked for and io_uring cannot be
// used here; the wrapped text says why.
var ErrIOUringUnusable = errors.New("io_uring is not usable on this host")

// onOSFiles says whether fs's files are the OS's: vfs.Default, or an
// ErrorFS over it (tests, --fault-injection), whose file system statfs
// measures.
func onOSFiles(fs vfs.FS) bool {
	if faults, ok := fs.(*vfs.ErrorFS); ok {
		fs = faults.FS
	}
	return fs == vfs.Default
}

// openWriteQueue picks the write path for Config.IOMode and says why.
func (e *Engine) openWriteQueue() (writeQueue, string, error) {
	if e.cfg.IOMode == "sync" {
		return newSyncQueue(e), "the pwrite/fdatasync path was chosen (io mode sync)", nil
	}
	if !vfs.KernelFiles(e.fs) {
		// A plain MemFS has no descriptors for the kernel to write to.
		// The OS one and a MemFS from NewMemFds (crash tests) have, and
		// an ErrorFS over either: the ring consults its faults
		// (uringQueue.faults) and reports its fdatasyncs (vfs.Synced).
		return newSyncQueue(e), "the file system's files have no kernel descriptors", nil
	}
	reason := ""
	info, err := probeIO()
	if err == nil && info.Available {
		q, qerr := newUringQueue(e)
		if qerr == nil {
			return q, "io_uring available (" + iouring.SetupFlagNames(q.ring.SetupFlags()) + ")", nil
		}
		reason = "ring setup failed: " + qerr.Error()
	} else {
		reason = info.Reason
		if reason == "" && err != nil {
			reason = err.Error()
		}
	}
	if e.cfg.IOMode == "uring" {
		return nil, "", fmt.Errorf("%w: %s (io mode auto falls back to the pwrite/fdatasync path)", ErrIOUringUnusable, reason)
	}
	return newSyncQueue(e), "io_uring unavailable: " + reason, nil
}

// Open loads (and, after an unclean shutdown, recovers) the data directory.
func Open(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		fs:      cfg.FS,
		offline: make(chan struct{}),
		log:     cfg.Logger,
		topics:  map[string]*topicState{},
		stopBg:  make(chan struct{}),
		bgDone:  make(chan struct{}),
		ckKick:  make(chan struct{}, 1),
	}
	e.cleaner = newCleaner(e)
	if e.fs == nil {
		e.fs = vfs.Default
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if err := e.fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	e.disk = newDiskMonitor(cfg, e.log, onOSFiles(e.fs))
	e.ckFail = ratelog.New(e.log, slog.LevelWarn, "writing recovery point checkpoint", time.Minute)
	e.hwFail = ratelog.New(e.log, slog.LevelWarn, "writing high watermark checkpoint", time.Minute)
	// The data directory's own entry must be durable too.
	if err := e.fs.SyncDir(filepath.Dir(filepath.Clean(cfg.Dir))); err != nil {
		return nil, err
	}
	var err error
	if e.meta, err = newMetaStore(e.fs, cfg.Dir); err != nil {
		return nil, err
	}
	marker := filepath.Join(cfg.Dir, cleanMarkerName)
	_, statErr := e.fs.Stat(marker)
	clean := statErr == nil
	// The journal's tail goes into the segments before they are loaded
	// and their tails validated.
	if e.j, err = openJournal(e); err != nil {
		return nil, err
	}
	if e.wq, e.ioReason, err = e.openWriteQueue(); err != nil {
		e.closeJournal()
		return nil, err
	}
	e.log.Info("engine write path", "io", e.wq.name(), "reason", e.ioReason)
	if err := e.load(clean); err != nil {
		e.wq.close()
		e.closeJournal()
		e.releaseAll()
		return nil, err
	}
	if clean {
		// From here on a crash must be recovered by scanning.
		if err := e.fs.Remove(marker); err != nil {
			e.wq.close()
			e.closeJournal()
			e.releaseAll()
			return nil, err
		}
		e.fs.SyncDir(cfg.Dir)
	}
	go e.background()
	go e.cleaner.run()
	return e, nil
}

func (e *Engine) load(clean bool) error {
	topics, err := e.meta.load()
	if err != nil {
		return err
	}
	rps, err := e.readCheckpoint()
	if err != nil {
		return err
	}
	hws, err := e.readHWCheckpoint()
	if err != nil {
		return err
	}
	lss, err := e.readOffsetsFile(lsCheckpointName)
	if err != nil {
		return err
	}
	live := map[string]bool{metaDirName: true}
	for _, mt := range topics {
		cfg, err := ParseTopicConfig(e.Defaults(), mt.Configs)
		if err != nil {
			return fmt.Errorf("topic %s: %w", mt.Name, err)
		}
		id, err := parseTopicID(mt.ID)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorruptLog, e.meta.path, err)
		}
		t := &topicState{name: mt.Name, id: id, cfg: cfg, parts: make([]*Partition, mt.Partitions)}
		e.topics[t.name] = t
		for i := int32(0); i < mt.Partitions; i++ {
			if mt.Hosted != nil && !slices.Contains(*mt.Hosted, i) {
				continue // another broker's partition: no local log
			}
			p, err := e.openPartition(t, i, clean, rps[partitionDirName(t.name, i)])
			if err != nil {
				return err
			}
			p.initLogStart(lss)
			p.initHWCheckpoint(hws)
			t.parts[i] = p
			live[partitionDirName(t.name, i)] = true
		}
	}
	// Directories of topics deleted before a crash finished removing them.
	names, err := e.fs.ReadDir(e.cfg.Dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if st, err := e.fs.Stat(filepath.Join(e.cfg.Dir, n)); err == nil && st.IsDir() && !live[n] {
			if i := strings.LastIndexByte(n, '-'); i > 0 {
				if _, err := strconv.Atoi(n[i+1:]); err == nil {
					e.log.Info("removing directory of deleted topic", "dir", n)
					e.fs.RemoveAll(filepath.Join(e.cfg.Dir, n))
				}
			}
		}
	}
	return nil
}

func partitionDirName(topic string, p int32) string { return layout.PartitionDir(topic, p) }

func (e *Engine) createSegment(dir string, base, nowMs int64) (*segment, error) {
	s := &segment{base: base, next: base, dir: dir, fs: e.fs, maxTs: -1, maxTsAt: -1, createdMs: nowMs}
	f, err := e.fs.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.log = f
	s.refs.Store(1)
	// The new name must survive a crash before any offset in it is acked.
	if err := e.fs.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (e *Engine) newPartition(t *topicState, idx int32) *Partition {
	return &Partition{e: e, topic: t, idx: idx, dir: filepath.Join(e.cfg.Dir, partitionDirName(t.name, idx))}
}

// openPartition loads one partition; see doc.go for the recovery rules.
func (e *Engine) openPartition(t *topicState, idx int32, clean bool, recoveryPoint int64) (*Partition, error) {
	p := e.newPartition(t, idx)
	if err := e.fs.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	bases, err := listSegments(e.fs, p.dir)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	if len(bases) == 0 {
		s, err := e.createSegment(p.dir, 0, now)
		if err != nil {
			return nil, err
		}
		p.segs = []*segment{s}
		p.hwSeg, p.rendSeg = s, s
		if err := p.openEpochs(); err != nil {
			return nil, err
		}
		return p, p.loadProducers()
	}
	for _, base := range bases {
		s := &segment{base: base, next: base, dir: p.dir, fs: e.fs, maxTs: -1, maxTsAt: -1, createdMs: now}
		if s.log, err = e.fs.OpenFile(s.path(logSuffix), os.O_RDWR, 0); err != nil {
			p.releaseSegments()
			return nil, err
		}
		s.refs.Store(1)
		p.segs = append(p.segs, s)
		if s.size, err = s.log.Size(); err != nil {
			p.releaseSegments()
			return nil, err
		}
	}
	if err := p.recover(clean, recoveryPoint); err != nil {
		p.releaseSegments()
		return nil, err
	}
	last := p.active()
	if err := last.restoreRollClock(now); err != nil {
		p.releaseSegments()
		return nil, err
	}
	p.logStart, p.logEnd = p.segs[0].base, last.next
	p.durable, p.hw, p.hwSeg, p.hwPos = p.logEnd, p.logEnd, last, last.size
	p.rend, p.rendSeg, p.rendPos = p.logEnd, last, last.size
	if err := p.openEpochs(); err != nil {
		p.releaseSegments()
		return nil, err
	}
	if err := p.loadProducers(); err != nil {
		p.releaseSegments()
		return nil, err
	}
	return p, nil
}

func (p *Partition) releaseSegments() {
	for _, s := range p.segs {
		if s.log != nil {
			s.release()
		}
	}
}

func (p *Partition) recover(clean bool, recoveryPoint int64) error {
	interval := p.topic.cfg.IndexIntervalBytes
	lastIdx := len(p.segs) - 1
	// Segments wholly below the recovery point (and every sealed one on a
	// clean start) are trusted: load their indexes, rebuild them if needed.
	first := 0
	if !clean {
		for i := 1; i < len(p.segs); i++ {
			if p.segs[i].base <= recoveryPoint {
				first = i
			}
		}
	} else {
		first = lastIdx
	}
	for i, s := range p.segs[:first] {
		s.next = p.segs[i+1].base
		if !s.loadIndexes() {
			s.next = s.base
			if bad, why := s.scan(0, s.size, false, interval); bad >= 0 {
				return corruptAt(s, bad, why)
			}
			s.writeIndexes()
		}
	}
	if clean {
		s := p.active()
		if s.loadIndexes() && len(s.index) > 0 {
			// Rescan from the last indexed batch to find the end.
			lastEntry := s.index[len(s.index)-1]
			s.index = s.index[:len(s.index)-1]
			s.next = s.base + int64(lastEntry.rel)
			s.sinceIndex = math.MaxInt32
			if bad, _ := s.scan(int64(lastEntry.pos), s.size, false, interval); bad < 0 {
				return nil
			}
		}
		// No usable index or a bad tail despite the marker: recover fully.
		s.index, s.tindex, s.sinceIndex, s.next, s.maxTs, s.maxTsAt = nil, nil, 0, s.base, -1, -1
	}
	for i := first; i <= lastIdx; i++ {
		s := p.segs[i]
		s.index, s.tindex, s.sinceIndex, s.next = nil, nil, 0, s.base
		fileSize := s.size
		bad, why := s.scan(0, fileSize, true, interval)
		if bad < 0 {
			if i < lastIdx {
				s.writeIndexes()
			}
			continue
		}
		// A bad batch in a sealed segment, or before the recovery point,
		// sits in bytes that were flushed: that is corruption, not a torn
		// write, and truncating would silently drop acknowledged data.
		if i < lastIdx || s.next < recoveryPoint {
			return corruptAt(s, bad, why)
		}
		p.e.log.Warn("truncating torn tail", "path", s.path(logSuffix), "position", bad, "bytes", fileSize-bad, "reason", why)
		if err := s.log.Truncate(bad); err != nil {
			return err
		}
		if err := s.log.Datasync(); err != nil {
			return err
		}
		s.size = bad
		s.forgetTail()
		// Stale index files could point past the new end.
		p.e.fs.Remove(s.path(indexSuffix))
		p.e.fs.Remove(s.path(timeIndexSuffix))
	}
	// Make whatever the scan accepted durable, so the recovery point and HW
	// can cover it.
	return p.active().log.Datasync()
}

func corruptAt(s *segment, pos int64, why error) error {
	return fmt.Errorf("%w: %s at byte %d: %v", ErrCorruptLog, s.path(logSuffix), pos, why)
}

// CreateTopic creates a topic with partitions partitions and the given
// config overrides (Kafka key names).
func (e *Engine) CreateTopic(name string, partitions int32, configs map[string]string) (TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return TopicInfo{}, err
	}
	if partitions <= 0 {
		return TopicInfo{}, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	cfg, err := ParseTopicConfig(e.Defaults(), configs)
	if err != nil {
		return TopicInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return TopicInfo{}, ErrClosed
	}
	if _, ok := e.topics[name]; ok {
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	t := &topicState{name: name, id: newTopicID(), cfg: cfg}
	if err := e.addPartitions(t, partitions); err != nil {
		return TopicInfo{}, err
	}
	e.topics[name] = t
	if err := e.saveMetaLocked(); err != nil {
		delete(e.topics, name)
		e.dropPartitions(t.parts)
		return TopicInfo{}, fmt.Errorf("%w: saving topic metadata: %v", ErrStorage, err)
	}
	return t.info(), nil
}

// addPartitions creates partitions up to total. e.mu must be held.
func (e *Engine) addPartitions(t *topicState, total int32) error {
	now := time.Now().UnixMilli()
	for i := int32(len(t.parts)); i < total; i++ {
		p, err := e.createPartition(t, i, now)
		if err != nil {
			return err
		}
		t.mu.Lock()
		t.parts = append(t.parts, p)
		t.mu.Unlock()
	}
	return e.fs.SyncDir(e.cfg.Dir)
}

// createPartition makes an empty log for partition idx of t (not yet
// linked into t.parts). e.mu must be held.
func (e *Engine) createPartition(t *topicState, idx int32, nowMs int64) (*Partition, error) {
	p := e.newPartition(t, idx)
	e.fs.RemoveAll(p.dir) // leftovers of an earlier topic of this name
	if err := e.fs.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	s, err := e.createSegment(p.dir, 0, nowMs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.segs, p.hwSeg, p.rendSeg = []*segment{s}, s, s
	if err := p.openEpochs(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if p.ps, err = p.newProducerState(); err != nil {
		return nil, err
	}
	return p, nil
}

func (e *Engine) saveMetaLocked() error {
	var mts []metaTopic
	for _, t := range e.topics {
		info := t.info()
		mt := metaTopic{Name: t.name, ID: fmt.Sprintf("%x", t.id), Partitions: info.Partitions, Configs: info.Config.Overrides()}
		if hosted := t.hosted(); int32(len(hosted)) != info.Partitions {
			mt.Hosted = &hosted
		}
		mts = append(mts, mt)
	}
	return e.meta.save(mts)
}

// dropPartitions closes partitions and removes their directories. Nil
// entries (partitions hosted elsewhere) are skipped.
func (e *Engine) dropPartitions(parts []*Partition) {
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.mu.Lock()
		p.deleted = true
		for _, w := range p.waiters {
			w.finish(fmt.Errorf("%w: %s-%d was deleted", ErrUnknownTopic, p.topic.name, p.idx))
		}
		p.waiters = nil
		p.mu.Unlock()
	}
	if e.j != nil {
		// A topic of the same name may be created again: a replay after
		// a crash must not write the deleted partitions' records into its
		// segments. No append gets past deleted; the barriers wait for
		// the writes already queued, the checkpoint covers them.
		for _, p := range parts {
			if p != nil {
				e.wq.barrier(p)
			}
		}
		if err := e.checkpointJournal(); err != nil {
			e.log.Warn("checkpointing the journal before deleting partitions", "err", err)
		}
	}
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.mu.Lock()
		for _, s := range p.dirty {
			s.release()
		}
		p.dirty = nil
		p.releaseSegments()
		p.mu.Unlock()
		e.fs.RemoveAll(p.dir)
	}
	e.fs.SyncDir(e.cfg.Dir)
	// A topic created again under the same name must not inherit the
	// dropped partitions' log starts.
	if err := e.writeLogStartCheckpoint(); err != nil {
		e.log.Warn("writing "+lsCheckpointName, "err", err)
	}
	e.disk.sample() // space freed: produce may resume now
}

// DeleteTopic removes a topic. Open FileRanges stay readable.
func (e *Engine) DeleteTopic(name string) error {
	e.mu.Lock()
	t, ok := e.topics[name]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	delete(e.topics, name)
	t.mu.RLock()
	parts := append([]*Partition(nil), t.parts...)
	t.mu.RUnlock()
	if err := e.saveMetaLocked(); err != nil {
		if !isNoSpace(err) {
			e.topics[name] = t
			e.mu.Unlock()
			return fmt.Errorf("%w: saving topic metadata: %v", ErrStorage, err)
		}
		// On a full disk topics.json cannot be rewritten until space is
		// freed, and the space is this topic's: remove its logs first,
		// then save again. A crash in between leaves topics.json naming
		// a topic with missing directories, which Open recreates empty
		// and the next reconcile deletes.
		e.mu.Unlock()
		e.dropPartitions(parts)
		e.mu.Lock()
		if err := e.saveMetaLocked(); err != nil {
			e.log.Warn("saving topic metadata after deleting a topic on a full disk", "topic", name, "err", err)
		}
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	e.dropPartitions(parts)
	return nil
}

// CreatePartitions grows a topic to total partitions.
func (e *Engine) CreatePartitions(name string, total int32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if cur := t.info().Partitions; total <= cur {
		return fmt.Errorf("%w: %s has %d partitions, asked for %d", ErrInvalidPartitions, name, cur, total)
	}
	if err := e.addPartitions(t, total); err != nil {
		return err
	}
	if err := e.saveMetaLocked(); err != nil {
		return fmt.Errorf("%w: saving topic metadata: %v", ErrStorage, err)
	}
	return nil
}

// Topic describes one topic.
func (e *Engine) Topic(name string) (TopicInfo, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t, ok := e.topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return t.info(), true
}

// Topics describes every topic, sorted by name.
func (e *Engine) Topics() []TopicInfo {
	e.mu.RLock()
	out := make([]TopicInfo, 0, len(e.topics))
	for _, t := range e.topics {
		out = append(out, t.info())
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Partition returns a partition, or an error wrapping ErrUnknownTopic.
func (e *Engine) Partition(topic string, p int32) (*Partition, error) {
	e.mu.RLock()
	t, ok := e.topics[topic]
	e.mu.RUnlock()
	if ok {
		t.mu.RLock()
		defer t.mu.RUnlock()
		if p >= 0 && int(p) < len(t.parts) && t.parts[p] != nil {
			return t.parts[p], nil
		}
	}
	return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, topic, p)
}

func (e *Engine) allPartitions() []*Partition {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var ps []*Partition
	for _, t := range e.topics {
		t.mu.RLock()
		for _, p := range t.parts {
			if p != nil {
				ps = append(ps, p)
			}
		}
		t.mu.RUnlock()
	}
	return ps
}

func (e *Engine) kickCheckpoint() {
	select {
	case e.ckKick <- struct{}{}:
	default:
	}
}

// background runs retention, interval flushes and checkpoints.
func (e *Engine) background() {
	defer close(e.bgDone)
	retention := time.NewTicker(e.cfg.RetentionCheckInterval)
	defer retention.Stop()
	checkpoint := time.NewTicker(e.cfg.CheckpointInterval)
	defer checkpoint.Stop()
	hwTick := time.NewTicker(e.cfg.HWCheckpointInterval)
	defer hwTick.Stop()
	diskTick := time.NewTicker(e.cfg.DiskCheckInterval)
	defer diskTick.Stop()
	var flushC <-chan time.Time
	if e.cfg.Fsync == FsyncInterval {
		t := time.NewTicker(e.cfg.FsyncInterval)
		defer t.Stop()
		flushC = t.C
	}
	for {
		select {
		case <-e.stopBg:
			return
		case <-retention.C:
			if e.cfg.AwaitDynamicDefaults && !e.dynKnown.Load() {
				// A pass over the static defaults could delete what a
				// dynamic broker config keeps (dynconfig.go).
				continue
			}
			e.RunRetention()
		case <-flushC:
			for _, p := range e.allPartitions() {
				p.mu.RLock()
				dirty := len(p.dirty) > 0
				p.mu.RUnlock()
				if dirty {
					e.wq.requestFlush(p)
				}
			}
		case <-checkpoint.C:
			e.writeCheckpoint()
		case <-hwTick.C:
			e.writeHWCheckpoint()
		case <-diskTick.C:
			e.disk.sample()
		case <-e.ckKick:
			e.writeCheckpoint()
		}
	}
}

// RunRetention applies retention to every partition now and returns how
// many segments it deleted. The background loop calls it periodically.
func (e *Engine) RunRetention() int {
	now := time.Now().UnixMilli()
	n := 0
	for _, p := range e.allPartitions() {
		cfg := p.topic.config()
		if !cfg.DeleteByRetention() {
			// cleanup.policy=compact: the cleaner, not age or size,
			// removes records.
			cfg.RetentionMs, cfg.RetentionBytes = -1, -1
			cfg.LocalRetentionMs, cfg.LocalRetentionBytes = -1, -1
		}
		n += p.applyRetention(cfg, now)
	}
	e.stats.segmentsDeleted.Add(int64(n))
	if n > 0 {
		e.disk.sample() // space freed: produce may resume now
	}
	return n
}

// readCheckpoint parses the recovery point file: a version line, a count
// line, then "<topic> <partition> <offset>" lines.
func (e *Engine) readCheckpoint() (map[string]int64, error) {
	return e.readOffsetsFile(checkpointName)
}

// readOffsetsFile parses one of the offset checkpoint files (Kafka's
// text format); a missing file is (nil, nil).
func (e *Engine) readOffsetsFile(name string) (map[string]int64, error) {
	path := filepath.Join(e.cfg.Dir, name)
	b, err := vfs.ReadFile(e.fs, path, 0)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("%w: %s: bad header", ErrCorruptLog, path)
	}
	rps := map[string]int64{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: %s: bad line %q", ErrCorruptLog, path, l)
		}
		pi, err1 := strconv.Atoi(f[1])
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: %s: bad line %q", ErrCorruptLog, path, l)
		}
		rps[partitionDirName(f[0], int32(pi))] = off
	}
	return rps, nil
}

func (e *Engine) writeCheckpoint() error {
	e.ckMu.Lock()
	defer e.ckMu.Unlock()
	ps := e.allPartitions()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(ps))
	for _, p := range ps {
		p.mu.RLock()
		fmt.Fprintf(&buf, "%s %d %d\n", p.topic.name, p.idx, p.durable)
		p.mu.RUnlock()
	}
	err := vfs.WriteFileAtomic(e.fs, filepath.Join(e.cfg.Dir, checkpointName), buf.Bytes(), 0o644)
	if !e.closed.Load() {
		e.ckFail.Report(err)
	}
	return err
}

// Close flushes every partition, writes indexes and checkpoints, and marks
// the shutdown clean unless a partition had failed.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

func (e *Engine) close() error {
	e.closed.Store(true)
	close(e.stopBg)
	<-e.bgDone
	e.cleaner.stop()
	ps := e.allPartitions()
	// Barrier: appends that passed the closed check finish before the
	// final flush round collects their partitions.
	for _, p := range ps {
		p.mu.Lock()
		p.mu.Unlock()
		e.wq.requestFlush(p)
	}
	e.wq.close()
	var errs []error
	offline := false
	// What the last journal writes covered goes into the segments.
	if err := e.closeJournal(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range ps {
		p.mu.Lock()
		if p.failed != nil {
			// Already reported (offline.go); it is not a close failure,
			// but the shutdown is not clean: no marker, so the next Open
			// scans and recovers the log.
			offline = true
		} else if err := p.active().writeIndexes(); err != nil {
			errs = append(errs, err)
		} else {
			p.writeProducerSnapshot()
		}
		p.mu.Unlock()
	}
	if err := e.writeCheckpoint(); err != nil {
		errs = append(errs, err)
	}
	if err := e.writeHWCheckpoint(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && !offline {
		if err := vfs.WriteFileAtomic(e.fs, filepath.Join(e.cfg.Dir, cleanMarkerName), nil, 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	e.releaseAll()
	return errors.Join(errs...)
}

// closeJournal checkpoints and closes the journal, if one is in use.
func (e *Engine) closeJournal() error {
	if e.j == nil {
		return nil
	}
	return e.j.close()
}

// checkpointJournal makes everything the journal holds durable in the
// segments and moves its start past it, so a replay after a crash cannot
// write those bytes again: called before an operation rewrites or
// removes segment bytes other than by appending (truncations, topic
// deletion). Every write of the partitions concerned must have completed
// (barrier). It takes no partition lock; callers may hold one.
func (e *Engine) checkpointJournal() error {
	if e.j == nil {
		return nil
	}
	if err := e.wq.drainJournal(); err != nil {
		return err
	}
	return e.j.checkpoint()
}

func (e *Engine) releaseAll() {
	for _, p := range e.allPartitions() {
		p.mu.Lock()
		for _, s := range p.dirty {
			s.release()
		}
		p.dirty = nil
		p.releaseSegments()
		p.mu.Unlock()
	}
}
