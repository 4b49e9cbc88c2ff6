package core

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceRaw(t *testing.T, cl *kgo.Client, topic string, records []byte) int16 {
	t.Helper()
	code, _ := produceRawOffset(t, cl, topic, records)
	return code
}

func TestMalformedBatchesRefused(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir())
	cl := b.Client(t)
	good := harness.EncodeBatch(3, []byte("hello"))
	if code := produceRaw(t, cl, "raw", append([]byte(nil), good...)); code != 0 {
		t.Fatalf("good batch: %v", kerr.ErrorForCode(code))
	}
	flip := func(i int) []byte {
		c := append([]byte(nil), good...)
		c[i] ^= 0xff
		return c
	}
	cases := map[string]struct {
		records []byte
		want    *kerr.Error
	}{
		"bad crc":             {flip(len(good) - 1), kerr.CorruptMessage},
		"truncated":           {good[:len(good)-4], kerr.CorruptMessage},
		"length too long":     {func() []byte { c := append([]byte(nil), good...); binary.BigEndian.PutUint32(c[8:], 1<<20); return c }(), kerr.CorruptMessage},
		"garbage":             {[]byte("this is not a record batch at all, not even close......................"), kerr.CorruptMessage},
		"good then corrupted": {append(append([]byte(nil), good...), flip(30)...), kerr.CorruptMessage},
	}
	for name, c := range cases {
		code := produceRaw(t, cl, "raw", c.records)
		if code != c.want.Code {
			t.Errorf("%s: got %v, want %v", name, kerr.ErrorForCode(code), c.want)
		}
	}
	// Nothing of the refused requests was written: exactly the 3 good records.
	recs := harness.ConsumeAll(harness.Context(t, 20*time.Second), t, b.Addr, "raw", 3)
	if len(recs) != 3 {
		t.Fatalf("read %d records, want 3", len(recs))
	}
	drained := drain(t, b.Addr, "raw", recs)
	if len(drained) != 0 {
		t.Fatalf("refused batches left %d records in the log", len(drained))
	}

	// A batch over max.message.bytes is MESSAGE_TOO_LARGE.
	adm := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "small", 1, 1
	v := "1000"
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "max.message.bytes", Value: &v}}
	adm.Topics = append(adm.Topics, ct)
	if _, err := adm.RequestWith(harness.Context(t, 5*time.Second), cl); err != nil {
		t.Fatal(err)
	}
	big := harness.EncodeBatch(1, make([]byte, 4000))
	if code := produceRaw(t, cl, "small", big); code != kerr.MessageTooLarge.Code {
		t.Fatalf("oversized batch: %v, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(code))
	}
	if code := produceRaw(t, cl, "bad..name/", good); code != kerr.InvalidTopicException.Code {
		t.Fatalf("bad topic name: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(code))
	}
}

// rawRoundTrip sends one framed request and reads one framed response.
func rawRoundTrip(t *testing.T, addr string, frame []byte) ([]byte, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, body)
	return body, err
}

func TestApiVersionsAndBadFrames(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir())

	// KIP-511: an ApiVersions version we don't know gets a v0 response
	// with UNSUPPORTED_VERSION and our ranges.
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 99, 0, 0, 0, 7, 0, 0}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	body, err := rawRoundTrip(t, b.Addr, frame)
	if err != nil {
		t.Fatal(err)
	}
	if corr := binary.BigEndian.Uint32(body); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	var produce kmsg.ApiVersionsResponseApiKey
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 {
			produce = k
		}
	}
	if produce.MinVersion != 0 || produce.MaxVersion < 7 {
		t.Fatalf("produce range %d-%d: librdkafka needs min 0 and zstd needs v7", produce.MinVersion, produce.MaxVersion)
	}

	// ApiVersions v3 (flexible request header): the response header must
	// still be v0 (no tagged-field byte before the body).
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t"))
	body, err = rawRoundTrip(t, b.Addr, f.AppendRequest(nil, req, 9))
	if err != nil {
		t.Fatal(err)
	}
	v3 := kmsg.NewPtrApiVersionsResponse()
	v3.Version = 3
	if err := v3.ReadFrom(body[4:]); err != nil || v3.ErrorCode != 0 {
		t.Fatalf("v3 response: %v code %d", err, v3.ErrorCode)
	}

	// Produce v0-v2 carry message sets, which are never stored: every
	// partition gets UNSUPPORTED_VERSION and nothing is appended (v0 is
	// advertised only for librdkafka's sake, see 00_produce.go).
	for v := int16(0); v <= 2; v++ {
		preq := kmsg.NewPtrProduceRequest()
		preq.Version = v
		preq.Acks = -1 // acks=0 would get no response to check
		preq.TimeoutMillis = 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "old-produce"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = harness.EncodeBatch(1, []byte("x"))
		pt.Partitions = append(pt.Partitions, pp)
		preq.Topics = append(preq.Topics, pt)
		body, err := rawRoundTrip(t, b.Addr, f.AppendRequest(nil, preq, 11))
		if err != nil {
			t.Fatalf("produce v%d: %v", v, err)
		}
		presp := kmsg.NewPtrProduceResponse()
		presp.Version = v
		if err := presp.ReadFrom(body[4:]); err != nil {
			t.Fatalf("produce v%d response: %v", v, err)
		}
		if len(presp.Topics) != 1 || len(presp.Topics[0].Partitions) != 1 {
			t.Fatalf("produce v%d: response shape %+v", v, presp.Topics)
		}
		if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedVersion.Code {
			t.Fatalf("produce v%d: %v, want UNSUPPORTED_VERSION", v, kerr.ErrorForCode(code))
		}
	}
	if o, err := kadm.NewClient(b.Client(t)).ListEndOffsets(harness.Context(t, 10*time.Second), "old-produce"); err == nil {
		if end, ok := o.Lookup("old-produce", 0); ok && end.Err == nil && end.Offset > 0 {
			t.Fatalf("refused old produces appended %d records", end.Offset)
		}
	}

	// Frames that break the protocol close the connection: a 2 GiB
	// length prefix, an unknown API key, a truncated header.
	for name, frame := range map[string][]byte{
		"huge length": {0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 0},
		"unknown key": {0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"tiny frame":  {0, 0, 0, 2, 0, 18},
	} {
		if _, err := rawRoundTrip(t, b.Addr, frame); err == nil {
			t.Errorf("%s: got a response, want the connection closed", name)
		}
	}
	// The broker is still healthy.
	if _, err := b.Health(); err != nil {
		t.Fatal(err)
	}
}
