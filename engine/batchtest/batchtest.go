// Package batchtest encodes and decodes Kafka record batches (magic 2,
// uncompressed) for tests of the engine and of the wire server: a
// test-friendly face (absolute timestamps and offsets) on internal/records.
package batchtest

import (
	"errors"
	"fmt"
	"time"

	"github.com/ringlog/ringlog/internal/records"
)

// Header is a record header.
type Header = records.RecordHeader

// Record is one record. A nil Key or Value encodes as null.
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp int64 // ms since epoch
}

// Options are the batch-level fields. The zero value is a plain,
// non-idempotent batch at base offset 0.
type Options struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           int16
	// Idempotent sets ProducerID/Epoch/BaseSequence; otherwise they are -1.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// Encode returns one record batch holding records (at least one).
func Encode(opts Options, recs ...Record) []byte {
	if len(recs) == 0 {
		panic("batchtest: a batch needs at least one record")
	}
	baseTs, maxTs := recs[0].Timestamp, recs[0].Timestamp
	for _, r := range recs {
		baseTs = min(baseTs, r.Timestamp)
		maxTs = max(maxTs, r.Timestamp)
	}
	h := records.Plain(opts.Attributes, baseTs, maxTs)
	h.BaseOffset = opts.BaseOffset
	h.PartitionLeaderEpoch = opts.PartitionLeaderEpoch
	if opts.Idempotent {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
	}
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{
			TimestampDelta: r.Timestamp - baseTs,
			OffsetDelta:    int32(i),
			Key:            r.Key,
			Value:          r.Value,
			Headers:        r.Headers,
		}
	}
	return records.Encode(h, rs...)
}

// Values returns a batch of one record per value, keys "k<i>", timestamps now.
func Values(values ...string) []byte {
	now := time.Now().UnixMilli()
	recs := make([]Record, len(values))
	for i, v := range values {
		recs[i] = Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v), Timestamp: now}
	}
	return Encode(Options{}, recs...)
}

// Sized returns a batch of n records whose batch is about size bytes total.
func Sized(n, size int) []byte {
	per := max(size/n-20, 0)
	now := time.Now().UnixMilli()
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, per)
		for j := range v {
			v[j] = byte('a' + (i+j)%26)
		}
		recs[i] = Record{Value: v, Timestamp: now}
	}
	return Encode(Options{}, recs...)
}

// Batch is a decoded record batch.
type Batch struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	Records              []DecodedRecord
	Size                 int // bytes the batch took
}

// DecodedRecord is a record with its absolute offset and timestamp.
type DecodedRecord struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Decode parses back-to-back uncompressed batches, checking their CRCs. A
// trailing partial batch is an error.
func Decode(b []byte) ([]Batch, error) {
	var out []Batch
	for len(b) > 0 {
		raw, err := records.Parse(b)
		if err != nil {
			return out, fmt.Errorf("batchtest: %v", err)
		}
		b = b[len(raw.Raw):]
		if raw.Magic != records.Magic {
			return out, fmt.Errorf("batchtest: magic %d", raw.Magic)
		}
		if !raw.CRCValid() {
			return out, errors.New("batchtest: crc mismatch")
		}
		bt := Batch{
			BaseOffset:           raw.BaseOffset,
			PartitionLeaderEpoch: raw.PartitionLeaderEpoch,
			Attributes:           raw.Attributes,
			LastOffsetDelta:      raw.LastOffsetDelta,
			BaseTimestamp:        raw.BaseTimestamp,
			MaxTimestamp:         raw.MaxTimestamp,
			ProducerID:           raw.ProducerID,
			Size:                 len(raw.Raw),
		}
		if raw.Codec() != 0 {
			return out, errors.New("batchtest: compressed batches are not decoded")
		}
		rest := raw.Body()
		for range raw.RecordCount {
			r, next, err := records.NextRecord(rest)
			if err != nil {
				return out, fmt.Errorf("batchtest: %v", err)
			}
			rest = next
			hs, err := r.ParseHeaders()
			if err != nil {
				return out, fmt.Errorf("batchtest: %v", err)
			}
			bt.Records = append(bt.Records, DecodedRecord{
				Offset:    bt.BaseOffset + int64(r.OffsetDelta),
				Timestamp: bt.BaseTimestamp + r.TimestampDelta,
				Key:       r.Key,
				Value:     r.Value,
				Headers:   hs,
			})
		}
		out = append(out, bt)
	}
	return out, nil
}
