package share

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/coordinator/internal/idletick"
)

// Key names a share-partition: a group's view of one topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// TP is a topic partition by topic id.
type TP struct {
	TopicID   [16]byte
	Partition int32
}

func compareTP(a, b TP) int {
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// entry is one share-partition behind its own lock.
type entry struct {
	mu sync.Mutex
	p  *Partition
	// epoch is the state epoch p was read or created at; writes carry it.
	epoch int32
	// leaderEpoch is the data partition's leader epoch p was taken over
	// at (-1: unknown); writes carry it, so a newer leader fences them.
	leaderEpoch int32
	// dead: the entry left the map (a failed write, a leader move);
	// whoever finds it so looks the key up again.
	dead bool
}

// Manager holds the share-partitions this broker leads and the share
// sessions of the consumers that fetch them.
//
// Lock order: Manager.mu, then an entry's mu is never taken while
// holding Manager.mu (lookups copy the pointer and release first).
type Manager struct {
	cfg     Config
	persist Persister
	configs atomic.Pointer[func(group string) map[string]string]

	mu       sync.Mutex
	parts    map[Key]*entry
	sessions map[SessionKey]*session
	// leaders is the leader epoch of each data partition led here, as
	// Lead was last told.
	leaders map[TP]int32
	// changed is closed (and replaced) when records may have become
	// acquirable: released, expired, a start offset moved.
	changed chan struct{}
	// busy carries a token when a share-partition or session appears, so
	// Run, asleep while there is none, starts ticking.
	busy idletick.Wake
}

// NewManager returns a Manager with no share-partitions; p nil keeps the
// state in memory only (NewMemoryPersister).
func NewManager(cfg Config, p Persister) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		p = NewMemoryPersister()
	}
	return &Manager{
		cfg:      cfg,
		persist:  p,
		parts:    make(map[Key]*entry),
		sessions: make(map[SessionKey]*session),
		leaders:  make(map[TP]int32),
		changed:  make(chan struct{}),
		busy:     idletick.NewWake(),
	}, nil
}

// Config returns the broker-wide settings.
func (m *Manager) Config() Config { return m.cfg }

// SetGroupConfigs gives the Manager the groups' dynamic configs (the
// metadata image's GROUP resources); until then every group has the
// broker's defaults.
func (m *Manager) SetGroupConfigs(f func(group string) map[string]string) {
	m.configs.Store(&f)
}

// GroupConfig returns group's effective settings; a config the image
// holds that no longer parses is ignored (defaults apply).
func (m *Manager) GroupConfig(group string) GroupConfig {
	var kv map[string]string
	if f := m.configs.Load(); f != nil {
		kv = (*f)(group)
	}
	gc, err := m.cfg.ParseGroupConfig(kv)
	if err != nil {
		gc, _ = m.cfg.ParseGroupConfig(nil)
	}
	return gc
}

// Changed returns a channel closed at the next release, lock expiry or
// start move of any share-partition: a long poll that found nothing to
// acquire waits on it (and on the log's own changes).
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *Manager) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// lookup returns k's entry locked: the one held, else one restored from
// the Persister's snapshot, else (when start is set) a new one at start(),
// written before it is used; nil (and no error) when there is none. An
// error is the Persister's: nothing is created then.
func (m *Manager) lookup(k Key, start func() int64) (*entry, error) {
	for {
		m.mu.Lock()
		e := m.parts[k]
		if e == nil {
			e = &entry{}
			m.parts[k] = e
			m.busy.Notify()
		}
		leaderEpoch, led := m.leaders[TP{k.TopicID, k.Partition}]
		m.mu.Unlock()
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			continue
		}
		if e.p != nil {
			return e, nil
		}
		if !led {
			leaderEpoch = -1
		}
		e.leaderEpoch = leaderEpoch
		s, ok, err := m.persist.Read(k, leaderEpoch)
		switch {
		case errors.Is(err, ErrFencedLeaderEpoch):
			m.drop(k, e)
			e.mu.Unlock()
			return nil, fmt.Errorf("reading %v: %w", k, err)
		case err != nil:
			m.drop(k, e)
			e.mu.Unlock()
			return nil, fmt.Errorf("%w: reading %v: %w", ErrStateUnavailable, k, err)
		case ok:
			e.p, e.epoch = Restore(s), s.Epoch
		case start == nil:
			m.drop(k, e)
			e.mu.Unlock()
			return nil, nil
		default:
			e.p, e.epoch = NewPartition(start()), s.Epoch
			if err := m.save(k, e); err != nil {
				e.mu.Unlock()
				return nil, err
			}
		}
		return e, nil
	}
}

// drop takes e, locked, out of the map for good.
func (m *Manager) drop(k Key, e *entry) {
	e.dead, e.p = true, nil
	m.mu.Lock()
	if m.parts[k] == e {
		delete(m.parts, k)
	}
	m.mu.Unlock()
}

// save writes e's state, e locked. On failure the entry is dropped: what
// the store holds is the state (acquired records there are available
// again), and the next use reads it back.
func (m *Manager) save(k Key, e *entry) error {
	s := e.p.Snapshot()
	s.Epoch, s.LeaderEpoch = e.epoch, e.leaderEpoch
	err := m.persist.Write(k, s)
	if err == nil {
		return nil
	}
	m.drop(k, e)
	switch {
	case errors.Is(err, ErrFencedStateEpoch):
		return fmt.Errorf("%w: the share state was reset or deleted: %w", ErrInvalidRecordState, err)
	case errors.Is(err, ErrFencedLeaderEpoch):
		return fmt.Errorf("writing %v: %w", k, err)
	}
	return fmt.Errorf("%w: writing %v: %w", ErrStateUnavailable, k, err)
}

// Forget drops what this broker holds of tp's share-partitions (every
// group's): its leadership of tp ended, or moved to a new epoch, so
// another leader may have changed the state since. A later use reads
// the state from the Persister again.
func (m *Manager) Forget(tp TP) {
	m.mu.Lock()
	keys, gone := m.entriesOf(tp)
	delete(m.leaders, tp) // not led here now: a later Lead starts afresh
	m.mu.Unlock()
	for i, e := range gone {
		e.mu.Lock()
		if !e.dead {
			m.drop(keys[i], e)
		}
		e.mu.Unlock()
	}
	if len(gone) > 0 {
		m.notify()
	}
}

// Lead tells the Manager that this broker leads tp at leaderEpoch (the
// share requests' leader check calls it). State held from an older epoch
// is dropped: another leader may have changed it since. State is read
// and written at the newest epoch Lead was told, so the store fences a
// deposed leader of tp (ErrFencedLeaderEpoch) once this one took the
// state over.
func (m *Manager) Lead(tp TP, leaderEpoch int32) {
	m.mu.Lock()
	if old, ok := m.leaders[tp]; ok && old >= leaderEpoch {
		m.mu.Unlock()
		return
	}
	m.leaders[tp] = leaderEpoch
	keys, stale := m.entriesOf(tp)
	m.mu.Unlock()
	dropped := false
	for i, e := range stale {
		e.mu.Lock()
		if !e.dead && e.p != nil && e.leaderEpoch < leaderEpoch {
			m.drop(keys[i], e)
			dropped = true
		}
		e.mu.Unlock()
	}
	if dropped {
		m.notify()
	}
}

// entriesOf returns tp's share-partitions (every group's); m.mu is held.
func (m *Manager) entriesOf(tp TP) (keys []Key, es []*entry) {
	for k, e := range m.parts {
		if k.TopicID == tp.TopicID && k.Partition == tp.Partition {
			keys = append(keys, k)
			es = append(es, e)
		}
	}
	return keys, es
}

// Held returns the topic partitions this broker holds share state of.
func (m *Manager) Held() []TP {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[TP]bool{}
	var out []TP
	for k := range m.parts {
		tp := TP{k.TopicID, k.Partition}
		if !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
	}
	return out
}

// Bounds are a partition's log offsets a share fetch reads within.
type Bounds struct {
	LogStart      int64
	HighWatermark int64
	LastStable    int64
}

// limit is where acquisition stops for gc's isolation level.
func (b Bounds) limit(gc GroupConfig) int64 {
	if gc.ReadUncommitted {
		return b.HighWatermark
	}
	return b.LastStable
}

// NextOffset returns where a share fetch of k should read from, creating
// the share-partition at the log start or the high watermark
// (share.auto.offset.reset) when it has no state; ok is false when
// nothing can be acquired now. The limit to read up to is returned too.
func (m *Manager) NextOffset(k Key, b Bounds) (offset, limit int64, ok bool) {
	gc := m.GroupConfig(k.Group)
	e, err := m.lookup(k, func() int64 {
		if gc.Earliest {
			return b.LogStart
		}
		return b.HighWatermark
	})
	if err != nil {
		return 0, 0, false
	}
	defer e.mu.Unlock()
	if b.LogStart > e.p.Start() {
		e.p.Trim(b.LogStart)
		if m.save(k, e) != nil {
			return 0, 0, false
		}
	}
	limit = b.limit(gc)
	offset, ok = e.p.NextOffset(limit, m.cfg.MaxRecordLocks)
	return offset, limit, ok
}

// Acquire locks records of spans for member (Partition.Acquire with the
// group's lock duration and the broker's window). The new delivery
// counts are written before the records are handed out, so a failover
// redelivers them with the count they had; nothing is acquired when the
// write fails.
func (m *Manager) Acquire(k Key, member string, spans []Span, maxRecords int, limit int64, now time.Time) []Lease {
	gc := m.GroupConfig(k.Group)
	e, err := m.lookup(k, nil)
	if e == nil || err != nil {
		return nil
	}
	defer e.mu.Unlock()
	before := e.p.Start()
	out := e.p.Acquire(member, spans, maxRecords, limit, m.cfg.MaxRecordLocks, gc.RecordLockDuration, now)
	if len(out) > 0 || e.p.Start() != before {
		if m.save(k, e) != nil {
			return nil
		}
	}
	return out
}

// LockDuration is group's acquisition lock duration.
func (m *Manager) LockDuration(group string) time.Duration {
	return m.GroupConfig(group).RecordLockDuration
}

// Acknowledge applies member's acknowledgements to k; a partition
// without state has nothing acquired (ErrInvalidRecordState).
func (m *Manager) Acknowledge(k Key, member string, acks []Ack, now time.Time) error {
	gc := m.GroupConfig(k.Group)
	e, err := m.lookup(k, nil)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("%w: no share state for the partition", ErrInvalidRecordState)
	}
	err = e.p.Acknowledge(member, acks, gc.DeliveryCountLimit, gc.RecordLockDuration, now)
	if err == nil && !onlyRenew(acks) {
		err = m.save(k, e)
	}
	released := false
	if err == nil {
		released = slices.ContainsFunc(acks, func(a Ack) bool { return slices.Contains(a.Types, AckRelease) })
	}
	e.mu.Unlock()
	if released {
		m.notify()
	}
	return err
}

// release gives back member's records in the partitions tps.
func (m *Manager) release(group, member string, tps []TP) {
	gc := m.GroupConfig(group)
	changed := false
	for _, tp := range tps {
		k := Key{group, tp.TopicID, tp.Partition}
		e := m.held(k)
		if e == nil {
			continue
		}
		if e.p.ReleaseMember(member, gc.DeliveryCountLimit) {
			m.save(k, e)
			changed = true
		}
		e.mu.Unlock()
	}
	if changed {
		m.notify()
	}
}

// Tick releases expired locks and closes idle sessions as of now.
// Nothing expires between ticks; production calls it from Run.
func (m *Manager) Tick(now time.Time) {
	m.mu.Lock()
	keys := make([]Key, 0, len(m.parts))
	for k := range m.parts {
		keys = append(keys, k)
	}
	var idle []*session
	for sk, s := range m.sessions {
		if now.Sub(s.used) >= m.cfg.SessionIdle {
			delete(m.sessions, sk)
			idle = append(idle, s)
		}
	}
	m.mu.Unlock()
	changed := false
	limits := map[string]int{}
	for _, k := range keys {
		limit, ok := limits[k.Group]
		if !ok {
			limit = m.GroupConfig(k.Group).DeliveryCountLimit
			limits[k.Group] = limit
		}
		e := m.held(k)
		if e == nil {
			continue
		}
		if e.p.Tick(now, limit) {
			m.save(k, e)
			changed = true
		}
		e.mu.Unlock()
	}
	if changed {
		m.notify()
	}
	for _, s := range idle {
		m.release(s.key.Group, s.key.Member, s.partitions())
	}
}

// Run calls Tick every interval until ctx ends. With no share-partition
// and no session nothing can expire, and Run sleeps until one appears: an
// idle broker's timer wake-ups cost it CPU.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	idletick.Run(ctx, interval, m.hasWork, m.busy, nil, m.Tick)
}

func (m *Manager) hasWork() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parts) > 0 || len(m.sessions) > 0
}

// PartitionOffset is one share-partition's start offset and lag.
type PartitionOffset struct {
	TP
	Start int64
	// InFlightDone counts finished records above the start (the lag
	// excludes them).
	InFlightDone int
}

// Offsets returns group's share-partitions (of topics, all when nil),
// ordered by topic id and partition.
func (m *Manager) Offsets(group string, topics map[[16]byte]bool) []PartitionOffset {
	m.mu.Lock()
	var keys []Key
	for k := range m.parts {
		if k.Group == group && (topics == nil || topics[k.TopicID]) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	var out []PartitionOffset
	for _, k := range keys {
		if po, ok := m.Offset(k); ok {
			out = append(out, po)
		}
	}
	slices.SortFunc(out, func(a, b PartitionOffset) int { return compareTP(a.TP, b.TP) })
	return out
}

// held returns k's entry locked when this broker holds its state, else
// nil.
func (m *Manager) held(k Key) *entry {
	m.mu.Lock()
	e := m.parts[k]
	m.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if e.dead || e.p == nil {
		e.mu.Unlock()
		return nil
	}
	return e
}

// Offset returns k's start offset: from the state this broker holds
// (it leads the partition), else as the Persister has it, without
// taking the partition up here. ok is false when k has no state or it
// cannot be read now.
func (m *Manager) Offset(k Key) (PartitionOffset, bool) {
	if e := m.held(k); e != nil {
		defer e.mu.Unlock()
		return PartitionOffset{TP: TP{k.TopicID, k.Partition}, Start: e.p.Start(), InFlightDone: e.p.Done()}, true
	}
	s, ok, err := m.persist.Read(k, -1)
	if err != nil || !ok {
		return PartitionOffset{}, false
	}
	done := 0
	for _, b := range s.Batches {
		if b.State == Acknowledged || b.State == Archived {
			done += int(b.Last - b.First + 1)
		}
	}
	return PartitionOffset{TP: TP{k.TopicID, k.Partition}, Start: s.StartOffset, InFlightDone: done}, true
}

// reset stores k's state anew at the next state epoch: a start offset
// with nothing in flight, or deleted (offset < 0). Whatever this broker
// holds of k is dropped; a leader elsewhere that still holds it is
// fenced at its next write and reads the new state.
func (m *Manager) reset(k Key, offset int64) error {
	e := m.held(k)
	old, _, err := m.persist.Read(k, -1)
	if err == nil {
		err = m.persist.Write(k, Snapshot{Epoch: old.Epoch + 1, LeaderEpoch: -1, StartOffset: offset})
	}
	if e != nil {
		if err == nil && offset >= 0 {
			e.p.Reset(offset)
			e.epoch = old.Epoch + 1
		} else {
			m.drop(k, e)
		}
		e.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("%w: resetting %v: %w", ErrStateUnavailable, k, err)
	}
	m.notify()
	return nil
}

// SetOffset moves k's start to offset, forgetting its in-flight records
// (AlterShareGroupOffsets; the coordinator checks the group has no
// members).
func (m *Manager) SetOffset(k Key, offset int64) error {
	return m.reset(k, max(offset, 0))
}

// DeletePartition drops k's state (DeleteShareGroupOffsets).
func (m *Manager) DeletePartition(k Key) error {
	return m.reset(k, -1)
}

// Delete drops the state of group's share-partitions of topics (all
// when nil) that this broker holds: DeleteGroups.
func (m *Manager) Delete(group string, topics map[[16]byte]bool) {
	m.mu.Lock()
	var gone []Key
	for k := range m.parts {
		if k.Group == group && (topics == nil || topics[k.TopicID]) {
			gone = append(gone, k)
		}
	}
	m.mu.Unlock()
	for _, k := range gone {
		m.reset(k, -1)
	}
}

// InFlight sums group's records in state s over its share-partitions
// (tests, metrics).
func (m *Manager) InFlight(group string, s RecordState) int {
	n := 0
	for _, po := range m.Offsets(group, nil) {
		e := m.held(Key{group, po.TopicID, po.Partition})
		if e == nil {
			continue
		}
		n += e.p.InFlight(s)
		e.mu.Unlock()
	}
	return n
}

// onlyRenew reports whether acks only extend locks (nothing durable
// changes).
func onlyRenew(acks []Ack) bool {
	for _, a := range acks {
		for _, t := range a.Types {
			if t != AckRenew {
				return false
			}
		}
	}
	return true
}
