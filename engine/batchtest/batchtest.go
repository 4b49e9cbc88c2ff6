// Package batchtest encodes and decodes Kafka record batches (magic 2,
// uncompressed) for tests of the engine and of the wire server.
package batchtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

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
func Encode(opts Options, records ...Record) []byte {
	if len(records) == 0 {
		panic("batchtest: a batch needs at least one record")
	}
	baseTs, maxTs := records[0].Timestamp, records[0].Timestamp
	for _, r := range records {
		baseTs = min(baseTs, r.Timestamp)
		maxTs = max(maxTs, r.Timestamp)
	}
	b := make([]byte, 61, 61+len(records)*32)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(opts.BaseOffset))
	be.PutUint32(b[12:], uint32(opts.PartitionLeaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], uint16(opts.Attributes))
	be.PutUint32(b[23:], uint32(len(records)-1))
	be.PutUint64(b[27:], uint64(baseTs))
	be.PutUint64(b[35:], uint64(maxTs))
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if opts.Idempotent {
		pid, epoch, seq = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
	}
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], uint32(len(records)))
	var body []byte
	for i, r := range records {
		body = body[:0]
		body = append(body, 0) // record attributes
		body = binary.AppendVarint(body, r.Timestamp-baseTs)
		body = binary.AppendVarint(body, int64(i))
		body = appendBytes(body, r.Key)
		body = appendBytes(body, r.Value)
		body = binary.AppendVarint(body, int64(len(r.Headers)))
		for _, h := range r.Headers {
			body = appendBytes(body, []byte(h.Key))
			body = appendBytes(body, h.Value)
		}
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
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
	be := binary.BigEndian
	for len(b) > 0 {
		if len(b) < 61 {
			return out, errors.New("batchtest: short batch header")
		}
		size := 12 + int(int32(be.Uint32(b[8:])))
		if size < 61 || size > len(b) {
			return out, fmt.Errorf("batchtest: batch length %d with %d bytes left", size, len(b))
		}
		raw := b[:size]
		b = b[size:]
		if raw[16] != 2 {
			return out, fmt.Errorf("batchtest: magic %d", raw[16])
		}
		if crc32.Checksum(raw[21:], castagnoli) != be.Uint32(raw[17:]) {
			return out, errors.New("batchtest: crc mismatch")
		}
		bt := Batch{
			BaseOffset:           int64(be.Uint64(raw[0:])),
			PartitionLeaderEpoch: int32(be.Uint32(raw[12:])),
			Attributes:           int16(be.Uint16(raw[21:])),
			LastOffsetDelta:      int32(be.Uint32(raw[23:])),
			BaseTimestamp:        int64(be.Uint64(raw[27:])),
			MaxTimestamp:         int64(be.Uint64(raw[35:])),
			ProducerID:           int64(be.Uint64(raw[43:])),
			Size:                 size,
		}
		if bt.Attributes&7 != 0 {
			return out, errors.New("batchtest: compressed batches are not decoded")
		}
		n := int(int32(be.Uint32(raw[57:])))
		rd := reader{b: raw[61:]}
		for range n {
			rd.varint() // record length: fields are self-delimiting
			rd.byte1()
			ts := rd.varint()
			od := rd.varint()
			r := DecodedRecord{Offset: bt.BaseOffset + od, Timestamp: bt.BaseTimestamp + ts}
			r.Key = rd.bytes()
			r.Value = rd.bytes()
			nh := rd.varint()
			for range nh {
				k := rd.bytes()
				r.Headers = append(r.Headers, Header{Key: string(k), Value: rd.bytes()})
			}
			if rd.err != nil {
				return out, rd.err
			}
			bt.Records = append(bt.Records, r)
		}
		out = append(out, bt)
	}
	return out, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("batchtest: bad varint")
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1() {
	if len(r.b) == 0 {
		r.err = errors.New("batchtest: short record")
		return
	}
	r.b = r.b[1:]
}

func (r *reader) bytes() []byte {
	n := r.varint()
	if n < 0 || r.err != nil {
		return nil
	}
	if int(n) > len(r.b) {
		r.err = errors.New("batchtest: short record")
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
