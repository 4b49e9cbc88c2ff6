package txn

import (
	"regexp"
	"slices"
	"strings"
)

// ParseState maps one of Kafka's state names (the TransactionState enum:
// Empty, Ongoing, PrepareCommit, ...) to its State. Names are matched
// exactly, as Kafka's coordinator does; false for any other string.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// ListFilter selects transactions for List (ListTransactions, KIP-664;
// the duration filter is KIP-994, the id pattern KIP-1152). Empty or nil
// fields do not filter; MinDurationMs must be set to -1 not to.
type ListFilter struct {
	// States keeps transactions in one of these states; empty keeps all.
	States []State
	// ProducerIDs keeps transactions of these producer ids; empty keeps
	// all.
	ProducerIDs []int64
	// MinDurationMs, when >= 0, keeps only transactions running longer
	// than this many milliseconds (now - start); negative keeps all. Like
	// Kafka, a transaction with no start time (-1) counts as running since
	// the epoch and is kept.
	MinDurationMs int64
	// IDPattern, when set, keeps ids it matches (RE2, unanchored as in
	// Kafka's re2j find()).
	IDPattern *regexp.Regexp
}

// Listing is one transactional id as ListTransactions shows it.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           State
}

// List returns the transactional ids this node coordinates that match f,
// sorted by id. While any owned __transaction_state partition is still
// loading it returns ErrCoordinatorLoadInProgress and no listing, as Kafka
// does (a partial list would hide exactly the hanging transaction an
// operator is looking for).
func (m *Manager) List(f ListFilter) ([]Listing, error) {
	m.mu.Lock()
	for _, ps := range m.parts {
		if !ps.loaded {
			m.mu.Unlock()
			return nil, ErrCoordinatorLoadInProgress
		}
	}
	m.mu.Unlock()
	nowMs := m.nowMs()
	var out []Listing
	// Lock order: a transaction's mu before Manager.mu, so the map is
	// copied first and each transaction read under its own lock.
	for _, t := range m.snapshotTxns() {
		t.mu.Lock()
		l, ok := Listing{TransactionalID: t.id, ProducerID: t.meta.ProducerID, State: t.meta.State}, !t.removed
		start := t.meta.StartMs
		t.mu.Unlock()
		// A placeholder (ProducerID -1) is an InitProducerId whose first
		// record is not durable yet: not a transaction to list.
		if !ok || l.ProducerID < 0 || l.State == Dead || !f.keep(l, start, nowMs) {
			continue
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	return out, nil
}

func (f ListFilter) keep(l Listing, startMs, nowMs int64) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, l.State):
		return false
	case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, l.ProducerID):
		return false
	case f.MinDurationMs >= 0 && nowMs-startMs <= f.MinDurationMs:
		return false
	case f.IDPattern != nil && !f.IDPattern.MatchString(l.TransactionalID):
		return false
	}
	return true
}
