package loadgen

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/ringlog/ringlog/internal/codec"
	"github.com/ringlog/ringlog/internal/records"
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

// produceFrame builds one Produce request (v3-v8, one topic, one partition,
// one v2 record batch) directly into a reusable byte slice, so the steady
// state allocates nothing per message; a connection sends the frames
// queued together as one request for many partitions (request.go). Layout:
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
	// failedOn is the broker address the latest attempt failed on: a
	// leader lookup that routes the partition to another broker ends its
	// backoff.
	failedOn string
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
	b = append(b, make([]byte, records.HeaderSize)...) // filled by finish
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

// appendRecord adds one record (key may be nil for a null key).
// The value is head followed by tail, so callers need not assemble it.
func (f *produceFrame) appendRecord(tsMs int64, key, head, tail []byte, intended int64) {
	if f.count == 0 {
		f.firstTs = tsMs
	}
	if tsMs > f.maxTs || f.count == 0 {
		f.maxTs = tsMs
	}
	b := f.buf
	if f.codec != CodecNone {
		b = f.scratch
	}
	b = records.AppendSplitRecord(b, tsMs-f.firstTs, f.count, key, head, tail)
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
	h := records.Plain(int16(f.codec), f.firstTs, f.maxTs)
	h.PartitionLeaderEpoch = -1
	h.LastOffsetDelta = f.count - 1
	h.RecordCount = f.count
	records.Seal(b[f.batchAt:], h)
	binary.BigEndian.PutUint32(b[f.batchAt-4:], uint32(len(b)-f.batchAt))
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[f.corrAt:], uint32(corr))
	return nil
}
