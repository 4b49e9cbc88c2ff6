package producerstate

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Snapshot format constants (layout in doc.go; the file name is
// layout.SnapshotSuffix, named by the map end offset).
const (
	snapshotMagic   = "RLPS"
	snapshotVersion = 1
	snapshotHdr     = 10 // magic + version + crc
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the whole state. Producers are sorted by id, so equal
// states give equal bytes (tests compare a replayed state this way).
func (s *State) Snapshot() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	be := binary.BigEndian
	b := make([]byte, snapshotHdr, 64+len(s.producers)*64+len(s.aborted)*32)
	copy(b, snapshotMagic)
	be.PutUint16(b[4:], snapshotVersion)
	b = be.AppendUint64(b, uint64(s.mapEnd))
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = be.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := s.producers[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = be.AppendUint64(b, uint64(e.txnFirstOffset))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = be.AppendUint32(b, uint32(m.FirstSeq))
			b = be.AppendUint32(b, uint32(m.LastSeq))
			b = be.AppendUint64(b, uint64(m.FirstOffset))
			b = be.AppendUint64(b, uint64(m.LastOffset))
			b = be.AppendUint64(b, uint64(m.Timestamp))
		}
	}
	b = be.AppendUint32(b, uint32(len(s.aborted)))
	for _, a := range s.aborted {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
		b = be.AppendUint64(b, uint64(a.LastStableOffset))
	}
	b = be.AppendUint32(b, uint32(len(s.unreplicated)))
	for _, c := range s.unreplicated {
		b = be.AppendUint64(b, uint64(c.producerID))
		b = be.AppendUint64(b, uint64(c.firstOffset))
		b = be.AppendUint64(b, uint64(c.lastOffset))
	}
	be.PutUint32(b[6:], crc32.Checksum(b[snapshotHdr:], castagnoli))
	return b
}

// Restore replaces the state with a snapshot. On error (wrapping
// ErrCorruptSnapshot) the state is unchanged; the engine should try an
// older snapshot or replay the log from its start.
func (s *State) Restore(b []byte) error {
	if len(b) < snapshotHdr || string(b[:4]) != snapshotMagic {
		return fmt.Errorf("%w: bad magic", ErrCorruptSnapshot)
	}
	be := binary.BigEndian
	if v := be.Uint16(b[4:]); v != snapshotVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrCorruptSnapshot, v, snapshotVersion)
	}
	if got, want := crc32.Checksum(b[snapshotHdr:], castagnoli), be.Uint32(b[6:]); got != want {
		return fmt.Errorf("%w: crc %08x, stored %08x", ErrCorruptSnapshot, got, want)
	}
	r := snapReader{b: b[snapshotHdr:]}
	mapEnd := r.i64()
	producers := make(map[int64]*producerEntry)
	ongoing := make(map[int64]int64)
	// Counts are checked against the bytes left before allocating, so a
	// snapshot with a valid CRC but absurd counts (a bug) cannot OOM us.
	n := r.count(31)
	for range n {
		id := r.i64()
		e := &producerEntry{epoch: r.i16(), coordinatorEpoch: r.i32(), lastTimestamp: r.i64(), txnFirstOffset: r.i64()}
		nb := int(r.u8())
		if nb > NumBatchesToRetain {
			r.fail(fmt.Errorf("producer %d with %d batches", id, nb))
		}
		for range nb {
			if r.err != nil {
				break
			}
			e.batches = append(e.batches, BatchMetadata{FirstSeq: r.i32(), LastSeq: r.i32(), FirstOffset: r.i64(), LastOffset: r.i64(), Timestamp: r.i64()})
		}
		if r.err != nil {
			break
		}
		producers[id] = e
		if e.txnFirstOffset >= 0 {
			ongoing[id] = e.txnFirstOffset
		}
	}
	var aborted []AbortedTxn
	for range r.count(32) {
		aborted = append(aborted, AbortedTxn{ProducerID: r.i64(), FirstOffset: r.i64(), LastOffset: r.i64(), LastStableOffset: r.i64()})
	}
	var unrep []completedTxn
	for range r.count(24) {
		unrep = append(unrep, completedTxn{r.i64(), r.i64(), r.i64()})
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("%d trailing bytes", len(r.b)))
	}
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptSnapshot, r.err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.producers, s.ongoing, s.aborted, s.unreplicated, s.mapEnd = producers, ongoing, aborted, unrep, mapEnd
	return nil
}

// snapReader is a sticky-error big-endian reader.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *snapReader) take(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	if n > len(r.b) {
		r.fail(fmt.Errorf("need %d bytes, have %d", n, len(r.b)))
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *snapReader) u8() uint8  { return r.take(1)[0] }
func (r *snapReader) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *snapReader) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *snapReader) i64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }

// count reads an int32 element count whose elements take at least
// minSize bytes each; an impossible count fails the reader and yields 0.
func (r *snapReader) count(minSize int) int {
	n := r.i32()
	if r.err != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(minSize) > int64(len(r.b)) {
		r.fail(fmt.Errorf("count %d with %d bytes left", n, len(r.b)))
		return 0
	}
	return int(n)
}

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
