package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/layout"
)

// idem encodes an idempotent (or, with txn, transactional) batch of n
// records for producer pid starting at sequence seq.
func idem(pid int64, epoch int16, seq int32, txn bool, n int) []byte {
	recs := make([]batchtest.Record, n)
	for i := range recs {
		recs[i] = batchtest.Record{Value: fmt.Appendf(nil, "p%d-s%d", pid, int(seq)+i)}
	}
	var attrs int16
	if txn {
		attrs = 0x10
	}
	return batchtest.Encode(batchtest.Options{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Attributes: attrs}, recs...)
}

func TestIdempotentAppendDeduplicates(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	first := appendWait(t, p, idem(7, 0, 0, false, 3))
	appendWait(t, p, idem(7, 0, 3, false, 2))
	// A retry of the first batch: original offsets, nothing appended.
	dup := appendWait(t, p, idem(7, 0, 0, false, 3))
	if dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset {
		t.Fatalf("duplicate answered %d-%d, original %d-%d", dup.BaseOffset, dup.LastOffset, first.BaseOffset, first.LastOffset)
	}
	if end := p.LogEndOffset(); end != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", end)
	}
	if got := e.Stats().DuplicateBatches; got != 1 {
		t.Fatalf("DuplicateBatches %d, want 1", got)
	}
	// A gap is refused, an older epoch too; a new epoch starts at 0.
	if _, err := p.Append(idem(7, 0, 9, false, 1)); !errors.Is(err, producerstate.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	appendWait(t, p, idem(7, 1, 0, false, 1))
	if _, err := p.Append(idem(7, 0, 5, false, 1)); !errors.Is(err, producerstate.ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// Non-idempotent batches are untouched by any of this.
	appendWait(t, p, batchtest.Values("plain"))
	appendWait(t, p, batchtest.Values("plain"))
	if recs := readAll(t, p, 0); len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	// A forged control batch from a client is refused.
	if _, err := p.Append(encodeMarkerBatch(producerstate.Marker{ProducerID: 7, ProducerEpoch: 1, Commit: true}, 0)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("client control batch: %v", err)
	}
}

func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.Defaults.SegmentBytes = 400 // several rolls, so snapshots exist
			e := mustOpen(t, cfg)
			if _, err := e.CreateTopic("t", 1, nil); err != nil {
				t.Fatal(err)
			}
			p := mustPartition(t, e, "t", 0)
			var last AppendResult
			for seq := int32(0); seq < 40; seq += 2 {
				last = appendWait(t, p, idem(3, 0, seq, false, 2))
			}
			if clean {
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				crashClose(e) // no final snapshot, no clean marker
			}
			snaps, _ := filepath.Glob(filepath.Join(dir, "t-0", "*"+layout.SnapshotSuffix))
			if len(snaps) == 0 {
				t.Fatal("no producer state snapshot written")
			}
			e2 := mustOpen(t, cfg)
			defer e2.Close()
			p2 := mustPartition(t, e2, "t", 0)
			// The last batch's retry is still a duplicate after reopening:
			// the state came back from a snapshot plus replay.
			dup := appendWait(t, p2, idem(3, 0, 38, false, 2))
			if dup.BaseOffset != last.BaseOffset || p2.LogEndOffset() != 40 {
				t.Fatalf("retry after restart: offset %d (want %d), log end %d", dup.BaseOffset, last.BaseOffset, p2.LogEndOffset())
			}
			if _, err := p2.Append(idem(3, 0, 41, false, 1)); !errors.Is(err, producerstate.ErrOutOfOrderSequence) {
				t.Fatalf("gap after restart: %v", err)
			}
			appendWait(t, p2, idem(3, 0, 40, false, 1))
		})
	}
}

// crashClose stops an engine without its clean-shutdown work, the way a
// kill -9 leaves the files (flushed data stays).
func crashClose(e *Engine) {
	e.closed.Store(true)
	close(e.stopBg)
	<-e.bgDone
	e.wq.close()
	e.releaseAll()
}

func TestTransactionsLSOAndReadCommitted(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	appendWait(t, p, batchtest.Values("a", "b")) // 0-1
	appendWait(t, p, idem(10, 0, 0, true, 2))    // 2-3: txn of 10
	appendWait(t, p, idem(11, 0, 0, true, 1))    // 4: txn of 11
	if lso := p.LastStableOffset(); lso != 2 {
		t.Fatalf("LSO %d with two open transactions, want 2", lso)
	}
	res, aborted, err := p.ReadCommitted(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := batchtest.Decode(readRange(t, res.Data)); len(b) != 1 || res.LastStableOffset != 2 || len(aborted) != 0 {
		t.Fatalf("read_committed below the LSO: %d batches, LSO %d, aborted %v", len(b), res.LastStableOffset, aborted)
	}
	// A non-transactional batch from a producer with an open transaction
	// would land inside it.
	if _, err := p.Append(idem(10, 0, 2, false, 1)); !errors.Is(err, producerstate.ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside a transaction: %v", err)
	}
	// Abort 10, commit 11: the LSO moves past both markers.
	w, err := p.AppendMarker(producerstate.Marker{ProducerID: 10, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
	w, err = p.AppendMarker(producerstate.Marker{ProducerID: 11, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw || hw != 7 {
		t.Fatalf("LSO %d, HW %d after both markers, want 7", lso, hw)
	}
	res, aborted, err = p.ReadCommitted(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	res.Data.Release()
	if len(aborted) != 1 || aborted[0].ProducerID != 10 || aborted[0].FirstOffset != 2 || aborted[0].LastOffset != 5 {
		t.Fatalf("aborted transactions %+v, want producer 10 from 2, marker at 5", aborted)
	}
	// A zombie coordinator or producer cannot write markers.
	if _, err := p.AppendMarker(producerstate.Marker{ProducerID: 11, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 0}); !errors.Is(err, producerstate.ErrTransactionCoordinatorFenced) {
		t.Fatalf("old coordinator epoch: %v", err)
	}
	// The aborted list survives a restart (snapshot at close).
	dir := e.cfg.Dir
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := mustOpen(t, testConfig(dir))
	defer e2.Close()
	p2 := mustPartition(t, e2, "t", 0)
	res, aborted, err = p2.ReadCommitted(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	res.Data.Release()
	if len(aborted) != 1 || aborted[0].ProducerID != 10 {
		t.Fatalf("after restart: aborted %+v", aborted)
	}
}

func TestTruncationRebuildsProducerState(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Defaults.SegmentBytes = 300
	e := mustOpen(t, cfg)
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	p.SetReplicated(true)
	for seq := int32(0); seq < 20; seq++ {
		b := idem(5, 0, seq, false, 1)
		w, err := p.Append(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.TruncateTo(12); err != nil {
		t.Fatal(err)
	}
	// Offsets 12-19 are gone: the producer's next sequence is 12 again,
	// and a retry of sequence 15 is no longer a duplicate but a gap.
	if _, err := p.Append(idem(5, 0, 15, false, 1)); !errors.Is(err, producerstate.ErrOutOfOrderSequence) {
		t.Fatalf("sequence 15 after truncation to 12: %v", err)
	}
	w, err := p.Append(idem(5, 0, 12, false, 1))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.Result(); err != nil || res.BaseOffset != 12 {
		t.Fatalf("append after truncation: %+v %v", res, err)
	}
	for _, s := range p.listSnapshots() {
		if s > 13 {
			t.Fatalf("snapshot at %d survived truncation to 12", s)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
