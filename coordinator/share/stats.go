package share

// PartitionStats is one share-partition this broker holds, as metrics
// see it at one instant.
type PartitionStats struct {
	Key
	// Acquired and Available count the window's records in those states
	// (Available: released or expired, waiting for a consumer).
	Acquired, Available int
	// Counters are the lifetime counts of this copy of the state: they
	// start at zero whenever the broker (re)reads it from the store.
	Counters Counters
}

// Stats returns every share-partition this broker holds. Read-only: it
// takes each entry's lock briefly, one at a time, as InFlight does.
func (m *Manager) Stats() []PartitionStats {
	m.mu.Lock()
	keys := make([]Key, 0, len(m.parts))
	for k := range m.parts {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	out := make([]PartitionStats, 0, len(keys))
	for _, k := range keys {
		e := m.held(k)
		if e == nil {
			continue
		}
		out = append(out, PartitionStats{Key: k, Acquired: e.p.InFlight(Acquired), Available: e.p.InFlight(Available), Counters: e.p.Counters()})
		e.mu.Unlock()
	}
	return out
}
