package share

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// Snapshot is a share-partition's durable state, Kafka's ShareSnapshot
// value: the start offset and the window's records as runs of one state
// and delivery count. Acquired records are written Available with their
// delivery count: a lock does not survive a failover, the count does.
//
// Epoch is the state epoch: an admin reset or delete (Alter/Delete
// ShareGroupOffsets, DeleteGroups) stores the next one, and a store
// refuses a write of an older epoch (ErrFencedStateEpoch), so a leader
// that still holds the state from before learns that it is gone. A
// StartOffset below 0 marks deleted state (Deleted).
//
// LeaderEpoch is the leader epoch of the data partition whose leader
// wrote the state, or last read it to take it over: a store refuses a
// write or read at an older one (ErrFencedLeaderEpoch), so a deposed
// leader that does not know it yet cannot overwrite what the new leader
// wrote. Below 0 (admin writes, tests, records from before it was kept)
// it is not checked, and a write keeps the stored one.
type Snapshot struct {
	Epoch       int32
	LeaderEpoch int32
	StartOffset int64
	Batches     []StateBatch
}

// Deleted reports whether s marks state that was deleted.
func (s Snapshot) Deleted() bool { return s.StartOffset < 0 }

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

// Restore rebuilds a partition from a snapshot (its Epoch is the
// caller's to keep).
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
// acquisition's delivery count, an acknowledgement, a release, an
// archive, an admin move of the start), so writes of one partition
// arrive in state order, and returns once the snapshot is durable; an
// error means it may not be, and the Manager forgets its copy (the next
// use reads what the store holds). Read returns what Write last stored:
// ok is false when there is none or it is Deleted, and the snapshot
// still carries the last epoch then (0 when there was never any).
// A Read at a leaderEpoch of 0 or more is the data partition's leader
// taking the state over: the store fences older leaders from then on
// (storing the epoch durably before it answers); -1 reads without
// fencing (describes, admin resets). Errors are ErrFencedStateEpoch,
// ErrFencedLeaderEpoch, or anything else for "not now" (the store is
// loading, moved, unreachable).
type Persister interface {
	Write(k Key, s Snapshot) error
	Read(k Key, leaderEpoch int32) (s Snapshot, ok bool, err error)
}

// MemoryPersister keeps the latest snapshot per key in memory: state
// survives a share-partition being dropped and re-created on the same
// broker (and lets tests check what would be written), not a restart.
type MemoryPersister struct {
	mu    sync.Mutex
	snaps map[Key]Snapshot
	// Fail, when set, is returned by every Write (tests).
	Fail error
}

// NewMemoryPersister returns an empty MemoryPersister.
func NewMemoryPersister() *MemoryPersister {
	return &MemoryPersister{snaps: make(map[Key]Snapshot)}
}

func (m *MemoryPersister) Write(k Key, s Snapshot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	if old, ok := m.snaps[k]; ok {
		var err error
		if s, err = checkWrite(k, old, s); err != nil {
			return err
		}
	}
	m.snaps[k] = s
	return nil
}

func (m *MemoryPersister) Read(k Key, leaderEpoch int32) (Snapshot, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.snaps[k]
	return readAt(k, s, ok, leaderEpoch, func(s Snapshot) error {
		m.snaps[k] = s
		return nil
	})
}

// checkWrite fences a write of s over the stored old (ErrFencedStateEpoch,
// ErrFencedLeaderEpoch) and returns what to store: s, keeping old's
// leader epoch when s has none.
func checkWrite(k Key, old, s Snapshot) (Snapshot, error) {
	switch {
	case s.Epoch < old.Epoch:
		return s, fmt.Errorf("%w: %v has epoch %d, the write %d", ErrFencedStateEpoch, k, old.Epoch, s.Epoch)
	case s.LeaderEpoch < 0:
		s.LeaderEpoch = old.LeaderEpoch
	case s.LeaderEpoch < old.LeaderEpoch:
		return s, fmt.Errorf("%w: %v was taken over at leader epoch %d, the write is of %d", ErrFencedLeaderEpoch, k, old.LeaderEpoch, s.LeaderEpoch)
	}
	return s, nil
}

// readAt is a Persister's Read of k at leaderEpoch, given the stored s
// (ok: there is one): a leader older than the one that took s over is
// fenced (ErrFencedLeaderEpoch); a newer one takes it over, its epoch
// stored through put before the answer.
func readAt(k Key, s Snapshot, ok bool, leaderEpoch int32, put func(Snapshot) error) (Snapshot, bool, error) {
	if ok && leaderEpoch >= 0 {
		if leaderEpoch < s.LeaderEpoch {
			return Snapshot{}, false, fmt.Errorf("%w: %v was taken over at leader epoch %d, the read is of %d", ErrFencedLeaderEpoch, k, s.LeaderEpoch, leaderEpoch)
		}
		if leaderEpoch > s.LeaderEpoch {
			s.LeaderEpoch = leaderEpoch
			if err := put(s); err != nil {
				return Snapshot{}, false, err
			}
		}
	}
	return s, ok && !s.Deleted(), nil
}

// Keys returns the stored keys with live state (tests).
func (m *MemoryPersister) Keys() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Key
	for k, s := range m.snaps {
		if !s.Deleted() {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int {
		if c := cmp.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return compareTP(TP{a.TopicID, a.Partition}, TP{b.TopicID, b.Partition})
	})
	return out
}
