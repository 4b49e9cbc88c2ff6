package producerstate

// SnapshotTxns is the transaction part of a snapshot: the open
// transactions (producer id -> first offset) and the aborted ones, in
// marker order. The remote tier reads it from a segment's "producers"
// object to list aborted transactions for read_committed fetches.
type SnapshotTxns struct {
	Ongoing map[int64]int64
	Aborted []AbortedTxn
}

// DecodeSnapshotTxns decodes the transactions of a snapshot (Snapshot's
// format); errors wrap ErrCorruptSnapshot.
func DecodeSnapshotTxns(b []byte) (SnapshotTxns, error) {
	s, err := New(DefaultConfig())
	if err != nil {
		return SnapshotTxns{}, err
	}
	if err := s.Restore(b); err != nil {
		return SnapshotTxns{}, err
	}
	return SnapshotTxns{Ongoing: s.ongoing, Aborted: s.aborted}, nil
}
