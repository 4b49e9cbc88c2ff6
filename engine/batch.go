package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/ringlog/ringlog/internal/records"
)

// The record-batch format is internal/records'; the engine keeps the
// header fields it indexes by (batchHeader) and the rules a batch must
// meet to be appended or read back (checkBatch).

var be = binary.BigEndian

// batchHeader is the part of a batch header the engine uses.
type batchHeader struct {
	baseOffset      int64
	size            int32 // whole batch, records.LogOverhead included
	lastOffsetDelta int32
	maxTimestamp    int64
	empty           bool // no records: a producer's last batch, emptied by compaction
}

func (h batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }

func headerOf(h records.Header) batchHeader {
	return batchHeader{
		baseOffset:      h.BaseOffset,
		size:            h.BatchLength + records.LogOverhead,
		lastOffsetDelta: h.LastOffsetDelta,
		maxTimestamp:    h.MaxTimestamp,
		empty:           h.RecordCount == 0,
	}
}

// parseHeader reads the header at the start of b (records.HeaderSize
// bytes at least) without checking it.
func parseHeader(b []byte) batchHeader {
	h, err := records.ParseHeader(b)
	if err != nil {
		panic(fmt.Sprintf("engine: parseHeader of %d bytes", len(b)))
	}
	return headerOf(h)
}

// checkBatch validates the batch at the start of b (which may hold more
// batches after it) and returns its header. maxSize <= 0 skips the size
// check. The errors wrap the engine's sentinel errors.
func checkBatch(b []byte, maxSize int32) (batchHeader, error) {
	bt, err := records.Parse(b)
	if err != nil {
		return batchHeader{}, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
	}
	return checkParsed(bt, maxSize)
}

// checkParsed is checkBatch for a batch records.Parse framed.
func checkParsed(bt records.Batch, maxSize int32) (batchHeader, error) {
	switch bt.Magic {
	case records.Magic:
	case 0, 1:
		return batchHeader{}, fmt.Errorf("%w: magic %d", ErrUnsupportedVersion, bt.Magic)
	default:
		return batchHeader{}, fmt.Errorf("%w: magic %d", ErrCorruptMessage, bt.Magic)
	}
	h := headerOf(bt.Header)
	if maxSize > 0 && h.size > maxSize {
		return h, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrMessageTooLarge, h.size, maxSize)
	}
	if got := bt.ComputeCRC(); got != bt.CRC {
		return h, fmt.Errorf("%w: crc %08x, header says %08x", ErrCorruptMessage, got, bt.CRC)
	}
	// Compaction leaves batches with fewer records than lastOffsetDelta+1
	// (their last offset stays), and keeps an idempotent producer's batch
	// as an empty header when all its records went (its sequence must
	// stay); producers must send exactly lastOffsetDelta+1 records, which
	// checkClientBatches adds for Append.
	count := bt.RecordCount
	emptyProducerBatch := count == 0 && bt.HasProducer()
	if count < 0 || count == 0 && !emptyProducerBatch || h.lastOffsetDelta < count-1 {
		return h, fmt.Errorf("%w: %d records with lastOffsetDelta %d", ErrInvalidRecord, count, h.lastOffsetDelta)
	}
	if c := bt.Codec(); c > 4 {
		return h, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, c)
	}
	// A control batch (transaction marker) is a single uncompressed record
	// of a transactional producer; anything else with the bit is forged.
	if bt.IsControl() && (!bt.IsTransactional() || bt.Codec() != 0 || count != 1) {
		return h, fmt.Errorf("%w: malformed control batch (attributes %#x, %d records)", ErrInvalidRecord, uint16(bt.Attributes), count)
	}
	return h, nil
}

// validateBatches checks every batch in b and returns their headers.
// Nothing is modified, so a failure leaves the caller's bytes untouched.
func validateBatches(b []byte, maxSize int32) ([]batchHeader, error) {
	return validateSet(records.ParseSet(b), maxSize)
}

// validateSet is validateBatches for batches already framed: each parsed
// batch is checked in order, then the framing error that ended the set,
// so the first bad batch is reported as if they were checked one by one.
func validateSet(set records.Set, maxSize int32) ([]batchHeader, error) {
	if len(set.Raw) == 0 {
		return nil, fmt.Errorf("%w: no record batches", ErrCorruptMessage)
	}
	hs := make([]batchHeader, 0, len(set.Batches))
	pos := 0
	for _, bt := range set.Batches {
		h, err := checkParsed(bt, maxSize)
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		hs = append(hs, h)
		pos += int(h.size)
	}
	if set.Err != nil {
		return nil, fmt.Errorf("batch at byte %d: %w: %v", set.ErrPos, ErrCorruptMessage, set.Err)
	}
	return hs, nil
}

// rewriteBatch sets the fields the broker owns. Only baseOffset and the
// leader epoch change unless logAppendTime >= 0, which also sets the
// timestamp type and maxTimestamp and so needs a new CRC.
func rewriteBatch(b []byte, baseOffset int64, leaderEpoch int32, logAppendTime int64) {
	records.PutBaseOffset(b, baseOffset)
	records.PutPartitionLeaderEpoch(b, leaderEpoch)
	if logAppendTime >= 0 {
		records.StampLogAppendTime(b, logAppendTime)
	}
}
