package broker

import (
	"testing"

	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/internal/records"
)

// markerBatch is a control batch holding one transaction marker, as the
// engine's AppendMarker writes it.
func markerBatch(pid int64, epoch int16, commit bool) []byte {
	typ := records.ControlAbort
	if commit {
		typ = records.ControlCommit
	}
	return records.EncodeMarker(records.Marker{ProducerID: pid, ProducerEpoch: epoch, Type: typ, CoordinatorEpoch: 7, Timestamp: 1})
}

// withOffsets gives each batch consecutive offsets from 0, as a log would.
func withOffsets(batches ...[]byte) []byte {
	var out []byte
	off := int64(0)
	for _, b := range batches {
		bt, err := records.Parse(b)
		if err != nil {
			panic(err)
		}
		bt.SetBaseOffset(off)
		off = bt.LastOffset() + 1
		out = append(out, b...)
	}
	return out
}

// TestDecodeBatchesTransactional reads back what the broker writes to
// __consumer_offsets for transactions: a transactional offset commit and
// the markers, and checks the loader's view with and without markers.
func TestDecodeBatchesTransactional(t *testing.T) {
	commit := func(g string, offset int64) statelog.KV {
		return statelog.KV{
			Key:   group.EncodeOffsetKey(group.OffsetKey{Group: g, Topic: "in", Partition: 0}),
			Value: group.EncodeOffsetValue(group.OffsetValue{Offset: offset, LeaderEpoch: -1}),
		}
	}
	log := withOffsets(
		encodeBatch([]statelog.KV{commit("g", 5)}, 1),
		encodeProducerBatch([]statelog.KV{commit("g", 10)}, 2, 42, 3, 0, true),
		markerBatch(42, 3, true),
		encodeProducerBatch([]statelog.KV{commit("g", 20)}, 3, 42, 3, 1, true),
		markerBatch(42, 3, false),
		encodeProducerBatch([]statelog.KV{commit("h", 7)}, 4, 43, 0, 0, true),
	)
	var kvs []statelog.KV
	next, err := decodeBatches("t", log, 0, true, func(kv statelog.KV, err error) bool {
		kvs = append(kvs, kv)
		return true
	})
	if err != nil || next != 6 || len(kvs) != 6 {
		t.Fatalf("decoded %d records up to %d: %v", len(kvs), next, err)
	}
	if kvs[0].Transactional || !kvs[1].Transactional || kvs[1].ProducerID != 42 || kvs[1].ProducerEpoch != 3 {
		t.Fatalf("batch context: %+v %+v", kvs[0], kvs[1])
	}
	if kvs[2].Control == nil || !kvs[2].Control.Commit || kvs[4].Control == nil || kvs[4].Control.Commit || kvs[2].ProducerID != 42 {
		t.Fatalf("markers: %+v %+v", kvs[2], kvs[4])
	}
	snap, err := group.Load(group.Records(kvs))
	if err != nil {
		t.Fatal(err)
	}
	g := snap.Groups["g"]
	if o := g.Offsets[group.TopicPartition{Topic: "in", Partition: 0}]; o.Offset != 10 {
		t.Fatalf("group g: committed %d, want 10 (the committed transaction's; the aborted one dropped)", o.Offset)
	}
	h := snap.Groups["h"]
	if h == nil || len(h.Offsets) != 0 || h.Pending[43] == nil {
		t.Fatalf("group h: %+v, want its offset pending for producer 43", h)
	}

	// Without markers (the transaction log) control batches are skipped
	// and nothing carries a producer.
	kvs = nil
	if _, err := decodeBatches("t", log, 3, false, func(kv statelog.KV, err error) bool {
		kvs = append(kvs, kv)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 2 || kvs[0].Control != nil || kvs[0].Transactional {
		t.Fatalf("from offset 3 without markers: %+v", kvs)
	}
}
