package records

import (
	"encoding/binary"
	"errors"
	"math"
)

// Record (magic 2), inside the (decompressed) records section:
//
//	varint   length (of the rest of the record)
//	int8     attributes (unused)
//	varlong  timestampDelta
//	varint   offsetDelta
//	varint   keyLength (-1: null) + key
//	varint   valueLength (-1: null, a tombstone) + value
//	varint   header count, then per header: varint keyLength + key,
//	         varint valueLength (-1: null) + value

// ErrBadRecord is a record whose fields do not fit its length.
var ErrBadRecord = errors.New("malformed record")

// Record is one record. Parsed, its slices alias the input (Key and Value
// capped at their length), and Headers stays nil: ParseHeaders decodes
// them on demand. For AppendRecord, Raw is ignored and Headers is written.
type Record struct {
	// Raw is the whole record, length prefix included (parsed only).
	Raw            []byte
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil: null key
	Value          []byte // nil: null value (a tombstone)
	Headers        []RecordHeader
	// headers is the unparsed header section of a parsed record.
	headers []byte
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte // nil: null
}

// NextRecord parses the record at the start of b and returns the rest of
// b. Every length is bounded by the bytes that remain; the header section
// is not looked at (ParseHeaders).
func NextRecord(b []byte) (Record, []byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 1 || length > int64(len(b)-n) {
		return Record{}, nil, ErrBadRecord
	}
	end := n + int(length)
	r := Record{Raw: b[:end], Attributes: int8(b[n])}
	body := b[n+1 : end]
	if r.TimestampDelta, n = binary.Varint(body); n <= 0 {
		return Record{}, nil, ErrBadRecord
	}
	body = body[n:]
	delta, n := binary.Varint(body)
	if n <= 0 || delta < 0 || delta > math.MaxInt32 {
		return Record{}, nil, ErrBadRecord
	}
	r.OffsetDelta = int32(delta)
	body = body[n:]
	var ok bool
	if r.Key, body, ok = nullableBytes(body); !ok {
		return Record{}, nil, ErrBadRecord
	}
	if r.Value, body, ok = nullableBytes(body); !ok {
		return Record{}, nil, ErrBadRecord
	}
	r.headers = body
	return r, b[end:], nil
}

// ParseHeaders decodes a parsed record's headers; the values alias the
// record.
func (r Record) ParseHeaders() ([]RecordHeader, error) {
	b := r.headers
	count, n := binary.Varint(b)
	if n <= 0 || count < 0 || count > int64(len(b)) {
		return nil, ErrBadRecord
	}
	b = b[n:]
	var hs []RecordHeader
	for range count {
		k, rest, ok := nullableBytes(b) // a null key reads as ""
		if !ok {
			return nil, ErrBadRecord
		}
		v, rest, ok := nullableBytes(rest)
		if !ok {
			return nil, ErrBadRecord
		}
		hs = append(hs, RecordHeader{Key: string(k), Value: v})
		b = rest
	}
	return hs, nil
}

// nullableBytes splits a varint length (-1: null) and that many bytes off
// the front of b: the field, nil only when null and otherwise capped at
// its length, and the rest of b.
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

// AppendRecord appends r (length prefix included) to dst.
func AppendRecord(dst []byte, r Record) []byte {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		nullableLen(r.Key) + nullableLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = AppendNullable(dst, r.Key)
	dst = AppendNullable(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = AppendNullable(dst, h.Value)
	}
	return dst
}

// AppendSplitRecord appends a record without headers whose value is head
// followed by tail (key nil: null key), so a producer that keeps a value
// in two parts need not join them.
func AppendSplitRecord(dst []byte, tsDelta int64, offsetDelta int32, key, head, tail []byte) []byte {
	vlen := len(head) + len(tail)
	n := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) + nullableLen(key) +
		varintLen(int64(vlen)) + vlen + 1
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = AppendNullable(dst, key)
	dst = binary.AppendVarint(dst, int64(vlen))
	dst = append(dst, head...)
	dst = append(dst, tail...)
	return append(dst, 0) // no headers
}

// AppendNullable appends a varint length (-1 for nil) and v.
func AppendNullable(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}

func nullableLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

// VarintLen is the encoded length of v as a zigzag varint.
func VarintLen(v int64) int { return varintLen(v) }

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
