package group

import (
	"errors"
	"fmt"
	"iter"
)

// Snapshot is the state of one __consumer_offsets partition rebuilt from
// its records: what FinishLoad installs.
type Snapshot struct {
	Groups map[string]*LoadedGroup
	// Skipped counts records with key versions we do not model (for
	// example KIP-848 records written by a newer Kafka).
	Skipped int
}

// LoadedGroup is one group's last stored state. Metadata is nil for a
// "simple" group that only ever committed offsets.
type LoadedGroup struct {
	Metadata *GroupMetadata
	Offsets  map[TopicPartition]OffsetValue
}

// Load rebuilds every group of one partition from its records in log
// order: the last value per key wins and a tombstone deletes what its key
// named. A group tombstone removes only the metadata: its offsets have keys
// of their own and Kafka writes a tombstone for each. The partition may be
// compacted or not; the result is the same. A record that claims a known
// version but does not parse stops the load with ErrCorruptRecord, because
// guessing would silently move a group's offsets.
func Load(records iter.Seq2[KV, error]) (*Snapshot, error) {
	s := &Snapshot{Groups: make(map[string]*LoadedGroup)}
	get := func(id string) *LoadedGroup {
		g := s.Groups[id]
		if g == nil {
			g = &LoadedGroup{Offsets: make(map[TopicPartition]OffsetValue)}
			s.Groups[id] = g
		}
		return g
	}
	n := 0
	for kv, err := range records {
		if err != nil {
			return nil, fmt.Errorf("group: load: reading record %d: %w", n, err)
		}
		rec, err := DecodeRecord(kv.Key, kv.Value)
		switch {
		case err == nil:
		case isUnknown(err):
			s.Skipped++
			n++
			continue
		default:
			return nil, fmt.Errorf("group: load: record %d: %w", n, err)
		}
		n++
		g := get(rec.GroupID)
		switch rec.Kind {
		case KindOffset:
			tp := TopicPartition{rec.OffsetKey.Topic, rec.OffsetKey.Partition}
			if rec.Tombstone {
				delete(g.Offsets, tp)
			} else {
				g.Offsets[tp] = *rec.Offset
			}
		case KindGroup:
			if rec.Tombstone {
				g.Metadata = nil
			} else {
				g.Metadata = rec.Group
			}
		}
	}
	for id, g := range s.Groups {
		if g.Metadata == nil && len(g.Offsets) == 0 {
			delete(s.Groups, id)
		}
	}
	return s, nil
}

// Records lists a slice as the iterator Load takes.
func Records(kvs []KV) iter.Seq2[KV, error] {
	return func(yield func(KV, error) bool) {
		for _, kv := range kvs {
			if !yield(kv, nil) {
				return
			}
		}
	}
}

func isUnknown(err error) bool { return errors.Is(err, ErrUnknownRecord) }
