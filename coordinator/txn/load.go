package txn

import (
	"errors"
	"fmt"
	"iter"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Snapshot is one __transaction_state partition rebuilt from its records:
// what FinishLoad installs.
type Snapshot struct {
	Txns map[string]Metadata
	// Skipped counts records with key or value versions we do not model.
	Skipped int
}

// Load rebuilds every transactional id of one partition from its records
// in log order: the last value per key wins, a tombstone forgets the id.
// A record that claims a known version but does not parse stops the load
// with ErrCorruptRecord: guessing could resurrect a fenced producer.
func Load(records iter.Seq2[statelog.KV, error]) (*Snapshot, error) {
	s := &Snapshot{Txns: make(map[string]Metadata)}
	n := 0
	for kv, err := range records {
		if err != nil {
			return nil, fmt.Errorf("txn: load: reading record %d: %w", n, err)
		}
		n++
		id, err := DecodeKey(kv.Key)
		if err == nil && kv.Value == nil {
			delete(s.Txns, id)
			continue
		}
		var m Metadata
		if err == nil {
			m, err = DecodeValue(kv.Value)
		}
		switch {
		case err == nil:
			s.Txns[id] = m
		case errors.Is(err, ErrUnknownRecord):
			s.Skipped++
		default:
			return nil, fmt.Errorf("txn: load: record %d: %w", n-1, err)
		}
	}
	return s, nil
}

// Records lists a slice as the iterator Load takes.
func Records(kvs []statelog.KV) iter.Seq2[statelog.KV, error] {
	return func(yield func(statelog.KV, error) bool) {
		for _, kv := range kvs {
			if !yield(kv, nil) {
				return
			}
		}
	}
}
