package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/internal/codec"
)

// Record-level access to batches: the engine otherwise handles batches as
// opaque bytes, but compaction keeps records by key and compacted topics
// refuse records without one. Record (magic 2), inside the possibly
// compressed records section of a batch:
//
//	varint   length (of the rest of the record)
//	int8     attributes (unused)
//	varlong  timestampDelta
//	varint   offsetDelta
//	varint   keyLength (-1: null) + key
//	varint   valueLength (-1: null, a tombstone) + value
//	varint   header count + headers

const (
	offProducerID = 43
)

var errBadRecord = errors.New("malformed record")

// record is one parsed record of a batch; the slices alias the batch (or
// its decompressed records).
type record struct {
	raw            []byte // the whole record, length prefix included
	timestampDelta int64
	offsetDelta    int32
	key            []byte // nil: null key
	value          []byte // nil: null value
	tombstone      bool   // null value
}

// nextRecord parses the record at the start of b.
func nextRecord(b []byte) (record, []byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 1 || length > int64(len(b)-n) {
		return record{}, nil, errBadRecord
	}
	end := n + int(length)
	r := record{raw: b[:end]}
	// Past the attributes, then the timestampDelta.
	body := b[n+1 : end]
	if r.timestampDelta, n = binary.Varint(body); n <= 0 {
		return record{}, nil, errBadRecord
	}
	body = body[n:]
	delta, n := binary.Varint(body)
	if n <= 0 || delta < 0 || delta > 1<<31-1 {
		return record{}, nil, errBadRecord
	}
	r.offsetDelta = int32(delta)
	body = body[n:]
	var ok bool
	if r.key, body, ok = nullableBytes(body); !ok {
		return record{}, nil, errBadRecord
	}
	if r.value, _, ok = nullableBytes(body); !ok {
		return record{}, nil, errBadRecord
	}
	r.tombstone = r.value == nil
	return r, b[end:], nil
}

// nullableBytes splits a varint length (-1: null) and that many bytes off
// the front of b (a part of a non-nil slice): the field, nil only when
// null and otherwise capped at its length, and the rest of b.
func nullableBytes(b []byte) (field, rest []byte, ok bool) {
	l, n := binary.Varint(b)
	if n <= 0 || l < -1 || l > int64(len(b)-n) {
		return nil, nil, false
	}
	b = b[n:]
	if l < 0 {
		return nil, b, true
	}
	return b[:l:l], b[l:], true
}

// batchInfo is what compaction needs from a batch header.
type batchInfo struct {
	baseOffset int64
	count      int32
	codec      codec.Codec
	// producer batches (transactional, control) are never filtered:
	// their markers and aborted ranges must stay as written.
	producer bool
	control  bool
	// idempotent: a non-transactional batch with a producer id. Its
	// records are compacted like plain ones; emptied, it is kept as a
	// header only when it is its producer's last batch (its sequence is
	// the producer's dedupe state), as Kafka's cleaner does.
	idempotent bool
	producerID int64
	lastOffset int64
}

func parseBatchInfo(b []byte) batchInfo {
	attrs := be.Uint16(b[offAttributes:])
	pid := int64(be.Uint64(b[offProducerID:]))
	txnOrControl := attrs&(attrTransactional|attrControl) != 0
	return batchInfo{
		baseOffset: int64(be.Uint64(b[offBaseOffset:])),
		count:      int32(be.Uint32(b[offRecordCount:])),
		codec:      codec.Codec(attrs & attrCodecMask),
		producer:   txnOrControl,
		control:    attrs&attrControl != 0,
		idempotent: pid >= 0 && !txnOrControl,
		producerID: pid,
		lastOffset: int64(be.Uint64(b[offBaseOffset:])) + int64(int32(be.Uint32(b[offLastOffsetDelta:]))),
	}
}

// batchRecords returns the batch's records section, decompressed into buf
// (reused) when the batch is compressed.
func batchRecords(b []byte, bi batchInfo, buf []byte) ([]byte, []byte, error) {
	if bi.codec == codec.None {
		return b[batchHeaderSize:], buf, nil
	}
	out, err := codec.Decompress(bi.codec, buf[:0], b[batchHeaderSize:])
	if err != nil {
		return nil, buf, err
	}
	return out, out, nil
}

// eachRecord calls fn for each of the batch's records in order; buf is a
// reusable decompression buffer, returned grown.
func eachRecord(b []byte, buf []byte, fn func(offset int64, r record) error) ([]byte, error) {
	bi := parseBatchInfo(b)
	recs, buf, err := batchRecords(b, bi, buf)
	if err != nil {
		return buf, err
	}
	for i := int32(0); i < bi.count; i++ {
		r, rest, err := nextRecord(recs)
		if err != nil {
			return buf, fmt.Errorf("record %d of the batch at offset %d: %w", i, bi.baseOffset, err)
		}
		recs = rest
		if err := fn(bi.baseOffset+int64(r.offsetDelta), r); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// checkClientBatches adds the rules for batches from producers to what
// checkBatch checks (which also accepts compacted batches read back from
// a log): a batch holds exactly lastOffsetDelta+1 records, and a topic
// with cleanup.policy compact takes no record without a key (Kafka:
// INVALID_RECORD), since compaction could never remove it.
func checkClientBatches(records []byte, hs []batchHeader, cfg TopicConfig) error {
	pos := 0
	var buf []byte
	for i, h := range hs {
		b := records[pos : pos+int(h.size)]
		pos += int(h.size)
		if count := int32(be.Uint32(b[offRecordCount:])); h.lastOffsetDelta != count-1 {
			return fmt.Errorf("%w: batch %d: %d records with lastOffsetDelta %d", ErrInvalidRecord, i, count, h.lastOffsetDelta)
		}
		if !cfg.Compact() || be.Uint16(b[offAttributes:])&attrControl != 0 {
			continue
		}
		var err error
		buf, err = eachRecord(b, buf, func(offset int64, r record) error {
			if r.key == nil {
				return fmt.Errorf("%w: compacted topic: record %d of batch %d has no key", ErrInvalidRecord, offset, i)
			}
			return nil
		})
		switch {
		case errors.Is(err, ErrInvalidRecord):
			return err
		case errors.Is(err, codec.ErrTooLarge), errors.Is(err, errBadRecord):
			return fmt.Errorf("%w: batch %d: %v", ErrInvalidRecord, i, err)
		case err != nil:
			return fmt.Errorf("%w: batch %d: %v", ErrCorruptMessage, i, err)
		}
	}
	return nil
}

// filterBatch returns b without the records keep refuses: nil when none
// is left, b itself when all are kept, else a new batch with the same
// header fields (baseOffset, lastOffsetDelta, epochs, attributes,
// timestamps, producer fields), the kept records re-compressed with the
// batch's codec, and a new recordCount, batchLength and CRC. Producer
// batches are returned as they are. dropped counts the removed records.
func filterBatch(b []byte, buf []byte, keep func(offset int64, r record) bool, retainEmpty func(batchInfo) bool) (out []byte, dropped int, _ []byte, err error) {
	bi := parseBatchInfo(b)
	if bi.producer {
		return b, 0, buf, nil
	}
	recs, buf, err := batchRecords(b, bi, buf)
	if err != nil {
		return nil, 0, buf, err
	}
	var kept [][]byte
	n := 0
	for i := int32(0); i < bi.count; i++ {
		r, rest, err := nextRecord(recs)
		if err != nil {
			return nil, 0, buf, fmt.Errorf("record %d of the batch at offset %d: %w", i, bi.baseOffset, err)
		}
		recs = rest
		if keep(bi.baseOffset+int64(r.offsetDelta), r) {
			kept = append(kept, r.raw)
			n += len(r.raw)
		} else {
			dropped++
		}
	}
	if dropped == 0 {
		return b, 0, buf, nil
	}
	if len(kept) == 0 && (!bi.idempotent || retainEmpty == nil || !retainEmpty(bi)) {
		return nil, dropped, buf, nil
	}
	if len(kept) == 0 {
		// Kafka's empty batch: the header alone, uncompressed, with the
		// producer id, epoch, base sequence and lastOffsetDelta intact.
		out = slices.Clone(b[:batchHeaderSize])
		attrs := be.Uint16(out[offAttributes:]) &^ attrCodecMask
		be.PutUint16(out[offAttributes:], attrs)
		be.PutUint32(out[offBatchLength:], uint32(len(out)-logOverhead))
		be.PutUint32(out[offRecordCount:], 0)
		be.PutUint32(out[offCRC:], crc32c(out[offAttributes:]))
		return out, dropped, buf, nil
	}
	plain := make([]byte, 0, n)
	for _, r := range kept {
		plain = append(plain, r...)
	}
	out = make([]byte, batchHeaderSize, batchHeaderSize+n)
	copy(out, b[:batchHeaderSize])
	switch {
	case bi.codec == codec.None:
		out = append(out, plain...)
	case bi.codec == codec.Snappy && codec.IsXerial(b[batchHeaderSize:]):
		out = codec.CompressXerial(out, plain)
	default:
		if out, err = codec.Compress(bi.codec, out, plain); err != nil {
			return nil, 0, buf, err
		}
	}
	be.PutUint32(out[offBatchLength:], uint32(len(out)-logOverhead))
	be.PutUint32(out[offRecordCount:], uint32(len(kept)))
	be.PutUint32(out[offCRC:], crc32c(out[offAttributes:]))
	return out, dropped, buf, nil
}
