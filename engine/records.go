package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/internal/codec"
	"github.com/ringlog/ringlog/internal/records"
)

// Record-level access to batches: the engine otherwise handles batches as
// opaque bytes, but compaction keeps records by key and compacted topics
// refuse records without one. The record format is internal/records'.

// errBadRecord is a record whose fields do not fit its length.
var errBadRecord = records.ErrBadRecord

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
	r, rest, err := records.NextRecord(b)
	if err != nil {
		return record{}, nil, err
	}
	return record{
		raw:            r.Raw,
		timestampDelta: r.TimestampDelta,
		offsetDelta:    r.OffsetDelta,
		key:            r.Key,
		value:          r.Value,
		tombstone:      r.Value == nil,
	}, rest, nil
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

// parseBatchInfo reads the header of b, a batch checkBatch accepted.
func parseBatchInfo(b []byte) batchInfo {
	h, err := records.ParseHeader(b)
	if err != nil {
		panic(fmt.Sprintf("engine: parseBatchInfo of %d bytes", len(b)))
	}
	txnOrControl := h.IsTransactional() || h.IsControl()
	return batchInfo{
		baseOffset: h.BaseOffset,
		count:      h.RecordCount,
		codec:      h.Codec(),
		producer:   txnOrControl,
		control:    h.IsControl(),
		idempotent: h.HasProducer() && !txnOrControl,
		producerID: h.ProducerID,
		lastOffset: h.LastOffset(),
	}
}

// batchRecords returns the batch's records section, decompressed into buf
// (reused) when the batch is compressed.
func batchRecords(b []byte, bi batchInfo, buf []byte) ([]byte, []byte, error) {
	if bi.codec == codec.None {
		return b[records.HeaderSize:], buf, nil
	}
	out, err := codec.Decompress(bi.codec, buf[:0], b[records.HeaderSize:])
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
func checkClientBatches(batches []records.Batch, cfg TopicConfig) error {
	var buf []byte
	for i, bt := range batches {
		if count := bt.RecordCount; bt.LastOffsetDelta != count-1 {
			return fmt.Errorf("%w: batch %d: %d records with lastOffsetDelta %d", ErrInvalidRecord, i, count, bt.LastOffsetDelta)
		}
		if !cfg.Compact() || bt.IsControl() {
			continue
		}
		var err error
		buf, err = eachRecord(bt.Raw, buf, func(offset int64, r record) error {
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
		out = slices.Clone(b[:records.HeaderSize])
		h, _ := records.ParseHeader(out)
		records.SetAttributes(out, h.Attributes&^records.AttrCodecMask)
		records.Reseal(out, 0)
		return out, dropped, buf, nil
	}
	plain := make([]byte, 0, n)
	for _, r := range kept {
		plain = append(plain, r...)
	}
	out = make([]byte, records.HeaderSize, records.HeaderSize+n)
	copy(out, b[:records.HeaderSize])
	switch {
	case bi.codec == codec.None:
		out = append(out, plain...)
	case bi.codec == codec.Snappy && codec.IsXerial(b[records.HeaderSize:]):
		out = codec.CompressXerial(out, plain)
	default:
		if out, err = codec.Compress(bi.codec, out, plain); err != nil {
			return nil, 0, buf, err
		}
	}
	records.Reseal(out, int32(len(kept)))
	return out, dropped, buf, nil
}
