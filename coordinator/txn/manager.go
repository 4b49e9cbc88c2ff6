package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Manager is the transaction coordinator of one node: every transactional
// id whose __transaction_state partition this node has loaded, each
// behind its own lock.
//
// Lock order: a transaction's mu, then Manager.mu. Code holding
// Manager.mu never takes a transaction lock.
type Manager struct {
	cfg     Config
	persist Persister
	ids     IDAllocator
	markers MarkerWriter
	clock   Clock

	mu         sync.Mutex
	txns       map[string]*txn
	parts      map[int32]*partition
	nextExpiry time.Time
}

type partition struct {
	loaded bool
	// epoch is the __transaction_state partition's leader epoch: the
	// coordinator epoch written into markers.
	epoch int32
}

// txn is one transactional id. All fields are guarded by mu.
type txn struct {
	mu   sync.Mutex
	id   string
	part int32
	// coordEpoch is copied from the partition at creation/load.
	coordEpoch int32
	meta       Metadata
	// lastProducerID/lastEpoch let a KIP-360 InitProducerId retry of a
	// bump whose answer was lost get the same answer again.
	lastProducerID int64
	lastEpoch      int16
	// pending: a record for a transition is being appended; the state
	// changes only when it is durable.
	pending bool
	// markersInFlight / retryMarkers track the Prepare* -> Complete* step.
	markersInFlight bool
	retryMarkers    bool
	// removed: unloaded or expired; goroutines finishing later drop their
	// results and answer ErrNotCoordinator.
	removed bool
	// queued are requests that arrived while a record was being written;
	// they run again once it is durable (AddPartitionsToTxn calls for one
	// transaction come in parallel, one per partition leader).
	queued []func()
	// onSettled run once the transaction leaves Prepare* (or t is
	// removed): EndTxn answers waiting for the markers.
	onSettled []func()
}

// settle runs the onSettled callbacks once t is out of Prepare* or gone.
// t.mu held.
func (t *txn) settle() {
	if !t.removed && (t.meta.State == PrepareCommit || t.meta.State == PrepareAbort) {
		return
	}
	for _, f := range t.onSettled {
		f()
	}
	t.onSettled = nil
}

// NewManager returns a Manager that owns no partition yet.
func NewManager(cfg Config, p Persister, ids IDAllocator, mw MarkerWriter, clock Clock) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil || ids == nil || mw == nil {
		return nil, fmt.Errorf("txn: NewManager needs a Persister, an IDAllocator and a MarkerWriter")
	}
	if clock == nil {
		clock = SystemClock{}
	}
	return &Manager{
		cfg: cfg, persist: p, ids: ids, markers: mw, clock: clock,
		txns:  make(map[string]*txn),
		parts: make(map[int32]*partition),
	}, nil
}

// Partition returns the __transaction_state partition of transactionalID.
func (m *Manager) Partition(transactionalID string) int32 {
	return PartitionFor(transactionalID, m.cfg.TransactionLogPartitions)
}

// BeginLoad marks partition p as owned but loading: its ids' requests get
// ErrCoordinatorLoadInProgress until FinishLoad.
func (m *Manager) BeginLoad(p int32) {
	m.mu.Lock()
	m.parts[p] = &partition{}
	m.mu.Unlock()
}

// FinishLoad installs the transactions of partition p (snap may be nil)
// with coordinatorEpoch, the partition's leader epoch, and starts
// answering for them. Transactions stuck in PrepareCommit/PrepareAbort
// get their markers sent again now; Ongoing ones time out in Tick.
func (m *Manager) FinishLoad(p int32, coordinatorEpoch int32, snap *Snapshot) {
	var loaded []*txn
	if snap != nil {
		for id, md := range snap.Txns {
			if m.Partition(id) != p || md.State == Dead || md.State == PrepareEpochFence {
				continue // misplaced, or states Kafka never leaves in the log
			}
			loaded = append(loaded, &txn{id: id, part: p, coordEpoch: coordinatorEpoch, meta: md.clone(), lastProducerID: -1, lastEpoch: -1})
		}
	}
	m.mu.Lock()
	// Whatever an earlier ownership of p left is replaced, not merged:
	// the records just loaded are the truth.
	var stale []*txn
	for id, t := range m.txns {
		if t.part == p {
			stale = append(stale, t)
			delete(m.txns, id)
		}
	}
	for _, t := range loaded {
		m.txns[t.id] = t
	}
	m.parts[p] = &partition{loaded: true, epoch: coordinatorEpoch}
	m.mu.Unlock()
	for _, t := range stale {
		t.mu.Lock()
		t.removed = true
		t.mu.Unlock()
	}
	for _, t := range loaded {
		t.mu.Lock()
		if t.meta.State == PrepareCommit || t.meta.State == PrepareAbort {
			m.sendMarkers(t)
		}
		t.mu.Unlock()
	}
}

// Unload gives up partition p: its transactions are dropped and whatever
// waits on them is answered ErrNotCoordinator.
func (m *Manager) Unload(p int32) {
	m.mu.Lock()
	delete(m.parts, p)
	var drop []*txn
	for id, t := range m.txns {
		if t.part == p {
			drop = append(drop, t)
			delete(m.txns, id)
		}
	}
	m.mu.Unlock()
	for _, t := range drop {
		t.mu.Lock()
		t.removed = true
		t.settle()
		queued := t.queued
		t.queued = nil
		t.mu.Unlock()
		for _, q := range queued {
			q() // answered ErrNotCoordinator
		}
	}
}

// lockTxn returns id's transaction locked. With create, a missing one is
// made as a placeholder (ProducerID -1) for InitProducerId to fill in;
// otherwise (nil, nil) means unknown.
func (m *Manager) lockTxn(id string, create bool) (*txn, error) {
	for {
		m.mu.Lock()
		p := m.Partition(id)
		ps := m.parts[p]
		switch {
		case ps == nil:
			m.mu.Unlock()
			return nil, ErrNotCoordinator
		case !ps.loaded:
			m.mu.Unlock()
			return nil, ErrCoordinatorLoadInProgress
		}
		t := m.txns[id]
		if t == nil {
			if !create {
				m.mu.Unlock()
				return nil, nil
			}
			t = &txn{id: id, part: p, coordEpoch: ps.epoch, lastProducerID: -1, lastEpoch: -1,
				meta: Metadata{ProducerID: -1, ProducerEpoch: -1, State: Empty, StartMs: -1, PreviousProducerID: -1, NextProducerID: -1}}
			m.txns[id] = t
		}
		m.mu.Unlock()
		t.mu.Lock()
		if !t.removed {
			return t, nil
		}
		t.mu.Unlock()
	}
}

// forget removes t from the map. t.mu held (lock order allows it).
func (m *Manager) forget(t *txn) {
	t.removed = true
	m.mu.Lock()
	if m.txns[t.id] == t {
		delete(m.txns, t.id)
	}
	m.mu.Unlock()
}

func (m *Manager) nowMs() int64 { return m.clock.Now().UnixMilli() }

// write appends next as t's record and applies it once durable, then
// calls done (with t.mu held) with nil or the client-facing error. A nil
// next writes a tombstone. t.mu held.
func (m *Manager) write(t *txn, next *Metadata, done func(error)) {
	kv := statelog.KV{Key: EncodeKey(t.id)}
	if next != nil {
		kv.Value = EncodeValue(*next)
	}
	t.pending = true
	w := m.persist.Append(t.part, []statelog.KV{kv})
	go func() {
		err := w.Wait()
		t.mu.Lock()
		t.pending = false
		switch {
		case t.removed:
			err = ErrNotCoordinator
		case err != nil:
			err = appendErr(err)
		case next == nil:
			m.forget(t)
		default:
			t.meta = *next
		}
		done(err)
		t.settle()
		queued := t.queued
		t.queued = nil
		t.mu.Unlock()
		for _, q := range queued {
			q()
		}
	}()
}

// appendErr maps a Persister failure: a lost partition is NOT_COORDINATOR,
// anything else COORDINATOR_NOT_AVAILABLE, as Kafka maps append errors.
func appendErr(err error) error {
	if errors.Is(err, ErrNotCoordinator) {
		return err
	}
	return fmt.Errorf("%w: appending to %s: %w", ErrCoordinatorNotAvailable, TransactionTopic, err)
}

// sendMarkers starts the Prepare* -> Complete* step: markers to every
// partition, then the Complete record. t.mu held; t is in Prepare*.
func (m *Manager) sendMarkers(t *txn) {
	if t.markersInFlight || t.pending {
		return
	}
	t.markersInFlight, t.retryMarkers = true, false
	commit := t.meta.State == PrepareCommit
	job := Markers{
		TransactionalID: t.id, ProducerID: t.meta.ProducerID, ProducerEpoch: t.meta.ProducerEpoch,
		Commit: commit, CoordinatorEpoch: t.coordEpoch, Partitions: slices.Clone(t.meta.Partitions),
	}
	w := m.markers.WriteMarkers(job)
	go func() {
		err := w.Wait()
		t.mu.Lock()
		defer t.mu.Unlock()
		t.markersInFlight = false
		if t.removed || errors.Is(err, ErrNotCoordinator) {
			return // the next coordinator resends from the Prepare record
		}
		if err != nil {
			t.retryMarkers = true
			return
		}
		next := t.meta.clone()
		next.State = CompleteAbort
		if commit {
			next.State = CompleteCommit
		}
		next.Partitions = nil
		next.LastUpdateMs = m.nowMs()
		m.write(t, &next, func(err error) {
			if err != nil {
				t.retryMarkers = true
			}
		})
	}()
}

// fenceAndAbort aborts t's Ongoing transaction with the epoch bumped, so
// the producer that opened it is fenced at the coordinator and, through
// the markers, at every partition. done runs once the PrepareAbort record
// is durable (or failed). t.mu held.
func (m *Manager) fenceAndAbort(t *txn, done func(error)) {
	next := t.meta.clone()
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	next.State = PrepareAbort
	next.LastUpdateMs = m.nowMs()
	m.write(t, &next, func(err error) {
		if err == nil {
			t.lastProducerID, t.lastEpoch = -1, -1
			m.sendMarkers(t)
		}
		done(err)
	})
}

func (m *Manager) snapshotTxns() []*txn {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := make([]*txn, 0, len(m.txns))
	for _, t := range m.txns {
		ts = append(ts, t)
	}
	return ts
}

// Tick fires what is due at now: Ongoing transactions past their timeout
// are aborted with an epoch bump; failed marker jobs are sent again; and,
// every RemoveExpiredInterval, transactional ids idle longer than
// TransactionalIDExpiration are tombstoned and forgotten.
func (m *Manager) Tick(now time.Time) {
	m.mu.Lock()
	expire := !now.Before(m.nextExpiry)
	if expire {
		m.nextExpiry = now.Add(m.cfg.RemoveExpiredInterval)
	}
	m.mu.Unlock()
	nowMs := now.UnixMilli()
	for _, t := range m.snapshotTxns() {
		t.mu.Lock()
		switch {
		case t.removed || t.pending:
		case t.meta.ProducerID < 0:
			m.forget(t) // an InitProducerId placeholder whose write failed
		case t.meta.State == Ongoing && nowMs > t.meta.StartMs+int64(t.meta.TimeoutMs):
			m.fenceAndAbort(t, func(error) {})
		case (t.meta.State == PrepareCommit || t.meta.State == PrepareAbort) && t.retryMarkers:
			m.sendMarkers(t)
		case expire && (t.meta.State == Empty || t.meta.State == CompleteCommit || t.meta.State == CompleteAbort) &&
			nowMs-t.meta.LastUpdateMs >= m.cfg.TransactionalIDExpiration.Milliseconds():
			m.write(t, nil, func(error) {})
		}
		t.mu.Unlock()
	}
}

// Run calls Tick every interval until ctx ends. Kafka checks timeouts
// every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms);
// a second is plenty.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			m.Tick(m.clock.Now())
		}
	}
}
