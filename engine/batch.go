package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record batch (magic 2) header layout; see doc.go.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offRecordCount     = 57
	batchHeaderSize    = 61
	// logOverhead is baseOffset + batchLength: the bytes batchLength omits.
	logOverhead = 12

	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var be = binary.BigEndian

// batchHeader is the part of a batch header the engine uses.
type batchHeader struct {
	baseOffset      int64
	size            int32 // whole batch, logOverhead included
	lastOffsetDelta int32
	maxTimestamp    int64
	empty           bool // no records: a producer's last batch, emptied by compaction
}

func (h batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }

func parseHeader(b []byte) batchHeader {
	return batchHeader{
		baseOffset:      int64(be.Uint64(b[offBaseOffset:])),
		size:            int32(be.Uint32(b[offBatchLength:])) + logOverhead,
		lastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		maxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		empty:           be.Uint32(b[offRecordCount:]) == 0,
	}
}

// checkBatch validates the batch at the start of b (which may hold more
// batches after it) and returns its header. maxSize <= 0 skips the size
// check. The errors wrap the engine's sentinel errors.
func checkBatch(b []byte, maxSize int32) (batchHeader, error) {
	if len(b) < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptMessage, len(b))
	}
	length := int64(int32(be.Uint32(b[offBatchLength:])))
	if length < batchHeaderSize-logOverhead || length+logOverhead > int64(len(b)) {
		return batchHeader{}, fmt.Errorf("%w: batchLength %d with %d bytes left", ErrCorruptMessage, length, len(b)-logOverhead)
	}
	switch magic := int8(b[offMagic]); magic {
	case 2:
	case 0, 1:
		return batchHeader{}, fmt.Errorf("%w: magic %d", ErrUnsupportedVersion, magic)
	default:
		return batchHeader{}, fmt.Errorf("%w: magic %d", ErrCorruptMessage, magic)
	}
	h := parseHeader(b)
	if maxSize > 0 && h.size > maxSize {
		return h, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrMessageTooLarge, h.size, maxSize)
	}
	raw := b[:h.size]
	if got, want := crc32.Checksum(raw[offAttributes:], castagnoli), be.Uint32(raw[offCRC:]); got != want {
		return h, fmt.Errorf("%w: crc %08x, header says %08x", ErrCorruptMessage, got, want)
	}
	// Compaction leaves batches with fewer records than lastOffsetDelta+1
	// (their last offset stays), and keeps an idempotent producer's batch
	// as an empty header when all its records went (its sequence must
	// stay); producers must send exactly lastOffsetDelta+1 records, which
	// checkClientBatches adds for Append.
	count := int32(be.Uint32(raw[offRecordCount:]))
	emptyProducerBatch := count == 0 && int64(be.Uint64(raw[offProducerID:])) >= 0
	if count < 0 || count == 0 && !emptyProducerBatch || h.lastOffsetDelta < count-1 {
		return h, fmt.Errorf("%w: %d records with lastOffsetDelta %d", ErrInvalidRecord, count, h.lastOffsetDelta)
	}
	attrs := be.Uint16(raw[offAttributes:])
	if codec := attrs & attrCodecMask; codec > 4 {
		return h, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, codec)
	}
	// A control batch (transaction marker) is a single uncompressed record
	// of a transactional producer; anything else with the bit is forged.
	if attrs&attrControl != 0 && (attrs&attrTransactional == 0 || attrs&attrCodecMask != 0 || count != 1) {
		return h, fmt.Errorf("%w: malformed control batch (attributes %#x, %d records)", ErrInvalidRecord, attrs, count)
	}
	return h, nil
}

// validateBatches checks every batch in records and returns their headers.
// Nothing is modified, so a failure leaves the caller's bytes untouched.
func validateBatches(records []byte, maxSize int32) ([]batchHeader, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: no record batches", ErrCorruptMessage)
	}
	var hs []batchHeader
	for pos := 0; pos < len(records); {
		h, err := checkBatch(records[pos:], maxSize)
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		hs = append(hs, h)
		pos += int(h.size)
	}
	return hs, nil
}

// rewriteBatch sets the fields the broker owns. Only baseOffset and the
// leader epoch change unless logAppendTime >= 0, which also sets the
// timestamp type and maxTimestamp and so needs a new CRC.
func rewriteBatch(b []byte, baseOffset int64, leaderEpoch int32, logAppendTime int64) {
	be.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	be.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
	if logAppendTime >= 0 {
		be.PutUint16(b[offAttributes:], be.Uint16(b[offAttributes:])|attrLogAppendTime)
		be.PutUint64(b[offMaxTimestamp:], uint64(logAppendTime))
		be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
