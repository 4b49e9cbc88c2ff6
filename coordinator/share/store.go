package share

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// StateTopic is the internal topic share-partition state is kept in.
const StateTopic = "__share_group_state"

// The __share_group_state record (ringlog's own format, one record per
// write, the whole snapshot each time; compaction keeps the latest per
// key):
//
//	key:   version int16 (0), group length int16, group bytes,
//	       topic id [16]byte, partition int32
//	value: version int16 (0 or 1), state epoch int32, leader epoch
//	       int32 (version 1 only; -1 in version 0), start offset int64
//	       (-1: deleted), batch count int32, then per batch
//	       first offset int64, last offset int64, state int8,
//	       delivery count int16
//
// All big-endian. A null value (tombstone) is read as no state. A
// snapshot without a leader epoch is written as version 0, which
// brokers from before version 1 read.

// EncodeKey returns k's record key.
func EncodeKey(k Key) []byte {
	b := make([]byte, 0, 2+2+len(k.Group)+16+4)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// EncodeSnapshot returns s's record value.
func EncodeSnapshot(s Snapshot) []byte {
	b := make([]byte, 0, 22+len(s.Batches)*19)
	if s.LeaderEpoch < 0 {
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(s.Epoch))
	} else {
		b = binary.BigEndian.AppendUint16(b, 1)
		b = binary.BigEndian.AppendUint32(b, uint32(s.Epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(s.LeaderEpoch))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(s.StartOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Batches)))
	for _, sb := range s.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(sb.State))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.DeliveryCount))
	}
	return b
}

var errBadRecord = errors.New("share: malformed __share_group_state record")

// DecodeKey parses a record key.
func DecodeKey(b []byte) (Key, error) {
	var k Key
	if len(b) < 4 || binary.BigEndian.Uint16(b) != 0 {
		return k, errBadRecord
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if len(b) != 4+n+16+4 {
		return k, errBadRecord
	}
	k.Group = string(b[4 : 4+n])
	copy(k.TopicID[:], b[4+n:])
	k.Partition = int32(binary.BigEndian.Uint32(b[4+n+16:]))
	return k, nil
}

// DecodeSnapshot parses a record value.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	s := Snapshot{LeaderEpoch: -1}
	if len(b) < 2 {
		return s, errBadRecord
	}
	switch v := binary.BigEndian.Uint16(b); {
	case v == 0 && len(b) >= 18:
		s.Epoch = int32(binary.BigEndian.Uint32(b[2:]))
		b = b[6:]
	case v == 1 && len(b) >= 22:
		s.Epoch = int32(binary.BigEndian.Uint32(b[2:]))
		s.LeaderEpoch = int32(binary.BigEndian.Uint32(b[6:]))
		b = b[10:]
	default:
		return s, errBadRecord
	}
	s.StartOffset = int64(binary.BigEndian.Uint64(b))
	n := int(binary.BigEndian.Uint32(b[8:]))
	b = b[12:]
	if n < 0 || len(b) != n*19 {
		return s, errBadRecord
	}
	for i := 0; i < n; i++ {
		s.Batches = append(s.Batches, StateBatch{
			First:         int64(binary.BigEndian.Uint64(b)),
			Last:          int64(binary.BigEndian.Uint64(b[8:])),
			State:         RecordState(b[16]),
			DeliveryCount: int16(binary.BigEndian.Uint16(b[17:])),
		})
		b = b[19:]
	}
	return s, nil
}

// StateKey is the string a key is placed on a __share_group_state
// partition by: Kafka's "group:topicId:partition".
func StateKey(k Key) string {
	return k.Group + ":" + fmt.Sprintf("%x", k.TopicID) + ":" + strconv.Itoa(int(k.Partition))
}

// Load reads a __share_group_state partition's records into the latest
// snapshot per key (deleted ones included, for their epoch).
func Load(recs iter.Seq2[statelog.KV, error]) (map[Key]Snapshot, error) {
	out := map[Key]Snapshot{}
	for kv, err := range recs {
		if err != nil {
			return nil, err
		}
		k, err := DecodeKey(kv.Key)
		if err != nil {
			return nil, err
		}
		if kv.Value == nil {
			delete(out, k)
			continue
		}
		s, err := DecodeSnapshot(kv.Value)
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

// Store is the owner side of __share_group_state (Kafka's share
// coordinator): the latest snapshot of every key on the partitions this
// broker leads, loaded from the log when it takes one over, and the
// writes that append there. A leader of a data partition reaches it
// through its Persister, locally or over the network.
type Store struct {
	partitions int
	append     func(p int32, kvs []statelog.KV) statelog.Waiter

	mu    sync.Mutex
	parts map[int32]*storePart
}

type storePart struct {
	// mu orders the writes of a partition: an epoch check, the append and
	// the wait for it are one step, so the map only holds durable state.
	mu     sync.Mutex
	snaps  map[Key]Snapshot // nil while loading
	closed bool
}

// NewStore returns a Store for a topic of partitions partitions whose
// appends go through append (durable when its Waiter returns nil).
func NewStore(partitions int, append func(p int32, kvs []statelog.KV) statelog.Waiter) *Store {
	return &Store{partitions: partitions, append: append, parts: map[int32]*storePart{}}
}

// Partition returns the __share_group_state partition of k.
func (st *Store) Partition(k Key) int32 { return statelog.PartitionFor(StateKey(k), st.partitions) }

// Partitions is the topic's partition count.
func (st *Store) Partitions() int { return st.partitions }

// BeginLoad marks p as being loaded (ErrLoadInProgress meanwhile).
func (st *Store) BeginLoad(p int32) {
	st.mu.Lock()
	st.parts[p] = &storePart{}
	st.mu.Unlock()
}

// FinishLoad installs p's loaded state.
func (st *Store) FinishLoad(p int32, snaps map[Key]Snapshot) {
	st.mu.Lock()
	sp := st.parts[p]
	st.mu.Unlock()
	if sp == nil {
		return
	}
	sp.mu.Lock()
	if !sp.closed {
		sp.snaps = snaps
	}
	sp.mu.Unlock()
}

// Unload forgets p (no longer led here).
func (st *Store) Unload(p int32) {
	st.mu.Lock()
	sp := st.parts[p]
	delete(st.parts, p)
	st.mu.Unlock()
	if sp != nil {
		sp.mu.Lock()
		sp.closed, sp.snaps = true, nil
		sp.mu.Unlock()
	}
}

// part returns k's partition locked, loaded and owned here.
func (st *Store) part(k Key) (*storePart, error) {
	p := st.Partition(k)
	st.mu.Lock()
	sp := st.parts[p]
	st.mu.Unlock()
	if sp == nil {
		return nil, fmt.Errorf("%w: %s-%d", ErrNotCoordinator, StateTopic, p)
	}
	sp.mu.Lock()
	switch {
	case sp.closed:
		sp.mu.Unlock()
		return nil, fmt.Errorf("%w: %s-%d", ErrNotCoordinator, StateTopic, p)
	case sp.snaps == nil:
		sp.mu.Unlock()
		return nil, fmt.Errorf("%w: %s-%d", ErrLoadInProgress, StateTopic, p)
	}
	return sp, nil
}

// Keys returns the keys of group with live state on the partitions led
// and loaded here: what a describe of all the group's partitions can
// list without members to name their topics.
func (st *Store) Keys(group string) []Key {
	st.mu.Lock()
	parts := make([]*storePart, 0, len(st.parts))
	for _, sp := range st.parts {
		parts = append(parts, sp)
	}
	st.mu.Unlock()
	var out []Key
	for _, sp := range parts {
		sp.mu.Lock()
		for k, s := range sp.snaps {
			if k.Group == group && !s.Deleted() {
				out = append(out, k)
			}
		}
		sp.mu.Unlock()
	}
	return out
}

// Read implements Persister for keys on partitions led here. A read
// that takes the state over for a newer leader stores its epoch first.
func (st *Store) Read(k Key, leaderEpoch int32) (Snapshot, bool, error) {
	sp, err := st.part(k)
	if err != nil {
		return Snapshot{}, false, err
	}
	defer sp.mu.Unlock()
	s, ok := sp.snaps[k]
	return readAt(k, s, ok, leaderEpoch, func(s Snapshot) error { return st.put(sp, k, s) })
}

// Write implements Persister for keys on partitions led here: it returns
// once the record is durable (replicated to the ISR).
func (st *Store) Write(k Key, s Snapshot) error {
	sp, err := st.part(k)
	if err != nil {
		return err
	}
	defer sp.mu.Unlock()
	if old, ok := sp.snaps[k]; ok {
		if s, err = checkWrite(k, old, s); err != nil {
			return err
		}
	}
	return st.put(sp, k, s)
}

// put appends s as k's state and keeps it once durable; sp is locked.
func (st *Store) put(sp *storePart, k Key, s Snapshot) error {
	if err := st.append(st.Partition(k), []statelog.KV{{Key: EncodeKey(k), Value: EncodeSnapshot(s)}}).Wait(); err != nil {
		return err
	}
	if !sp.closed {
		sp.snaps[k] = s
	}
	return nil
}
