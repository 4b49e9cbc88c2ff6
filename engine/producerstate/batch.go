package producerstate

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Header field positions of a magic-2 record batch (engine/doc.go).
const (
	offBaseOffset      = 0
	offAttributes      = 21
	offLastOffsetDelta = 23
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
	// HeaderSize is the length of the batch header before the records.
	HeaderSize = 61

	attrTransactional = 1 << 4
	attrControl       = 1 << 5
)

// NoProducerID is the producer id of a non-idempotent batch.
const NoProducerID = -1

// ControlType is the type field of a control record's key.
type ControlType int16

// Control record types (Kafka's ControlRecordType).
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// BatchHeader is what producer state needs from one record batch.
type BatchHeader struct {
	// BaseOffset is only read by ApplyBatch (replay); Check and Update
	// take offsets from the engine, which assigns them.
	BaseOffset      int64
	LastOffsetDelta int32
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Transactional   bool
	Control         bool
	// ControlType and CoordinatorEpoch are filled by ParseBatch for a
	// control batch from its first record (key: int16 version, int16
	// type; value: int16 version, int32 coordinator epoch).
	ControlType      ControlType
	CoordinatorEpoch int32
}

// Idempotent reports whether the batch carries a producer id.
func (h BatchHeader) Idempotent() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence of the batch's last record. Sequences wrap
// from MaxInt32 to 0 (Kafka's DefaultRecordBatch.incrementSequence).
func (h BatchHeader) LastSequence() int32 {
	return incrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

func incrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// inSequence: next follows last, wrapping after MaxInt32. last -1 (no
// batch seen in this epoch) requires next == 0.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// ParseBatch reads the header of the record batch at the start of b. For a
// control batch it also parses the first record (control batches are
// never compressed and hold one record), so b must hold the whole batch;
// for other batches HeaderSize bytes are enough.
func ParseBatch(b []byte) (BatchHeader, error) {
	if len(b) < HeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrCorruptBatch, len(b), HeaderSize)
	}
	be := binary.BigEndian
	attrs := int16(be.Uint16(b[offAttributes:]))
	h := BatchHeader{
		BaseOffset:      int64(be.Uint64(b[offBaseOffset:])),
		LastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		MaxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		Transactional:   attrs&attrTransactional != 0,
		Control:         attrs&attrControl != 0,
	}
	if !h.Control {
		return h, nil
	}
	if n := int32(be.Uint32(b[offRecordCount:])); n < 1 {
		return h, fmt.Errorf("%w: control batch with %d records", ErrCorruptBatch, n)
	}
	key, value, err := firstRecordKV(b[HeaderSize:])
	if err != nil {
		return h, fmt.Errorf("%w: control record: %v", ErrCorruptBatch, err)
	}
	if len(key) < 4 {
		return h, fmt.Errorf("%w: control record key of %d bytes", ErrCorruptBatch, len(key))
	}
	h.ControlType = ControlType(be.Uint16(key[2:]))
	// EndTxnMarker value: version int16, coordinatorEpoch int32. Other
	// control types (e.g. KRaft's) may carry anything; only markers need it.
	if len(value) >= 6 {
		h.CoordinatorEpoch = int32(be.Uint32(value[2:]))
	}
	return h, nil
}

// firstRecordKV returns the key and value of the first record in rec:
// varint length, int8 attributes, varlong timestampDelta, varint
// offsetDelta, varint keyLength + key, varint valueLength + value.
func firstRecordKV(rec []byte) (key, value []byte, err error) {
	r := rec
	next := func() int64 {
		if err != nil {
			return 0
		}
		v, n := binary.Varint(r)
		if n <= 0 {
			err = fmt.Errorf("bad varint")
			return 0
		}
		r = r[n:]
		return v
	}
	length := next()
	if err == nil && (length < 0 || length > int64(len(r))) {
		return nil, nil, fmt.Errorf("record length %d with %d bytes", length, len(r))
	}
	if err != nil {
		return nil, nil, err
	}
	r = r[:length]
	if len(r) < 1 {
		return nil, nil, fmt.Errorf("empty record")
	}
	r = r[1:] // attributes
	next()    // timestampDelta
	next()    // offsetDelta
	bytesField := func() []byte {
		n := next()
		if err != nil || n < 0 {
			return nil
		}
		if n > int64(len(r)) {
			err = fmt.Errorf("field of %d bytes with %d left", n, len(r))
			return nil
		}
		p := r[:n]
		r = r[n:]
		return p
	}
	key = bytesField()
	value = bytesField()
	return key, value, err
}
