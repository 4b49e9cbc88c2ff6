// Package upload is the remote tier's write side: on the brokers that lead
// a partition of a remote-storage topic it copies sealed segments to the
// object store and commits them to the remote-log metadata, applies
// retention.ms/retention.bytes to the remote copy, and (on the active
// controller's broker) deletes the objects of deleted topics. On every
// broker it hands the engine the remote state the metadata describes
// (engine.Partition.SetRemoteState), which is what lets local retention
// delete uploaded segments.
//
// CONTRACT (issue 21, round 2): the types and signatures below are what
// the broker wiring builds against; the bodies are placeholders that the
// uploader's engineer replaces.
package upload

import (
	"context"
	"log/slog"
	"time"

	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/rlm"
)

// Meta is the controller side the manager needs (*coordinator.Node).
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
	// OpTimeout bounds one object-store call or metadata commit [2m].
	OpTimeout time.Duration
	Logger    *slog.Logger
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

// Manager runs the uploads of one broker.
type Manager struct {
	cfg   Config
	eng   *engine.Engine
	store objstore.Store
	meta  Meta
	drop  func(key string)
}

// New builds a manager. drop (may be nil) is called with each object key
// the manager deletes, so the chunk cache forgets it.
func New(cfg Config, eng *engine.Engine, store objstore.Store, meta Meta, drop func(key string)) *Manager {
	return &Manager{cfg: cfg, eng: eng, store: store, meta: meta, drop: drop}
}

// Start begins the background work (placeholder: none yet).
func (m *Manager) Start() {}

// Reconcile is called by the broker after each metadata image change
// (and once after start). It must not block on I/O: it records img, sets
// every local partition's engine.RemoteState from it, and starts or stops
// the per-partition upload tasks for the partitions this broker leads.
func (m *Manager) Reconcile(img *metadata.Image) {}

// Stats returns the current counters.
func (m *Manager) Stats() Stats { return Stats{} }

// Close stops every task and waits for them; uploads in flight are
// abandoned (their objects stay orphaned: never committed, never read).
func (m *Manager) Close() error { return nil }
