package txn

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Record schemas of __transaction_state, as Kafka writes them, so Kafka's
// own tools can read our partitions. Big-endian; a string is an int16
// length then UTF-8.
//
//	TransactionLogKey v0:   version=0 transactionalId
//	TransactionLogValue v0: version=0 producerId:int64 producerEpoch:int16
//	                        timeoutMs:int32 state:int8
//	                        partitions:nullable [topic [partition:int32]]
//	                        lastUpdateMs:int64 startMs:int64
//
// Value v1 (KIP-915, flexible) has the same fields with compact strings
// and arrays, a tagged-field section after each partition entry and at
// the end (tags 0 PreviousProducerId, 1 NextProducerId, 2
// ClientTransactionVersion). We read v1 and write v0, which is what Kafka
// writes for transaction version 0/1 clients. A nil value is a tombstone:
// the id expired.
const (
	keyVersion   int16 = 0
	valueVersion int16 = 0
)

// TransactionTopic is the internal compacted topic of the coordinator.
const TransactionTopic = "__transaction_state"

// ErrUnknownRecord marks a key version we do not model; Load skips it.
var ErrUnknownRecord = errors.New("txn: unknown __transaction_state record version")

// ErrCorruptRecord marks a record claiming a known version that does not
// parse; Load refuses the partition. Not a Kafka code.
var ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")

// PartitionFor returns the __transaction_state partition of a
// transactional id: the same placement as groups on __consumer_offsets.
func PartitionFor(transactionalID string, partitions int) int32 {
	return statelog.PartitionFor(transactionalID, partitions)
}

// State is a transaction's state; values are Kafka's stored bytes.
type State int8

// Transaction states.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String returns Kafka's name (what DescribeTransactions reports).
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Metadata is one transactional id's stored state (TransactionLogValue).
type Metadata struct {
	ProducerID    int64
	ProducerEpoch int16 // -1 before the first InitProducerId completes
	TimeoutMs     int32
	State         State
	// Partitions is sorted by topic then partition.
	Partitions   []TopicPartition
	LastUpdateMs int64
	// StartMs is when the open transaction began, -1 when none.
	StartMs int64
	// Tagged fields of v1 records, kept when read; -1/0 otherwise.
	PreviousProducerID       int64
	NextProducerID           int64
	ClientTransactionVersion int16
}

func (m Metadata) clone() Metadata {
	m.Partitions = slices.Clone(m.Partitions)
	return m
}

// EncodeKey writes a TransactionLogKey v0.
func EncodeKey(transactionalID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(keyVersion))
	return appendString(b, transactionalID)
}

// EncodeValue writes a TransactionLogValue v0. Partitions are written
// grouped by topic in sorted order; an Empty transaction has none and
// writes null, as Kafka does.
func EncodeValue(m Metadata) []byte {
	be := binary.BigEndian
	b := be.AppendUint16(nil, uint16(valueVersion))
	b = be.AppendUint64(b, uint64(m.ProducerID))
	b = be.AppendUint16(b, uint16(m.ProducerEpoch))
	b = be.AppendUint32(b, uint32(m.TimeoutMs))
	b = append(b, byte(m.State))
	if m.State == Empty {
		b = be.AppendUint32(b, 0xffffffff)
	} else {
		groups := groupByTopic(m.Partitions)
		b = be.AppendUint32(b, uint32(len(groups)))
		for _, g := range groups {
			b = appendString(b, g.topic)
			b = be.AppendUint32(b, uint32(len(g.parts)))
			for _, p := range g.parts {
				b = be.AppendUint32(b, uint32(p))
			}
		}
	}
	b = be.AppendUint64(b, uint64(m.LastUpdateMs))
	return be.AppendUint64(b, uint64(m.StartMs))
}

type topicParts struct {
	topic string
	parts []int32
}

func groupByTopic(tps []TopicPartition) []topicParts {
	s := slices.Clone(tps)
	sortPartitions(s)
	var out []topicParts
	for _, tp := range s {
		if n := len(out); n == 0 || out[n-1].topic != tp.Topic {
			out = append(out, topicParts{topic: tp.Topic})
		}
		out[len(out)-1].parts = append(out[len(out)-1].parts, tp.Partition)
	}
	return out
}

func sortPartitions(s []TopicPartition) {
	slices.SortFunc(s, func(a, b TopicPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}

// DecodeKey parses a TransactionLogKey.
func DecodeKey(key []byte) (string, error) {
	r := reader{b: key}
	v := r.int16()
	if r.err != nil {
		return "", fmt.Errorf("%w: key too short", ErrCorruptRecord)
	}
	if v != keyVersion {
		return "", fmt.Errorf("%w: key version %d", ErrUnknownRecord, v)
	}
	id := r.string()
	if err := r.done(); err != nil {
		return "", fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	return id, nil
}

// DecodeValue parses a TransactionLogValue v0 or v1.
func DecodeValue(value []byte) (Metadata, error) {
	r := reader{b: value}
	v := r.int16()
	if r.err == nil && (v < 0 || v > 1) {
		return Metadata{}, fmt.Errorf("%w: value version %d", ErrUnknownRecord, v)
	}
	flex := v >= 1
	m := Metadata{PreviousProducerID: -1, NextProducerID: -1}
	m.ProducerID = r.int64()
	m.ProducerEpoch = r.int16()
	m.TimeoutMs = r.int32()
	m.State = State(r.int8())
	n := r.arrayLen(flex, 6)
	for range n {
		topic := r.str(flex)
		np := r.arrayLen(flex, 4)
		for range np {
			m.Partitions = append(m.Partitions, TopicPartition{topic, r.int32()})
		}
		if flex {
			r.skipTags(nil)
		}
		if r.err != nil {
			break
		}
	}
	m.LastUpdateMs = r.int64()
	m.StartMs = r.int64()
	if flex {
		r.skipTags(func(tag uint64, p []byte) {
			be := binary.BigEndian
			switch {
			case tag == 0 && len(p) == 8:
				m.PreviousProducerID = int64(be.Uint64(p))
			case tag == 1 && len(p) == 8:
				m.NextProducerID = int64(be.Uint64(p))
			case tag == 2 && len(p) == 2:
				m.ClientTransactionVersion = int16(be.Uint16(p))
			}
		})
	}
	if err := r.done(); err != nil {
		return Metadata{}, fmt.Errorf("%w: value: %v", ErrCorruptRecord, err)
	}
	if m.State < Empty || m.State > PrepareEpochFence {
		return Metadata{}, fmt.Errorf("%w: state %d", ErrCorruptRecord, m.State)
	}
	sortPartitions(m.Partitions)
	return m, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// reader is a sticky-error big-endian reader: after the first short read
// every call returns zero values, so decoders check r.err once.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(fmt.Errorf("need %d bytes, have %d", n, len(r.b)))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int8() int8 {
	if p := r.take(1); p != nil {
		return int8(p[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) int32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *reader) int64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str(flex bool) string {
	var n int
	if flex {
		n = int(r.uvarint()) - 1 // compact: length+1, 0 is null
	} else {
		n = int(r.int16())
	}
	if r.err == nil && n < 0 {
		r.fail(errors.New("null or negative string length"))
	}
	return string(r.take(n))
}

func (r *reader) string() string { return r.str(false) }

// arrayLen reads a (nullable) array length; null is 0. Elements take at
// least minSize bytes, so a count the remaining bytes cannot hold fails
// before anything is allocated.
func (r *reader) arrayLen(flex bool, minSize int) int {
	var n int64
	if flex {
		n = int64(r.uvarint()) - 1
	} else {
		n = int64(r.int32())
	}
	if r.err != nil || n == -1 {
		return 0
	}
	if n < 0 || n*int64(minSize) > int64(len(r.b)) {
		r.fail(fmt.Errorf("array of %d with %d bytes left", n, len(r.b)))
		return 0
	}
	return int(n)
}

func (r *reader) skipTags(fn func(tag uint64, p []byte)) {
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail(fmt.Errorf("tagged field of %d bytes with %d left", size, len(r.b)))
			return
		}
		p := r.take(int(size))
		if fn != nil && r.err == nil {
			fn(tag, p)
		}
	}
}

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return nil
}
