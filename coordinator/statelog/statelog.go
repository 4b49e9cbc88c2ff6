// Package statelog holds what the group and transaction coordinators share
// about the internal topics they keep their state in (__consumer_offsets,
// __transaction_state): the record a coordinator appends or loads, the
// Waiter that reports an append durable, and Kafka's placement of a key on
// a partition. The broker implements one persister for both on these
// types.
package statelog

import (
	"math"
	"unicode/utf16"
)

// KV is one record of a coordinator's internal topic. A nil Value is a
// tombstone.
//
// The other fields are the context of the record batch the record came in,
// which the loader copies from the batch header so a coordinator can tell
// transactional offset commits and transaction markers from plain records.
// The zero value is a plain, non-transactional record, so code that only
// sets Key and Value keeps meaning what it meant. Persisters ignore them:
// Append writes plain batches, AppendTxn takes the producer as arguments.
type KV struct {
	Key   []byte
	Value []byte
	// Transactional is set for records of a transactional batch
	// (attributes bit 4). Their offset commits stay pending until a
	// marker of the same producer follows on the partition.
	Transactional bool
	// ProducerID and ProducerEpoch come from the batch header; they mean
	// something only when Transactional is set or Control is non-nil
	// (plain batches carry -1, which the loader may copy or leave 0).
	ProducerID    int64
	ProducerEpoch int16
	// Control is non-nil for the record of a control batch (attributes
	// bit 5) that is a transaction marker: the loader decodes the control
	// record key (version:int16, type:int16; type 0 is ABORT, 1 is COMMIT)
	// into it and leaves Key/Value raw. Other control types are not
	// markers and should be skipped by the loader.
	Control *Marker
}

// Marker is a transaction marker (a control record) on an internal topic:
// the end of the producer's transaction on this partition.
type Marker struct {
	Commit bool // false: abort
}

// Waiter completes one append.
type Waiter interface {
	// Wait blocks until the append is durable (nil) or failed. A failure
	// that means "this node no longer leads the partition" should wrap
	// the coordinator's ErrNotCoordinator so the client is told to
	// rediscover.
	Wait() error
}

// WaiterFunc adapts a function to Waiter.
type WaiterFunc func() error

// Wait calls f.
func (f WaiterFunc) Wait() error { return f() }

// Done is a Waiter that has already succeeded.
var Done Waiter = WaiterFunc(func() error { return nil })

// PartitionFor returns the partition of an internal topic with partitions
// partitions that owns key (a group id, a transactional id): Kafka's
// Utils.abs(key.hashCode()) % partitions, where hashCode is Java's
// String.hashCode over UTF-16 code units with int32 overflow, and
// Utils.abs maps MinInt32 to 0. Matching it exactly keeps our placement
// equal to what Kafka tooling computes.
func PartitionFor(key string, partitions int) int32 {
	if partitions <= 0 {
		panic("statelog: PartitionFor with no partitions")
	}
	h := JavaStringHashCode(key)
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(partitions)
}

// JavaStringHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] over UTF-16 code units, wrapping at 32 bits. Invalid UTF-8 is read
// as U+FFFD, which is what Java's decoder produces for the same bytes.
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}
