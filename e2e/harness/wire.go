package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RawProduce sends one single-record Produce request to b and returns the
// partition's error code (0: acknowledged), or an error when no answer
// came within the timeout plus a margin. franz-go rewrites a raw
// Produce's acks to its client's RequiredAcks, so b's client must be
// configured with acks (the default is all).
func RawProduce(b *kgo.Broker, topic string, partition int32, acks int16, timeout time.Duration, value string) (int16, error) {
	return RawProduceN(b, topic, partition, acks, timeout, 1, value)
}

// RawProduceN is rawProduce with a batch of n records of the same value.
func RawProduceN(b *kgo.Broker, topic string, partition int32, acks int16, timeout time.Duration, n int, value string) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, int32(timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, EncodeBatch(n, []byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("malformed produce response %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// APIVersionsV0 is a framed ApiVersions v0 request with correlation id corr.
func APIVersionsV0(corr int32) []byte {
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	binary.BigEndian.PutUint32(frame[8:], uint32(corr))
	return frame
}

// ReadCorrelation reads one framed response and returns its correlation id.
func ReadCorrelation(c net.Conn) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return 0, fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(body)), nil
}

// EncodeBatch builds a valid magic-2 record batch with n records.
func EncodeBatch(n int, value []byte) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = value
		// AppendTo starts with the Length field (0 here, one varint byte);
		// drop it and prefix the real length.
		body := r.AppendTo(nil)[1:]
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: int32(n - 1),
		FirstTimestamp:  time.Now().UnixMilli(),
		MaxTimestamp:    time.Now().UnixMilli(),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(n),
		Records:         recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
