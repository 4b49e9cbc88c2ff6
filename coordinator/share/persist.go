package share

import (
	"maps"
	"slices"
	"sync"
)

// Snapshot is a share-partition's durable state, Kafka's ShareSnapshot
// value: the start offset and the window's records as runs of one state
// and delivery count. Acquired records are written Available with their
// delivery count: a lock does not survive a failover, the count does.
type Snapshot struct {
	StartOffset int64
	Batches     []StateBatch
}

// StateBatch is a run of offsets First to Last in one state.
type StateBatch struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
}

// Snapshot returns the durable part of p's state.
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{StartOffset: p.start}
	for i, r := range p.recs {
		o := p.start + int64(i)
		st := r.state
		if st == Acquired {
			st = Available
		}
		if k := len(s.Batches) - 1; k >= 0 && s.Batches[k].Last == o-1 && s.Batches[k].State == st && s.Batches[k].DeliveryCount == r.deliveries {
			s.Batches[k].Last = o
			continue
		}
		s.Batches = append(s.Batches, StateBatch{First: o, Last: o, State: st, DeliveryCount: r.deliveries})
	}
	// A trailing run of never-delivered Available offsets is not state.
	if k := len(s.Batches) - 1; k >= 0 && s.Batches[k].State == Available && s.Batches[k].DeliveryCount == 0 {
		s.Batches = s.Batches[:k]
	}
	return s
}

// Restore rebuilds a partition from a snapshot.
func Restore(s Snapshot) *Partition {
	p := NewPartition(s.StartOffset)
	for _, b := range s.Batches {
		for o := max(b.First, p.End()); o <= b.Last; o++ {
			for p.End() < o {
				p.recs = append(p.recs, record{state: Available})
			}
			st := b.State
			if st == Acquired {
				st = Available
			}
			p.recs = append(p.recs, record{state: st, deliveries: b.DeliveryCount})
		}
	}
	p.advance()
	return p
}

// Persister makes share-partition state durable. Write is called under
// the partition's lock after every change a client must not lose (an
// acknowledgement, a release, an archive, an admin move of the start),
// so writes of one partition arrive in state order; Delete when the
// state goes (group or offsets deleted). Read returns what Write last
// stored, for a leader taking a partition over.
type Persister interface {
	Write(k Key, s Snapshot)
	Delete(k Key)
	Read(k Key) (Snapshot, bool)
}

// MemoryPersister keeps the latest snapshot per key in memory: state
// survives a share-partition being dropped and re-created on the same
// broker (and lets tests check what would be written), not a restart.
type MemoryPersister struct {
	mu    sync.Mutex
	snaps map[Key]Snapshot
}

// NewMemoryPersister returns an empty MemoryPersister.
func NewMemoryPersister() *MemoryPersister {
	return &MemoryPersister{snaps: make(map[Key]Snapshot)}
}

func (m *MemoryPersister) Write(k Key, s Snapshot) {
	m.mu.Lock()
	m.snaps[k] = s
	m.mu.Unlock()
}

func (m *MemoryPersister) Delete(k Key) {
	m.mu.Lock()
	delete(m.snaps, k)
	m.mu.Unlock()
}

func (m *MemoryPersister) Read(k Key) (Snapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.snaps[k]
	return s, ok
}

// Keys returns the stored keys (tests).
func (m *MemoryPersister) Keys() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.snaps))
}
