package loadgen

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/ringlog/ringlog/internal/codec"
)

// Codec is a Kafka record-batch compression codec (attribute bits 0-2);
// compression is internal/codec's, shared with the broker's cleaner.
type Codec = codec.Codec

const (
	CodecNone   = codec.None
	CodecGzip   = codec.Gzip
	CodecSnappy = codec.Snappy
	CodecLZ4    = codec.LZ4
	CodecZstd   = codec.Zstd
)

// ParseCodec maps a --compression value to a Codec.
func ParseCodec(s string) (Codec, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return CodecNone, nil
	case "gzip":
		return CodecGzip, nil
	case "snappy":
		return CodecSnappy, nil
	case "lz4":
		return CodecLZ4, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("unknown compression %q (none|gzip|snappy|lz4|zstd)", s)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Offsets inside a v2 record batch.
const (
	batchLengthAt  = 8
	batchCRCAt     = 17
	batchAttrsAt   = 21
	batchHeaderLen = 61
)

// produceFrame builds one Produce request (v3-v8, one topic, one partition,
// one v2 record batch) directly into a reusable byte slice, so the steady
// state allocates nothing per message. Layout:
//
//	size int32 | key int16 | version int16 | correlation int32 | client id
//	transactional id (null) | acks int16 | timeout int32 | 1 topic | name
//	1 partition | partition int32 | records length int32 | record batch
type produceFrame struct {
	buf      []byte
	batchAt  int // offset of the record batch in buf
	corrAt   int
	recsAt   int // offset of the records (uncompressed) or of scratch
	count    int32
	firstTs  int64
	maxTs    int64
	scratch  []byte // uncompressed records when a codec is in use
	codec    Codec
	intended []int64 // intended send time (run clock ns) of each message
	// partition is the frame's target; a retry re-routes it there.
	partition int32
	// retries counts the frame's re-sends; lastErr is why the latest
	// attempt failed, failedAt (run clock ns) when.
	retries  int
	failedAt int64
	lastErr  error
}

const clientID = "ringlog-loadgen"

// reset starts a new request for topic/partition.
func (f *produceFrame) reset(version int16, acks int16, timeoutMs int32, topic string, partition int32, codec Codec) {
	b := f.buf[:0]
	b = append(b, 0, 0, 0, 0) // size, patched in finish
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	f.corrAt = len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null transactional id
	b = binary.BigEndian.AppendUint16(b, uint16(acks))
	b = binary.BigEndian.AppendUint32(b, uint32(timeoutMs))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	b = append(b, 0, 0, 0, 0) // records length, patched in finish
	f.batchAt = len(b)
	b = append(b, make([]byte, batchHeaderLen)...)
	f.recsAt = len(b)
	f.buf = b
	f.scratch = f.scratch[:0]
	f.count = 0
	f.codec = codec
	f.intended = f.intended[:0]
	f.partition = partition
	f.retries, f.failedAt, f.lastErr = 0, 0, nil
}

// size is the request's current length in bytes (uncompressed records).
func (f *produceFrame) size() int { return len(f.buf) + len(f.scratch) }

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// appendRecord adds one record (key may be nil for a null key).
// The value is head followed by tail, so callers need not assemble it.
func (f *produceFrame) appendRecord(tsMs int64, key, head, tail []byte, intended int64) {
	if f.count == 0 {
		f.firstTs = tsMs
	}
	if tsMs > f.maxTs || f.count == 0 {
		f.maxTs = tsMs
	}
	tsDelta := tsMs - f.firstTs
	offDelta := int64(f.count)
	keyLen := int64(-1)
	if key != nil {
		keyLen = int64(len(key))
	}
	bodyLen := 1 + varintLen(tsDelta) + varintLen(offDelta) + varintLen(keyLen) + len(key) +
		varintLen(int64(len(head)+len(tail))) + len(head) + len(tail) + 1
	b := f.buf
	if f.codec != CodecNone {
		b = f.scratch
	}
	b = binary.AppendVarint(b, int64(bodyLen))
	b = append(b, 0) // attributes
	b = binary.AppendVarint(b, tsDelta)
	b = binary.AppendVarint(b, offDelta)
	b = binary.AppendVarint(b, keyLen)
	b = append(b, key...)
	b = binary.AppendVarint(b, int64(len(head)+len(tail)))
	b = append(b, head...)
	b = append(b, tail...)
	b = append(b, 0) // no headers
	if f.codec != CodecNone {
		f.scratch = b
	} else {
		f.buf = b
	}
	f.count++
	f.intended = append(f.intended, intended)
}

// finish compresses if needed, fills the batch header, CRC and lengths, and
// stamps the correlation id. The frame is then ready to write.
func (f *produceFrame) finish(corr int32) error {
	if f.codec != CodecNone {
		out, err := codec.Compress(f.codec, f.buf, f.scratch)
		if err != nil {
			return err
		}
		f.buf = out
	}
	b := f.buf
	h := b[f.batchAt:]
	binary.BigEndian.PutUint64(h[0:], 0)                             // base offset
	binary.BigEndian.PutUint32(h[batchLengthAt:], uint32(len(h)-12)) // bytes after the length field
	binary.BigEndian.PutUint32(h[12:], 0xffffffff)                   // partition leader epoch
	h[16] = 2                                                        // magic
	binary.BigEndian.PutUint16(h[batchAttrsAt:], uint16(f.codec))
	binary.BigEndian.PutUint32(h[23:], uint32(f.count-1)) // last offset delta
	binary.BigEndian.PutUint64(h[27:], uint64(f.firstTs))
	binary.BigEndian.PutUint64(h[35:], uint64(f.maxTs))
	binary.BigEndian.PutUint64(h[43:], 0xffffffffffffffff) // producer id -1
	binary.BigEndian.PutUint16(h[51:], 0xffff)             // producer epoch -1
	binary.BigEndian.PutUint32(h[53:], 0xffffffff)         // base sequence -1
	binary.BigEndian.PutUint32(h[57:], uint32(f.count))
	binary.BigEndian.PutUint32(h[batchCRCAt:], crc32.Checksum(h[batchAttrsAt:], castagnoli))
	binary.BigEndian.PutUint32(b[f.batchAt-4:], uint32(len(h)))
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[f.corrAt:], uint32(corr))
	return nil
}
