package producerstate

import (
	"encoding/binary"
	"fmt"
)

// Aborted transaction index (.txnindex) constants; layout in doc.go.
const (
	TxnIndexSuffix    = ".txnindex"
	TxnIndexEntrySize = 34
	txnIndexVersion   = 0
)

// AppendTxnIndexEntry appends one 34-byte .txnindex entry for a to b.
func AppendTxnIndexEntry(b []byte, a AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, txnIndexVersion)
	b = be.AppendUint64(b, uint64(a.ProducerID))
	b = be.AppendUint64(b, uint64(a.FirstOffset))
	b = be.AppendUint64(b, uint64(a.LastOffset))
	return be.AppendUint64(b, uint64(a.LastStableOffset))
}

// DecodeTxnIndex reads a .txnindex file. It returns the whole entries
// before the first problem and, for a partial last entry or an unknown
// version, an error wrapping ErrCorruptTxnIndex that names the byte
// position, so the engine can truncate a torn tail and refuse anything
// else (as it does for .log).
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	be := binary.BigEndian
	out := make([]AbortedTxn, 0, len(b)/TxnIndexEntrySize)
	pos := 0
	for ; pos+TxnIndexEntrySize <= len(b); pos += TxnIndexEntrySize {
		e := b[pos : pos+TxnIndexEntrySize]
		if v := int16(be.Uint16(e)); v != txnIndexVersion {
			return out, fmt.Errorf("%w: entry version %d at byte %d", ErrCorruptTxnIndex, v, pos)
		}
		out = append(out, AbortedTxn{
			ProducerID:       int64(be.Uint64(e[2:])),
			FirstOffset:      int64(be.Uint64(e[10:])),
			LastOffset:       int64(be.Uint64(e[18:])),
			LastStableOffset: int64(be.Uint64(e[26:])),
		})
	}
	if pos != len(b) {
		return out, fmt.Errorf("%w: %d-byte partial entry at byte %d", ErrCorruptTxnIndex, len(b)-pos, pos)
	}
	return out, nil
}
