package broker

import (
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
)

// compactedCoordLog opens an engine with a compacted topic of small
// segments whose tombstones go at once, as a stand-in for an internal
// topic.
func compactedCoordLog(t *testing.T, topic string) *engine.Partition {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.IOMode = "sync"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.CreateTopic(topic, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "700", "delete.retention.ms": "0"}); err != nil {
		t.Fatal(err)
	}
	part, err := e.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return part
}

func appendWait(t *testing.T, w engine.AppendWaiter, err error) {
	t.Helper()
	if err == nil {
		_, err = w.Result()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// compactAndCount cleans part (its active segment is left as it is) and
// returns how many records a load reads before and after.
func compactAndCount(t *testing.T, part *engine.Partition, markers bool) (int, int) {
	t.Helper()
	count := func() int {
		n := 0
		for _, err := range readRecords(part, false, markers) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	before := count()
	// Real time must pass: the cleaner compares the wall clock with the
	// newest batch's timestamp, and delete.retention.ms=0 is over only
	// once the millisecond clock has moved on.
	time.Sleep(5 * time.Millisecond)
	res, err := part.Compact()
	if err != nil || res.RecordsRemoved == 0 {
		t.Fatalf("cleaning %+v %v", res, err)
	}
	return before, count()
}

// TestGroupLoadAfterCompaction: a compacted __consumer_offsets partition
// (offset gaps, superseded commits and expired tombstones removed,
// transactional commits and markers kept) loads into the same groups as
// the full log.
func TestGroupLoadAfterCompaction(t *testing.T) {
	part := compactedCoordLog(t, "offsets")
	ts := time.Now().UnixMilli() - 60000
	commit := func(g string, p int32, offset int64) statelog.KV {
		return statelog.KV{
			Key:   group.EncodeOffsetKey(group.OffsetKey{Group: g, Topic: "in", Partition: p}),
			Value: group.EncodeOffsetValue(group.OffsetValue{Offset: offset, LeaderEpoch: -1, CommitTimestamp: ts}),
		}
	}
	deleteOffset := func(g string, p int32) statelog.KV {
		return statelog.KV{Key: group.EncodeOffsetKey(group.OffsetKey{Group: g, Topic: "in", Partition: p})}
	}
	meta := func(g string, gen int32) statelog.KV {
		return statelog.KV{Key: group.EncodeGroupKey(g), Value: group.EncodeGroupValue(group.GroupMetadata{ProtocolType: "consumer", Generation: gen, CurrentStateTimestamp: ts})}
	}
	plain := func(kvs ...statelog.KV) {
		w, err := part.Append(encodeBatch(kvs, ts))
		appendWait(t, w, err)
	}
	for i := range 60 {
		g := fmt.Sprint("g", i%3)
		plain(commit(g, 0, int64(i)), commit(g, 1, int64(2*i)))
		if i%10 == 0 {
			plain(meta(g, int32(i)))
		}
	}
	// A group that is deleted: tombstones for its offsets and metadata.
	plain(meta("gone", 1), commit("gone", 0, 5))
	plain(deleteOffset("gone", 0), statelog.KV{Key: group.EncodeGroupKey("gone")})
	// A transactional commit, then the offset deleted by a plain
	// tombstone: the tombstone must outlive the cleaning, or the
	// transactional record (never compacted) would bring it back.
	w, err := part.Append(encodeProducerBatch([]statelog.KV{commit("tx", 0, 99)}, ts, 42, 0, 0, true))
	appendWait(t, w, err)
	w, err = part.AppendMarker(producerstate.Marker{ProducerID: 42, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1})
	appendWait(t, w, err)
	plain(deleteOffset("tx", 0), commit("tx", 1, 7))
	for i := range 30 {
		plain(commit("g0", 2, int64(i))) // roll past the records above
	}

	load := func() *group.Snapshot {
		snap, err := group.Load(readRecords(part, false, true))
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	full := load()
	before, after := compactAndCount(t, part, true)
	compacted := load()
	t.Logf("records read by a load: %d before cleaning, %d after", before, after)
	if after*3 > before {
		t.Fatalf("cleaning left %d of %d records", after, before)
	}
	if len(full.Groups) != len(compacted.Groups) {
		t.Fatalf("%d groups after cleaning, %d before", len(compacted.Groups), len(full.Groups))
	}
	for id, g := range full.Groups {
		c := compacted.Groups[id]
		if c == nil || !reflect.DeepEqual(g.Metadata, c.Metadata) || !reflect.DeepEqual(g.Offsets, c.Offsets) || len(g.Pending) != len(c.Pending) {
			t.Fatalf("group %s: %+v after cleaning, %+v before", id, c, g)
		}
	}
	if full.Groups["gone"] != nil {
		t.Fatal("deleted group loaded")
	}
	if tx := compacted.Groups["tx"]; tx == nil || len(tx.Offsets) != 1 {
		t.Fatalf("group tx after cleaning: %+v, want only partition 1", tx)
	}
}

// TestTxnLoadAfterCompaction: a compacted __transaction_state partition
// loads into the same transactional ids as the full log.
func TestTxnLoadAfterCompaction(t *testing.T) {
	part := compactedCoordLog(t, "txnstate")
	ts := time.Now().UnixMilli() - 60000
	state := func(id string, epoch int16, st txn.State) statelog.KV {
		return statelog.KV{Key: txn.EncodeKey(id), Value: txn.EncodeValue(txn.Metadata{
			ProducerID: 1000, ProducerEpoch: epoch, TimeoutMs: 60000, State: st, LastUpdateMs: ts, StartMs: -1,
			PreviousProducerID: -1, NextProducerID: -1,
		})}
	}
	for i := range 100 {
		id := fmt.Sprint("t", i%4)
		st := []txn.State{txn.Ongoing, txn.PrepareCommit, txn.CompleteCommit}[i%3]
		w, err := part.Append(encodeBatch([]statelog.KV{state(id, int16(i/4), st)}, ts))
		appendWait(t, w, err)
	}
	// t3 expires: its tombstone goes with the cleaning.
	w, err := part.Append(encodeBatch([]statelog.KV{{Key: txn.EncodeKey("t3")}}, ts))
	appendWait(t, w, err)
	for i := range 20 {
		w, err := part.Append(encodeBatch([]statelog.KV{state("t0", int16(100+i), txn.Empty)}, ts))
		appendWait(t, w, err)
	}
	load := func() *txn.Snapshot {
		snap, err := txn.Load(readRecords(part, false, false))
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	full := load()
	before, after := compactAndCount(t, part, false)
	compacted := load()
	t.Logf("records read by a load: %d before cleaning, %d after", before, after)
	if !reflect.DeepEqual(full.Txns, compacted.Txns) || len(full.Txns) != 3 {
		t.Fatalf("after cleaning %+v\nbefore %+v", compacted.Txns, full.Txns)
	}
}
