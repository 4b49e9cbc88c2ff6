package producerstate

import (
	"fmt"
	"math"

	"github.com/ringlog/ringlog/internal/records"
)

// HeaderSize is the length of the batch header before the records.
const HeaderSize = records.HeaderSize

// NoProducerID is the producer id of a non-idempotent batch.
const NoProducerID = records.NoProducerID

// ControlType is the type field of a control record's key.
type ControlType = records.ControlType

// Control record types (Kafka's ControlRecordType).
const (
	ControlAbort  = records.ControlAbort
	ControlCommit = records.ControlCommit
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
	h, err := records.ParseHeader(b)
	if err != nil {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrCorruptBatch, len(b), HeaderSize)
	}
	return FromBatch(records.Batch{Header: h, Raw: b})
}

// FromBatch is the producer view of a parsed batch; as for ParseBatch,
// bt.Raw must hold the whole batch when it is a control batch.
func FromBatch(bt records.Batch) (BatchHeader, error) {
	h := BatchHeader{
		BaseOffset:      bt.BaseOffset,
		LastOffsetDelta: bt.LastOffsetDelta,
		MaxTimestamp:    bt.MaxTimestamp,
		ProducerID:      bt.ProducerID,
		ProducerEpoch:   bt.ProducerEpoch,
		BaseSequence:    bt.BaseSequence,
		Transactional:   bt.IsTransactional(),
		Control:         bt.IsControl(),
	}
	if !h.Control {
		return h, nil
	}
	c, err := bt.Control()
	if err != nil {
		return h, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	h.ControlType, h.CoordinatorEpoch = c.Type, c.CoordinatorEpoch
	return h, nil
}
