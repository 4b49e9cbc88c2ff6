package records

import (
	"errors"
	"fmt"
)

// Seal completes a batch built in place: batch holds a HeaderSize-byte
// header area and then the records section (already compressed if h's
// codec says so). The header fields come from h, except batchLength and
// magic, which follow from the bytes, and the CRC, computed last.
func Seal(batch []byte, h Header) {
	b := batch[:HeaderSize]
	be.PutUint64(b[OffBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[OffBatchLength:], uint32(len(batch)-LogOverhead))
	be.PutUint32(b[OffLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[OffMagic] = Magic
	be.PutUint16(b[OffAttributes:], uint16(h.Attributes))
	be.PutUint32(b[OffLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[OffBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[OffMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[OffProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[OffProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[OffBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[OffRecordCount:], uint32(h.RecordCount))
	be.PutUint32(b[OffCRC:], CRC32C(batch[OffAttributes:]))
}

// Reseal rewrites a batch's recordCount (after records were removed or
// its section replaced), batchLength and CRC; the other fields stay.
func Reseal(batch []byte, recordCount int32) {
	be.PutUint32(batch[OffBatchLength:], uint32(len(batch)-LogOverhead))
	be.PutUint32(batch[OffRecordCount:], uint32(recordCount))
	be.PutUint32(batch[OffCRC:], CRC32C(batch[OffAttributes:]))
}

// SetAttributes replaces a batch's attributes without touching the CRC
// (Reseal or Seal follows).
func SetAttributes(batch []byte, attrs int16) {
	be.PutUint16(batch[OffAttributes:], uint16(attrs))
}

// Plain is the header of a batch without a producer: producer id, epoch
// and base sequence -1.
func Plain(attrs int16, baseTimestamp, maxTimestamp int64) Header {
	return Header{
		Attributes:    attrs,
		BaseTimestamp: baseTimestamp,
		MaxTimestamp:  maxTimestamp,
		ProducerID:    NoProducerID,
		ProducerEpoch: -1,
		BaseSequence:  -1,
	}
}

// Encode builds one uncompressed batch of recs. h gives the header fields;
// recordCount and lastOffsetDelta are set from len(recs) (their offset
// deltas should be 0..n-1), whatever h says. A producer batch (idempotent,
// or transactional with AttrTransactional) sets h's producer fields; a
// plain one starts from Plain.
func Encode(h Header, recs ...Record) []byte {
	size := HeaderSize
	for i := range recs {
		size += 16 + len(recs[i].Key) + len(recs[i].Value)
	}
	b := make([]byte, HeaderSize, size)
	for i := range recs {
		b = AppendRecord(b, recs[i])
	}
	h.RecordCount = int32(len(recs))
	h.LastOffsetDelta = int32(len(recs) - 1)
	Seal(b, h)
	return b
}

// ControlType is the type field of a control record's key (Kafka's
// ControlRecordType).
type ControlType int16

// Transaction marker types.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// Marker is an end-transaction marker: a control batch of one record,
// key (int16 version 0, int16 type), value (int16 version 0, int32
// coordinator epoch).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Type             ControlType
	CoordinatorEpoch int32
	Timestamp        int64 // ms, both base and max timestamp
}

// EncodeMarker builds the control batch for m: transactional and control
// attributes, no codec, base sequence -1, leader epoch -1 (the broker
// assigns offset and epoch).
func EncodeMarker(m Marker) []byte {
	key := []byte{0, 0, byte(uint16(m.Type) >> 8), byte(m.Type)}
	value := make([]byte, 6)
	be.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	return Encode(Header{
		PartitionLeaderEpoch: -1,
		Attributes:           AttrTransactional | AttrControl,
		BaseTimestamp:        m.Timestamp,
		MaxTimestamp:         m.Timestamp,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         -1,
	}, Record{Key: key, Value: value})
}

// ErrBadControl is a control batch whose record is not a control record.
var ErrBadControl = errors.New("malformed control record")

// ControlRecord is what a control batch's record says.
type ControlRecord struct {
	Type ControlType
	// CoordinatorEpoch is read from an end-transaction marker's value;
	// other control types (e.g. KRaft's) may carry anything, so it is 0
	// when the value is shorter than a marker's.
	CoordinatorEpoch int32
}

// Control parses the first record of a control batch (control batches
// are uncompressed and hold one record), so b.Raw must be the whole batch.
func (b Batch) Control() (ControlRecord, error) {
	if b.RecordCount < 1 {
		return ControlRecord{}, fmt.Errorf("%w: control batch with %d records", ErrBadControl, b.RecordCount)
	}
	r, _, err := NextRecord(b.Body())
	if err != nil {
		return ControlRecord{}, fmt.Errorf("%w: %v", ErrBadControl, err)
	}
	return ParseControlKey(r.Key, r.Value)
}

// ParseControlKey decodes a control record's key and value.
func ParseControlKey(key, value []byte) (ControlRecord, error) {
	if len(key) < 4 {
		return ControlRecord{}, fmt.Errorf("%w: key of %d bytes", ErrBadControl, len(key))
	}
	c := ControlRecord{Type: ControlType(be.Uint16(key[2:]))}
	if len(value) >= 6 {
		c.CoordinatorEpoch = int32(be.Uint32(value[2:]))
	}
	return c, nil
}
