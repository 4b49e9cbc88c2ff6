package share

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
	// changed is closed (and replaced) when records may have become
	// acquirable: released, expired, a start offset moved.
	changed chan struct{}
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
		changed:  make(chan struct{}),
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
// the Persister's snapshot, else (when create is set) a new one at
// start(); nil when there is none.
func (m *Manager) lookup(k Key, create bool, start func() int64) *entry {
	m.mu.Lock()
	e := m.parts[k]
	if e == nil {
		if _, stored := m.persist.Read(k); !create && !stored {
			m.mu.Unlock()
			return nil
		}
		e = &entry{}
		m.parts[k] = e
	}
	m.mu.Unlock()
	e.mu.Lock()
	if e.p == nil {
		if s, ok := m.persist.Read(k); ok {
			e.p = Restore(s)
		} else if start == nil {
			e.mu.Unlock()
			return nil
		} else {
			e.p = NewPartition(start())
			m.persist.Write(k, e.p.Snapshot())
		}
	}
	return e
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
	e := m.lookup(k, true, func() int64 {
		if gc.Earliest {
			return b.LogStart
		}
		return b.HighWatermark
	})
	defer e.mu.Unlock()
	if b.LogStart > e.p.Start() {
		e.p.Trim(b.LogStart)
		m.persist.Write(k, e.p.Snapshot())
	}
	limit = b.limit(gc)
	offset, ok = e.p.NextOffset(limit, m.cfg.MaxRecordLocks)
	return offset, limit, ok
}

// Acquire locks records of spans for member (Partition.Acquire with the
// group's lock duration and the broker's window).
func (m *Manager) Acquire(k Key, member string, spans []Span, maxRecords int, limit int64, now time.Time) []Lease {
	gc := m.GroupConfig(k.Group)
	e := m.lookup(k, false, nil)
	if e == nil {
		return nil
	}
	defer e.mu.Unlock()
	before := e.p.Start()
	out := e.p.Acquire(member, spans, maxRecords, limit, m.cfg.MaxRecordLocks, gc.RecordLockDuration, now)
	if e.p.Start() != before {
		// Archived offsets (control batches, compaction gaps) moved it.
		m.persist.Write(k, e.p.Snapshot())
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
	e := m.lookup(k, false, nil)
	if e == nil {
		return fmt.Errorf("%w: no share state for the partition", ErrInvalidRecordState)
	}
	err := e.p.Acknowledge(member, acks, gc.DeliveryCountLimit, gc.RecordLockDuration, now)
	released := false
	if err == nil {
		m.persist.Write(k, e.p.Snapshot())
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
		e := m.lookup(k, false, nil)
		if e == nil {
			continue
		}
		if e.p.ReleaseMember(member, gc.DeliveryCountLimit) {
			m.persist.Write(k, e.p.Snapshot())
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
		e := m.lookup(k, false, nil)
		if e == nil {
			continue
		}
		if e.p.Tick(now, limit) {
			m.persist.Write(k, e.p.Snapshot())
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

// Run calls Tick every interval until ctx ends.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Tick(now)
		}
	}
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
		e := m.lookup(k, false, nil)
		if e == nil {
			continue
		}
		out = append(out, PartitionOffset{TP: TP{k.TopicID, k.Partition}, Start: e.p.Start(), InFlightDone: e.p.Done()})
		e.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b PartitionOffset) int { return compareTP(a.TP, b.TP) })
	return out
}

// Offset returns k's start offset; ok is false when k has no state.
func (m *Manager) Offset(k Key) (PartitionOffset, bool) {
	e := m.lookup(k, false, nil)
	if e == nil {
		return PartitionOffset{}, false
	}
	defer e.mu.Unlock()
	return PartitionOffset{TP: TP{k.TopicID, k.Partition}, Start: e.p.Start(), InFlightDone: e.p.Done()}, true
}

// SetOffset moves k's start to offset, forgetting its in-flight records
// (AlterShareGroupOffsets; the coordinator checks the group has no
// members).
func (m *Manager) SetOffset(k Key, offset int64) {
	e := m.lookup(k, true, func() int64 { return offset })
	e.p.Reset(offset)
	m.persist.Write(k, e.p.Snapshot())
	e.mu.Unlock()
	m.notify()
}

// Delete drops the state of group's share-partitions of topics (all
// when nil): DeleteShareGroupOffsets, DeleteGroups.
func (m *Manager) Delete(group string, topics map[[16]byte]bool) {
	m.mu.Lock()
	var gone []Key
	for k := range m.parts {
		if k.Group == group && (topics == nil || topics[k.TopicID]) {
			delete(m.parts, k)
			gone = append(gone, k)
		}
	}
	m.mu.Unlock()
	for _, k := range gone {
		m.persist.Delete(k)
	}
}

// InFlight sums group's records in state s over its share-partitions
// (tests, metrics).
func (m *Manager) InFlight(group string, s RecordState) int {
	n := 0
	for _, po := range m.Offsets(group, nil) {
		e := m.lookup(Key{group, po.TopicID, po.Partition}, false, nil)
		if e == nil {
			continue
		}
		n += e.p.InFlight(s)
		e.mu.Unlock()
	}
	return n
}
