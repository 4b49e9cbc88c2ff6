// Package upload is the remote tier's write side: on the brokers that lead
// a partition of a remote-storage topic it copies sealed segments to the
// object store and commits them to the remote-log metadata, applies
// retention.ms/retention.bytes to the remote copy, and (on the active
// controller's broker) deletes the objects of deleted topics. On every
// broker it hands the engine the remote state the metadata describes
// (engine.Partition.SetRemoteState), which is what lets local retention
// delete uploaded segments.
//
// Goroutines: one per led partition (task.go: uploads, remote retention,
// the orphan sweep at its start) and one purger (purge.go). All of them
// work in the background: produce never waits for the store or the
// controller; a failing store only delays uploads, and with them local
// deletion (the engine counts what it holds back).
//
// Idempotence: every upload attempt writes its objects under a fresh
// rlm.SegmentID, and only the controller's commit makes them visible. An
// attempt that is refused deletes its objects; one whose outcome is
// unknown (a commit that timed out may still be applied) keeps them, and
// the orphan sweep of the next task on the partition deletes them if the
// commit never happened. A committed segment's objects are deleted only by
// remote retention (after the metadata expired it) or the topic purge.
package upload

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// Meta is the controller side the manager needs (*controller.Node).
type Meta interface {
	MetadataImage() *metadata.Image
	CommitRemoteSegment(ctx context.Context, seg rlm.Segment) error
	DeleteRemoteSegments(ctx context.Context, topicID metadata.UUID, partition, leaderEpoch int32, ids []rlm.SegmentID, logStart int64) error
	RemoteTopicPurged(ctx context.Context, id metadata.UUID) error
	// Controller is the active controller's node id (-1 unknown): the
	// broker with that id purges deleted topics' objects.
	Controller() int32
}

// Config tunes the manager; zero values take the defaults in brackets.
type Config struct {
	// BrokerID is this broker's node id (required).
	BrokerID int32
	// Interval is how often each led partition looks for sealed segments
	// and applies remote retention [1s].
	Interval time.Duration
	// Concurrency bounds the segments uploaded at once over the broker [2].
	Concurrency int
	// MinBackoff and MaxBackoff bound the retry delay after a failed
	// upload or commit (doubling, with jitter) [500ms, 30s].
	MinBackoff, MaxBackoff time.Duration
	// OpTimeout bounds one object-store call or metadata commit [30s]; a
	// Put gets OpTimeout plus its size at MinPutRate on top, so a hung
	// store shows in the error metrics and the log within about
	// OpTimeout while a 1 GiB segment still has time to go out.
	OpTimeout time.Duration
	// MaxRate caps this broker's upload rate in bytes per second over all
	// partitions (0: no cap), so uploads do not come as bursts that the
	// produce path feels; set it above the broker's share of the ingest
	// rate or the upload lag grows without bound.
	MaxRate int64
	// MinPutRate is the slowest upload rate, in bytes per second, that a
	// Put's deadline allows for [8 MiB/s].
	MinPutRate int64
	Logger     *slog.Logger
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 2
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.OpTimeout <= 0 {
		c.OpTimeout = 30 * time.Second
	}
	if c.MinPutRate <= 0 {
		c.MinPutRate = 8 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Stats are the counters and gauges /metrics exports.
type Stats struct {
	SegmentsUploaded int64 // committed uploads (counter)
	BytesUploaded    int64 // log bytes of committed uploads (counter)
	UploadErrors     int64 // failed attempts (object store or commit; counter)
	SegmentsDeleted  int64 // remote segments deleted by retention or purge (counter)
	// LagBytes and LagSegments: sealed segments below the HW and LSO of the
	// partitions this broker leads that are not uploaded yet (gauge).
	LagBytes, LagSegments int64
	// RemoteBytes: log bytes in the remote tier of the partitions this
	// broker leads (gauge, from the metadata image).
	RemoteBytes int64
	// Stalled: led partitions whose last attempt failed and that have not
	// uploaded since (gauge); non-zero means the object store or the
	// controller is failing.
	Stalled int64
}

// partKey names a partition by topic id, which a re-created topic of the
// same name does not share.
type partKey struct {
	topic     metadata.UUID
	partition int32
}

// Manager runs the uploads of one broker.
type Manager struct {
	cfg   Config
	eng   *engine.Engine
	store objstore.Store
	meta  Meta
	drop  func(key string)
	log   *slog.Logger

	// ctx is cancelled by Close; every goroutine and store call hangs
	// off it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// sem bounds the segment uploads in flight over all partitions.
	sem chan struct{}
	// pace caps the upload rate (nil: MaxRate 0).
	pace *pacer
	// purgeWake wakes the purger when an image lists pending purges.
	purgeWake chan struct{}

	// recMu serialises Reconcile, so an older image never overwrites the
	// engine state a newer one set.
	recMu sync.Mutex
	img   atomic.Pointer[metadata.Image]

	mu      sync.Mutex // guards started, closed, tasks
	started bool
	closed  bool
	tasks   map[partKey]*task

	segmentsUploaded, bytesUploaded, uploadErrors, segmentsDeleted atomic.Int64
}

// New builds a manager. drop (may be nil) is called with each object key
// the manager deletes, so the chunk cache forgets it.
func New(cfg Config, eng *engine.Engine, store objstore.Store, meta Meta, drop func(key string)) *Manager {
	cfg = cfg.withDefaults()
	if drop == nil {
		drop = func(string) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		cfg: cfg, eng: eng, store: store, meta: meta, drop: drop, log: cfg.Logger.With("component", "upload"),
		ctx: ctx, cancel: cancel,
		sem:       make(chan struct{}, cfg.Concurrency),
		pace:      newPacer(cfg.MaxRate),
		purgeWake: make(chan struct{}, 1),
		tasks:     map[partKey]*task{},
	}
}

// Start begins the background work: the purger, and the tasks of the
// partitions the last reconciled image says this broker leads.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	m.wg.Add(1)
	go m.purger()
	if img := m.img.Load(); img != nil {
		m.syncTasksLocked(img)
	}
}

// Reconcile is called by the broker after each metadata image change
// (and once after start). It must not block on I/O: it records img, sets
// every local partition's engine.RemoteState from it, and starts or stops
// the per-partition upload tasks for the partitions this broker leads.
func (m *Manager) Reconcile(img *metadata.Image) {
	if img == nil {
		return
	}
	m.recMu.Lock()
	defer m.recMu.Unlock()
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return // the engine may be closing too
	}
	if old := m.img.Load(); old != nil && old.Index() > img.Index() {
		return // an older image after a newer one: keep the newer state
	}
	m.img.Store(img)
	m.setRemoteStates(img)
	m.mu.Lock()
	if m.started && !m.closed {
		m.syncTasksLocked(img)
	}
	m.mu.Unlock()
	if len(img.PendingRemotePurge()) > 0 {
		select {
		case m.purgeWake <- struct{}{}:
		default:
		}
	}
}

// Wake makes every task look for work now instead of at its next
// interval (a segment just rolled, a test).
func (m *Manager) Wake() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tasks {
		t.poke()
	}
	select {
	case m.purgeWake <- struct{}{}:
	default:
	}
}

// remoteEnabled reports whether the metadata knows topic t as a remote
// storage one: by its config, or because its partitions have remote data
// (the config cannot be turned off, but a remote state outlives nothing
// else).
func remoteEnabled(img *metadata.Image, t *metadata.Topic) bool {
	if strings.EqualFold(strings.TrimSpace(t.Configs[engine.RemoteStorageEnableKey]), "true") {
		return true
	}
	for i := range t.Partitions {
		if img.RemoteEnd(t.ID, int32(i)) >= 0 || img.RemoteLogStart(t.ID, int32(i)) >= 0 {
			return true
		}
	}
	return false
}

// remoteState is the engine state the image describes for one partition.
func remoteState(img *metadata.Image, tid metadata.UUID, part int32) engine.RemoteState {
	start := img.RemoteLogStart(tid, part)
	return engine.RemoteState{Enabled: true, LogStart: start, UploadedNext: contiguousEnd(img.RemoteSegments(tid, part), start)}
}

// contiguousEnd is the end of the gap-free run of segments from start
// (segs sorted by base offset): local data below it is in the remote
// tier. -1 when start is -1 (nothing committed, start never raised).
// The controller refuses gaps, so this equals max(start, RemoteEnd) on a
// sound image; it is recomputed from the segments anyway because local
// deletion trusts it, and a metadata bug must keep data, not delete it.
func contiguousEnd(segs []rlm.Segment, start int64) int64 {
	if start < 0 {
		return -1
	}
	end := start
	for _, s := range segs {
		if s.NextOffset <= end {
			continue
		}
		if s.BaseOffset > end {
			break
		}
		end = s.NextOffset
	}
	return end
}

// setRemoteStates hands every local partition of a remote-storage topic
// its remote state, on leaders and followers alike.
func (m *Manager) setRemoteStates(img *metadata.Image) {
	for _, t := range img.Topics() {
		if !remoteEnabled(img, &t) {
			continue
		}
		if ti, ok := m.eng.Topic(t.Name); !ok || ti.ID != t.ID {
			continue // not here, or an older topic of the name the broker is about to drop
		}
		for i := range t.Partitions {
			p, err := m.eng.Partition(t.Name, int32(i))
			if err != nil {
				continue // not hosted here
			}
			rs := remoteState(img, t.ID, int32(i))
			if cur, known := p.RemoteState(); known && cur == rs {
				continue
			}
			if err := p.SetRemoteState(rs); err != nil {
				m.log.Error("remote state refused by the engine", "topic", t.Name, "partition", i, "err", err)
			}
		}
	}
}

// syncTasksLocked starts a task for each partition of a remote-storage
// topic this broker leads in img and stops those whose leadership, epoch
// or topic is gone. Lock must be held.
func (m *Manager) syncTasksLocked(img *metadata.Image) {
	want := map[partKey]*task{}
	for _, t := range img.Topics() {
		if !remoteEnabled(img, &t) {
			continue
		}
		if ti, ok := m.eng.Topic(t.Name); !ok || ti.ID != t.ID {
			continue
		}
		for i, p := range t.Partitions {
			if p.Leader != m.cfg.BrokerID {
				continue
			}
			if _, err := m.eng.Partition(t.Name, int32(i)); err != nil {
				continue
			}
			k := partKey{t.ID, int32(i)}
			if cur := m.tasks[k]; cur != nil && cur.epoch == p.LeaderEpoch {
				want[k] = cur
				continue
			}
			want[k] = &task{m: m, topic: t.Name, tid: t.ID, part: int32(i), epoch: p.LeaderEpoch}
		}
	}
	for k, cur := range m.tasks {
		if want[k] != cur {
			cur.cancel()
		}
	}
	for k, t := range want {
		if m.tasks[k] != t {
			t.start()
		}
	}
	m.tasks = want
}

// Stats returns the current counters.
func (m *Manager) Stats() Stats {
	s := Stats{
		SegmentsUploaded: m.segmentsUploaded.Load(),
		BytesUploaded:    m.bytesUploaded.Load(),
		UploadErrors:     m.uploadErrors.Load(),
		SegmentsDeleted:  m.segmentsDeleted.Load(),
	}
	img := m.img.Load()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tasks {
		s.LagBytes += t.lagBytes.Load()
		s.LagSegments += t.lagSegments.Load()
		if t.stalled.Load() {
			s.Stalled++
		}
		if img != nil {
			s.RemoteBytes += img.RemoteSizeBytes(t.tid, t.part)
		}
	}
	return s
}

// Close stops every task and waits for them; uploads in flight are
// abandoned (their objects stay orphaned: never committed, never read).
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	for _, t := range m.tasks {
		t.cancel()
	}
	m.tasks = map[partKey]*task{}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

// opCtx bounds one store call or commit by OpTimeout under parent.
func (m *Manager) opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, m.cfg.OpTimeout)
}

// putCtx bounds a Put of size bytes: OpTimeout plus the time size takes
// at MinPutRate, or at this upload's share of MaxRate when that is lower.
func (m *Manager) putCtx(parent context.Context, size int64) (context.Context, context.CancelFunc) {
	rate := m.cfg.MinPutRate
	if m.cfg.MaxRate > 0 {
		rate = max(1, min(rate, m.cfg.MaxRate/int64(m.cfg.Concurrency)))
	}
	return context.WithTimeout(parent, putTimeout(m.cfg.OpTimeout, rate, size))
}

func putTimeout(base time.Duration, rate, size int64) time.Duration {
	return base + time.Duration(float64(size)/float64(rate)*float64(time.Second))
}

// deleteKeys deletes objects (a missing one is fine) and tells the cache.
// It runs under the manager's context, not a task's, so a task stopped
// by a leader change still cleans up what it knows is uncommitted.
func (m *Manager) deleteKeys(keys []string) error {
	for _, k := range keys {
		ctx, cancel := m.opCtx(m.ctx)
		err := m.store.Delete(ctx, k)
		cancel()
		if err != nil {
			return err
		}
		m.drop(k)
	}
	return nil
}
