package txn

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

func TestRecordGoldenBytes(t *testing.T) {
	if got, want := EncodeKey("tx"), []byte{0, 0, 0, 2, 't', 'x'}; !bytes.Equal(got, want) {
		t.Fatalf("key %x", got)
	}
	m := Metadata{ProducerID: 0x0102, ProducerEpoch: 3, TimeoutMs: 60000, State: Ongoing,
		Partitions:   []TopicPartition{{"b", 0}, {"a", 2}, {"a", 1}},
		LastUpdateMs: 0x10, StartMs: 0x20}
	want := []byte{
		0, 0, // version 0
		0, 0, 0, 0, 0, 0, 1, 2, // producer id
		0, 3, // epoch
		0, 0, 0xea, 0x60, // timeout 60000
		1,          // Ongoing
		0, 0, 0, 2, // two topics
		0, 1, 'a', 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, // a: [1 2]
		0, 1, 'b', 0, 0, 0, 1, 0, 0, 0, 0, // b: [0]
		0, 0, 0, 0, 0, 0, 0, 0x10, // last update
		0, 0, 0, 0, 0, 0, 0, 0x20, // start
	}
	got := EncodeValue(m)
	if !bytes.Equal(got, want) {
		t.Fatalf("value\n got %x\nwant %x", got, want)
	}
	back, err := DecodeValue(got)
	if err != nil {
		t.Fatal(err)
	}
	m.PreviousProducerID, m.NextProducerID = -1, -1
	sortPartitions(m.Partitions)
	if !equalMeta(back, m) {
		t.Fatalf("round trip %+v", back)
	}
	// Empty writes null partitions, as Kafka does.
	e := EncodeValue(Metadata{ProducerID: 1, State: Empty, StartMs: -1})
	if !bytes.Equal(e[17:21], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("empty partitions %x", e[17:21])
	}
	if id, err := DecodeKey(EncodeKey("tx")); err != nil || id != "tx" {
		t.Fatal(id, err)
	}
	if PartitionFor("some-txn", 50) != statelog.PartitionFor("some-txn", 50) {
		t.Fatal("placement differs from Kafka's")
	}
	if PrepareEpochFence.String() != "PrepareEpochFence" || State(9).String() != "State(9)" {
		t.Fatal("state names")
	}
}

func equalMeta(a, b Metadata) bool {
	return slices.Equal(a.Partitions, b.Partitions) &&
		a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch && a.TimeoutMs == b.TimeoutMs &&
		a.State == b.State && a.LastUpdateMs == b.LastUpdateMs && a.StartMs == b.StartMs &&
		a.PreviousProducerID == b.PreviousProducerID && a.NextProducerID == b.NextProducerID &&
		a.ClientTransactionVersion == b.ClientTransactionVersion
}

// A v1 (flexible) value as a newer Kafka writes it, with tagged fields.
func TestDecodeValueV1(t *testing.T) {
	be := binary.BigEndian
	b := be.AppendUint16(nil, 1)
	b = be.AppendUint64(b, 42)
	b = be.AppendUint16(b, 5)
	b = be.AppendUint32(b, 1000)
	b = append(b, byte(PrepareCommit))
	b = append(b, 2)      // compact array: 1 topic
	b = append(b, 2, 't') // compact string "t"
	b = append(b, 3)      // 2 partitions
	b = be.AppendUint32(b, 4)
	b = be.AppendUint32(b, 0)
	b = append(b, 1, 9, 1, 0xaa) // one unknown tag (9) of 1 byte
	b = be.AppendUint64(b, 7)
	b = be.AppendUint64(b, 6)
	b = append(b, 2)                             // two tagged fields
	b = append(b, 0, 8, 0, 0, 0, 0, 0, 0, 0, 41) // PreviousProducerId 41
	b = append(b, 2, 2, 0, 2)                    // ClientTransactionVersion 2
	m, err := DecodeValue(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Metadata{ProducerID: 42, ProducerEpoch: 5, TimeoutMs: 1000, State: PrepareCommit,
		Partitions: []TopicPartition{{"t", 0}, {"t", 4}}, LastUpdateMs: 7, StartMs: 6,
		PreviousProducerID: 41, NextProducerID: -1, ClientTransactionVersion: 2}
	if !equalMeta(m, want) {
		t.Fatalf("got %+v", m)
	}
}

func TestDecodeErrorsAndLoad(t *testing.T) {
	good := EncodeValue(Metadata{ProducerID: 1, ProducerEpoch: 0, TimeoutMs: 10, State: CompleteAbort, StartMs: 3})
	for n := range len(good) {
		if _, err := DecodeValue(good[:n]); !is(err, ErrCorruptRecord) && !(n < 2 && err != nil) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	huge := slices.Clone(good)
	binary.BigEndian.PutUint32(huge[17:], 1<<30) // absurd topic count
	if _, err := DecodeValue(huge); !is(err, ErrCorruptRecord) {
		t.Fatalf("huge count: %v", err)
	}
	if _, err := DecodeValue([]byte{0, 9}); !is(err, ErrUnknownRecord) {
		t.Fatalf("version 9: %v", err)
	}
	if _, err := DecodeKey([]byte{0, 1, 0, 0}); !is(err, ErrUnknownRecord) {
		t.Fatalf("key version 1: %v", err)
	}
	kvs := []statelog.KV{
		{Key: EncodeKey("a"), Value: good},
		{Key: EncodeKey("b"), Value: good},
		{Key: []byte{0, 5, 0, 0}, Value: []byte{1}}, // some future record
		{Key: EncodeKey("a"), Value: nil},           // a expired
		{Key: EncodeKey("b"), Value: EncodeValue(Metadata{ProducerID: 2, State: Empty, StartMs: -1})},
	}
	s, err := Load(Records(kvs))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Txns) != 1 || s.Txns["b"].ProducerID != 2 || s.Skipped != 1 {
		t.Fatalf("load %+v", s)
	}
	kvs = append(kvs, statelog.KV{Key: EncodeKey("c"), Value: good[:5]})
	if _, err := Load(Records(kvs)); !is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt record: %v", err)
	}
}
