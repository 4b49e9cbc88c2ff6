// Package records owns the Kafka record-batch format (magic 2): the header
// layout, a parsed view of a batch, record iteration and the encoders for
// plain, producer (idempotent or transactional) and control batches. No
// other package reads or writes header fields by offset.
//
// Batch header, big-endian (61 bytes, then the records section):
//
//	 0  int64  baseOffset
//	 8  int32  batchLength (bytes after this field)
//	12  int32  partitionLeaderEpoch
//	16  int8   magic (2)
//	17  uint32 crc: CRC-32C (Castagnoli) of bytes 21..end
//	21  int16  attributes: bits 0-2 codec, 3 timestamp type (log append
//	           time), 4 transactional, 5 control
//	23  int32  lastOffsetDelta
//	27  int64  baseTimestamp
//	35  int64  maxTimestamp
//	43  int64  producerId (-1: none)
//	51  int16  producerEpoch
//	53  int32  baseSequence
//	57  int32  recordCount
//	61         records (compressed as a whole when the codec is not 0)
//
// baseOffset and partitionLeaderEpoch are outside the CRC, so the broker
// assigns them in place (SetBaseOffset, SetPartitionLeaderEpoch) without
// recomputing it.
//
// The parsers check bounds only: a Header needs HeaderSize bytes and Split
// refuses a batchLength that runs past the input. What a batch must
// satisfy beyond that (magic, CRC, record counts, codecs) is the caller's
// policy; Batch offers the checks (CRCValid) but does not impose them.
package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/ringlog/ringlog/internal/codec"
)

// Header field offsets.
const (
	OffBaseOffset      = 0
	OffBatchLength     = 8
	OffLeaderEpoch     = 12
	OffMagic           = 16
	OffCRC             = 17
	OffAttributes      = 21
	OffLastOffsetDelta = 23
	OffBaseTimestamp   = 27
	OffMaxTimestamp    = 35
	OffProducerID      = 43
	OffProducerEpoch   = 51
	OffBaseSequence    = 53
	OffRecordCount     = 57
	// HeaderSize is the length of the header before the records section.
	HeaderSize = 61
	// LogOverhead is baseOffset + batchLength: the bytes batchLength omits.
	LogOverhead = 12
	// Magic is the only batch format version this package handles.
	Magic = 2
)

// Attribute bits.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

// NoProducerID is the producer id of a batch without a producer.
const NoProducerID = -1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var be = binary.BigEndian

// CRC32C is the batch checksum function (CRC-32C, Castagnoli).
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Header is a decoded batch header.
type Header struct {
	BaseOffset           int64
	BatchLength          int32 // as read; Size adds LogOverhead
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// ParseHeader decodes the header at the start of b, which needs at least
// HeaderSize bytes. No field is checked.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &FramingError{Left: len(b)}
	}
	return parseHeader(b), nil
}

// parseHeader is ParseHeader without the length check.
func parseHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{
		BaseOffset:           int64(be.Uint64(b[OffBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[OffBatchLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[OffLeaderEpoch:])),
		Magic:                int8(b[OffMagic]),
		CRC:                  be.Uint32(b[OffCRC:]),
		Attributes:           int16(be.Uint16(b[OffAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[OffLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[OffBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[OffMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[OffProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[OffProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[OffBaseSequence:])),
		RecordCount:          int32(be.Uint32(b[OffRecordCount:])),
	}
}

// Size is the whole batch's length in bytes, LogOverhead included; it is
// negative or below HeaderSize only for a corrupt header.
func (h Header) Size() int64 { return int64(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the batch's last record (of the last one it
// held before compaction).
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec of the records section.
func (h Header) Codec() codec.Codec { return codec.Codec(h.Attributes & AttrCodecMask) }

// IsTransactional reports the transactional attribute.
func (h Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// IsControl reports the control attribute (a transaction marker).
func (h Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsLogAppendTime reports the log-append-time timestamp type.
func (h Header) IsLogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// HasProducer reports whether the batch carries a producer id (an
// idempotent or transactional producer's batch).
func (h Header) HasProducer() bool { return h.ProducerID >= 0 }

// Batch is a parsed batch: its header and its bytes, which alias the
// input it was parsed from.
type Batch struct {
	Header
	// Raw is the whole batch, header included (Size bytes).
	Raw []byte
}

// Parse returns the batch at the start of b (which may hold more after
// it), checking only that its header and batchLength fit in b.
func Parse(b []byte) (Batch, error) {
	if len(b) < HeaderSize {
		return Batch{}, &FramingError{Left: len(b)}
	}
	h := parseHeader(b)
	if size := h.Size(); size < HeaderSize || size > int64(len(b)) {
		return Batch{}, &FramingError{Left: len(b), BatchLength: h.BatchLength}
	}
	return Batch{Header: h, Raw: b[:h.Size()]}, nil
}

// Body is the records section, still compressed if the codec says so.
func (b Batch) Body() []byte { return b.Raw[HeaderSize:] }

// ComputeCRC is the CRC of the batch's bytes from the attributes on.
func (b Batch) ComputeCRC() uint32 { return CRC32C(b.Raw[OffAttributes:]) }

// CRCValid reports whether the stored CRC matches the bytes.
func (b Batch) CRCValid() bool { return b.ComputeCRC() == b.CRC }

// SetBaseOffset assigns the base offset in place (outside the CRC).
func (b *Batch) SetBaseOffset(off int64) {
	PutBaseOffset(b.Raw, off)
	b.BaseOffset = off
}

// SetPartitionLeaderEpoch assigns the leader epoch in place (outside the
// CRC).
func (b *Batch) SetPartitionLeaderEpoch(epoch int32) {
	PutPartitionLeaderEpoch(b.Raw, epoch)
	b.PartitionLeaderEpoch = epoch
}

// SetLogAppendTime stamps the batch with the broker's time (see
// StampLogAppendTime).
func (b *Batch) SetLogAppendTime(ts int64) {
	StampLogAppendTime(b.Raw, ts)
	b.Header = parseHeader(b.Raw)
}

// PutBaseOffset assigns the base offset of the batch at the start of
// batch in place (outside the CRC).
func PutBaseOffset(batch []byte, off int64) { be.PutUint64(batch[OffBaseOffset:], uint64(off)) }

// PutPartitionLeaderEpoch assigns the leader epoch of the batch at the
// start of batch in place (outside the CRC).
func PutPartitionLeaderEpoch(batch []byte, epoch int32) {
	be.PutUint32(batch[OffLeaderEpoch:], uint32(epoch))
}

// StampLogAppendTime sets the log-append-time bit and maxTimestamp ts on
// batch (exactly one whole batch); both are inside the CRC, which is
// recomputed.
func StampLogAppendTime(batch []byte, ts int64) {
	be.PutUint16(batch[OffAttributes:], be.Uint16(batch[OffAttributes:])|AttrLogAppendTime)
	be.PutUint64(batch[OffMaxTimestamp:], uint64(ts))
	be.PutUint32(batch[OffCRC:], CRC32C(batch[OffAttributes:]))
}

// FramingError says why the bytes at a position do not hold a whole batch.
type FramingError struct {
	// Left is how many bytes were left at the batch's start.
	Left int
	// BatchLength is the header's batchLength; meaningful only when Left
	// is at least HeaderSize.
	BatchLength int32
}

func (e *FramingError) Error() string {
	if e.Left < HeaderSize {
		return fmt.Sprintf("%d bytes is shorter than a batch header", e.Left)
	}
	return fmt.Sprintf("batchLength %d with %d bytes left", e.BatchLength, e.Left-LogOverhead)
}

// Set is the parsed view of back-to-back batches (one produce partition's
// records, a range read from a log): parsed once, then handed to whoever
// needs the headers.
type Set struct {
	// Raw is all the bytes, Batches their parsed prefix.
	Raw     []byte
	Batches []Batch
	// Err is why parsing stopped before the end of Raw (a *FramingError),
	// at byte ErrPos; nil when the batches cover Raw.
	Err    error
	ErrPos int
}

// ParseSet splits b into batches. A batch that does not fit ends the
// split (Set.Err); the batches before it are kept.
func ParseSet(b []byte) Set { return ParseSetInto(b, nil) }

// ParseSetInto is ParseSet appending the batches to buf (from its
// length), so a caller framing many sets can give them one backing array.
func ParseSetInto(b []byte, buf []Batch) Set {
	s := Set{Raw: b, Batches: buf}
	for pos := 0; pos < len(b); {
		bt, err := Parse(b[pos:])
		if err != nil {
			s.Err, s.ErrPos = err, pos
			break
		}
		s.Batches = append(s.Batches, bt)
		pos += len(bt.Raw)
	}
	return s
}

// HasTransactional reports whether any batch is transactional, counting
// a last batch that does not fit when its header is whole: the client set
// the bit either way.
func (s Set) HasTransactional() bool {
	for i := range s.Batches {
		if s.Batches[i].IsTransactional() {
			return true
		}
	}
	if s.Err != nil && len(s.Raw)-s.ErrPos >= HeaderSize {
		return parseHeader(s.Raw[s.ErrPos:]).IsTransactional()
	}
	return false
}

// Walk calls fn for each whole batch at the start of b, in order, and
// stops at the first that does not fit or when fn returns false. It
// allocates nothing: the scan for callers that need one field of each
// header and keep no view.
func Walk(b []byte, fn func(Batch) bool) {
	for len(b) > 0 {
		bt, err := Parse(b)
		if err != nil || !fn(bt) {
			return
		}
		b = b[len(bt.Raw):]
	}
}
