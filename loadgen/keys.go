package loadgen

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringlog/ringlog/results"
)

// KeysAuto (the default of --keys) gives keysPerPartition keys per
// partition of the topic, resolved once the topic's partition count is
// known: keyed traffic over every partition, which is what an application
// appending keyed events does. Null keys (--keys 0) let the sticky
// partitioner send to one partition at a time, the friendliest workload a
// broker can get; it stays available, and reports label it.
const (
	KeysAuto         = -1
	keysPerPartition = 8
)

// kafkaKeyHash is how franz-go (and the Java client) picks the partition of
// a keyed record: murmur2 of the key. Only its Partition is used.
var kafkaKeyHash = kgo.StickyKeyPartitioner(nil).ForTopic("")

// keyTable returns n keys, key j being one that Kafka's key hash sends to
// partition j % partitions. The lean client places key j on partition
// j % partitions itself, kgo hashes it to the same partition, so both
// clients put the same load on every partition: cycling through the keys
// visits the partitions round robin, and random keys spread uniformly.
// Candidates "key-0", "key-1", ... are hashed in order and each fills the
// next free slot of the partition it hashes to; a partition whose slots
// are full skips it.
func keyTable(n int, partitions int32) [][]byte {
	if n <= 0 || partitions <= 0 {
		return nil
	}
	np := int(partitions)
	keys := make([][]byte, n)
	next := make([]int, np) // partition -> next key index it owns
	for p := range next {
		next[p] = p
	}
	left := n
	rec := &kgo.Record{}
	var buf []byte
	for c := 0; left > 0; c++ {
		buf = append(buf[:0], "key-"...)
		buf = strconv.AppendInt(buf, int64(c), 10)
		rec.Key = buf
		p := kafkaKeyHash.Partition(rec, np)
		if j := next[p]; j < n {
			keys[j] = append([]byte(nil), buf...)
			next[p] += np
			left--
		}
	}
	return keys
}

// resolveKeys turns KeysAuto into a key count for a topic of partitions.
func resolveKeys(keys int, partitions int32) int {
	if keys == KeysAuto {
		return keysPerPartition * int(partitions)
	}
	return keys
}

// ParseKeys reads --keys: "auto" (KeysAuto) or a count >= 0.
func ParseKeys(s string) (int, error) {
	if s == "auto" || s == "-1" {
		return KeysAuto, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("keys %q: want auto (%d per partition), a count, or 0 for null keys", s, keysPerPartition)
	}
	return n, nil
}

// spread is how the measured acknowledged messages fell on the partitions.
func (s *runState) spread() *results.PartitionSpread {
	ps := &results.PartitionSpread{Keys: s.cfg.Keys, TopicPartitions: int(s.cfg.Partitions), Mode: results.SpreadKeyed}
	if s.cfg.Keys == 0 {
		ps.Mode = results.SpreadSticky
	}
	var total, lo, hi int64
	lo = -1
	for i := range s.partAcked {
		n := s.partAcked[i].Load()
		total += n
		if n > 0 {
			ps.Written++
		}
		hi = max(hi, n)
		if lo < 0 || n < lo {
			lo = n
		}
	}
	if total > 0 {
		ps.MinShare, ps.MaxShare = float64(lo)/float64(total), float64(hi)/float64(total)
	}
	return ps
}
