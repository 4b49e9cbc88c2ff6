package producerstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/records"
)

func newState(t *testing.T) *State {
	t.Helper()
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func data(pid int64, epoch int16, seq int32, n int32) BatchHeader {
	return BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1}
}

func txnData(pid int64, epoch int16, seq int32, n int32) BatchHeader {
	h := data(pid, epoch, seq, n)
	h.Transactional = true
	return h
}

// appender plays the engine: it checks, assigns offsets and updates, and
// also writes each batch into a log (raw bytes) so replay can be compared
// with the live state.
type appender struct {
	t    *testing.T
	s    *State
	next int64
	now  int64
	log  [][]byte
}

func newAppender(t *testing.T) *appender {
	return &appender{t: t, s: newState(t), now: 1_700_000_000_000}
}

// append returns the batch's first offset, or the original one for a
// duplicate.
func (a *appender) append(h BatchHeader) (int64, bool, error) {
	a.t.Helper()
	d, err := a.s.Check(h)
	if err != nil {
		return 0, false, err
	}
	if d.Duplicate != nil {
		return d.Duplicate.FirstOffset, true, nil
	}
	first, last := a.next, a.next+int64(h.LastOffsetDelta)
	a.next = last + 1
	a.now++
	a.s.Update(h, first, last, a.now)
	a.log = append(a.log, encodeData(h, first, a.now))
	return first, false, nil
}

func (a *appender) mustAppend(h BatchHeader) int64 {
	a.t.Helper()
	off, dup, err := a.append(h)
	if err != nil || dup {
		a.t.Fatalf("append %+v: dup=%v err=%v", h, dup, err)
	}
	return off
}

func (a *appender) marker(pid int64, epoch int16, commit bool) (int64, *AbortedTxn) {
	a.t.Helper()
	m := Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: 3}
	if err := a.s.CheckMarker(m); err != nil {
		a.t.Fatal(err)
	}
	off := a.next
	a.next++
	a.now++
	ab, err := a.s.CompleteTxn(m, off, a.now)
	if err != nil {
		a.t.Fatal(err)
	}
	a.log = append(a.log, encodeMarker(m, off, a.now))
	return off, ab
}

func encodeData(h BatchHeader, base, ts int64) []byte {
	var attrs int16
	if h.Transactional {
		attrs |= records.AttrTransactional
	}
	recs := make([]batchtest.Record, h.LastOffsetDelta+1)
	for i := range recs {
		recs[i] = batchtest.Record{Value: []byte("v"), Timestamp: ts}
	}
	return batchtest.Encode(batchtest.Options{
		BaseOffset: base, Attributes: attrs, Idempotent: h.ProducerID >= 0,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
	}, recs...)
}

func encodeMarker(m Marker, off, ts int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	return batchtest.Encode(batchtest.Options{
		BaseOffset: off, Attributes: records.AttrTransactional | records.AttrControl, Idempotent: true,
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, BaseSequence: -1,
	}, batchtest.Record{Key: key, Value: val, Timestamp: ts})
}

// replay rebuilds a state from raw batches, as recovery does.
func replay(t *testing.T, s *State, log [][]byte) {
	t.Helper()
	for i, b := range log {
		h, err := ParseBatch(b)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		s.ApplyBatch(h)
	}
}

func TestDuplicatesOfLastFiveReturnOriginalOffsets(t *testing.T) {
	a := newAppender(t)
	var firsts []int64
	for i := range int32(7) {
		firsts = append(firsts, a.mustAppend(data(1, 0, i*3, 3)))
	}
	// Batches 2..6 are retained: each retry answers its original offset.
	for i := 2; i < 7; i++ {
		off, dup, err := a.append(data(1, 0, int32(i)*3, 3))
		if err != nil || !dup || off != firsts[i] {
			t.Fatalf("retry of batch %d: off=%d dup=%v err=%v, want %d dup", i, off, dup, err, firsts[i])
		}
	}
	d, _ := a.s.Check(data(1, 0, 18, 3))
	if d.Duplicate.LastOffset != firsts[6]+2 || d.Duplicate.Timestamp == 0 {
		t.Fatalf("duplicate metadata %+v", *d.Duplicate)
	}
	// Batch 1 fell out of the window: Kafka answers OUT_OF_ORDER.
	if _, _, err := a.append(data(1, 0, 3, 3)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retry older than 5 batches: %v", err)
	}
	// Same first sequence but another length is not a duplicate.
	if _, _, err := a.append(data(1, 0, 18, 2)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("partial overlap: %v", err)
	}
	if a.next != 21 {
		t.Fatalf("duplicates appended: log end %d", a.next)
	}
}

func TestSequenceGapAndEpochs(t *testing.T) {
	a := newAppender(t)
	a.mustAppend(data(7, 2, 0, 2))
	if _, _, err := a.append(data(7, 2, 3, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	a.mustAppend(data(7, 2, 2, 1))
	if _, _, err := a.append(data(7, 1, 3, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	if _, _, err := a.append(data(7, 3, 3, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	a.mustAppend(data(7, 3, 0, 1)) // bump resets the sequence
	// The old epoch's batches are forgotten: its retry is fenced, not a dup.
	if _, _, err := a.append(data(7, 2, 2, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("retry from the old epoch: %v", err)
	}
	a.mustAppend(data(7, 3, 1, 5))
	if p := a.s.Producers(); len(p) != 1 || p[0].Epoch != 3 || p[0].LastSequence != 5 {
		t.Fatalf("producers %+v", p)
	}
}

func TestUnknownProducerAcceptedAtAnySequence(t *testing.T) {
	a := newAppender(t)
	a.mustAppend(data(9, 0, 0, 1))
	a.mustAppend(data(10, 4, 1234, 1)) // state expired or retained away
	a.mustAppend(data(10, 4, 1235, 1))
	if _, err := a.s.Check(BatchHeader{ProducerID: 11, ProducerEpoch: 0, BaseSequence: -1}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("idempotent batch without a sequence: %v", err)
	}
	// Non-idempotent batches are never checked.
	if d, err := a.s.Check(BatchHeader{ProducerID: NoProducerID, ProducerEpoch: -1, BaseSequence: -1}); err != nil || d.Duplicate != nil {
		t.Fatal(d, err)
	}
}

func TestSequenceWraparound(t *testing.T) {
	h := data(1, 0, math.MaxInt32-1, 4)
	if got := h.LastSequence(); got != 1 {
		t.Fatalf("last sequence %d", got)
	}
	a := newAppender(t)
	a.mustAppend(data(1, 0, math.MaxInt32-3, 4)) // ends exactly at MaxInt32
	off := a.mustAppend(data(1, 0, 0, 2))
	if _, _, err := a.append(data(1, 0, 3, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatal(err)
	}
	a.mustAppend(data(1, 0, 2, 1))
	if got, dup, _ := a.append(data(1, 0, 0, 2)); !dup || got != off {
		t.Fatalf("duplicate after wrap: %d %v", got, dup)
	}
	b := newAppender(t)
	b.mustAppend(data(2, 0, math.MaxInt32-1, 4)) // wraps inside the batch
	b.mustAppend(data(2, 0, 2, 1))
}

func TestCheckBatchesStagesEarlierBatches(t *testing.T) {
	a := newAppender(t)
	a.mustAppend(data(1, 0, 0, 2))
	ds, err := a.s.CheckBatches([]BatchHeader{data(1, 0, 2, 2), data(1, 0, 4, 1), data(NoProducerID, -1, -1, 1)})
	if err != nil || len(ds) != 3 {
		t.Fatal(ds, err)
	}
	if _, err := a.s.CheckBatches([]BatchHeader{data(1, 0, 2, 2), data(1, 0, 5, 1)}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap inside one request: %v", err)
	}
	// Nothing was recorded by checking.
	if p := a.s.Producers(); p[0].LastSequence != 1 {
		t.Fatalf("CheckBatches changed state: %+v", p)
	}
}

func TestMarkerFencing(t *testing.T) {
	a := newAppender(t)
	a.mustAppend(txnData(5, 1, 0, 1))
	if _, _, err := a.append(data(5, 1, 1, 1)); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional write inside a transaction: %v", err)
	}
	if err := a.s.CheckMarker(Marker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 3}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old-epoch marker: %v", err)
	}
	// A timeout abort comes with a bumped epoch and fences the producer.
	a.marker(5, 2, false)
	if _, _, err := a.append(txnData(5, 1, 1, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("write from the fenced epoch: %v", err)
	}
	if err := a.s.CheckMarker(Marker{ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 2}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("zombie coordinator: %v", err)
	}
	a.mustAppend(txnData(5, 2, 0, 1))
	// A resent marker for a transaction already completed here is harmless.
	a.marker(5, 2, true)
	if _, ab := a.marker(5, 2, true); ab != nil {
		t.Fatal("second marker produced an entry")
	}
}

// scenario interleaves transactions of three producers; the offsets are
// listed in TestLSOAndAbortedTxns.
func scenario(t *testing.T) (*appender, map[string]int64) {
	a := newAppender(t)
	at := map[string]int64{}
	at["p1a"] = a.mustAppend(txnData(1, 0, 0, 1)) // 0
	at["p2a"] = a.mustAppend(txnData(2, 0, 0, 1)) // 1
	a.mustAppend(data(3, 0, 0, 1))                // 2
	a.mustAppend(txnData(1, 0, 1, 1))             // 3
	at["p2abort"], _ = a.marker(2, 0, false)      // 4
	a.mustAppend(data(3, 0, 1, 1))                // 5
	at["p1commit"], _ = a.marker(1, 0, true)      // 6
	a.mustAppend(txnData(2, 0, 1, 1))             // 7
	a.mustAppend(txnData(1, 0, 2, 1))             // 8
	a.marker(2, 0, false)                         // 9
	a.marker(1, 0, false)                         // 10
	a.mustAppend(txnData(2, 0, 2, 2))             // 11-12, left open
	return a, at
}

func TestLSOAndAbortedTxns(t *testing.T) {
	a := newAppender(t)
	a.mustAppend(txnData(1, 0, 0, 1)) // 0
	a.mustAppend(txnData(2, 0, 0, 1)) // 1
	a.mustAppend(data(3, 0, 0, 1))    // 2
	a.mustAppend(txnData(1, 0, 1, 1)) // 3
	if got := a.s.LastStableOffset(4); got != 0 {
		t.Fatalf("LSO with two open txns: %d", got)
	}
	_, ab := a.marker(2, 0, false) // 4
	if want := (AbortedTxn{2, 1, 4, 0}); ab == nil || *ab != want {
		t.Fatalf("abort entry %+v, want %+v (LSO held by p1)", ab, want)
	}
	a.mustAppend(data(3, 0, 1, 1)) // 5
	a.marker(1, 0, true)           // 6
	if got := a.s.LastStableOffset(6); got != 0 {
		t.Fatalf("LSO with the commit marker not yet below hw: %d", got)
	}
	if got := a.s.LastStableOffset(7); got != 7 {
		t.Fatalf("LSO after the marker replicated: %d", got)
	}
	a.mustAppend(txnData(2, 0, 1, 1))                                   // 7
	a.mustAppend(txnData(1, 0, 2, 1))                                   // 8
	if _, ab = a.marker(2, 0, false); *ab != (AbortedTxn{2, 7, 9, 8}) { // 9
		t.Fatalf("abort entry %+v", *ab)
	}
	if _, ab = a.marker(1, 0, false); *ab != (AbortedTxn{1, 8, 10, 11}) { // 10
		t.Fatalf("abort entry %+v", *ab)
	}
	a.mustAppend(txnData(2, 0, 2, 2)) // 11-12, left open
	if got := a.s.LastStableOffset(13); got != 11 {
		t.Fatalf("LSO: %d", got)
	}
	if got := a.s.LastStableOffset(5); got != 5 {
		t.Fatalf("LSO is capped by hw: %d", got)
	}
	e4, e9, e10 := AbortedTxn{2, 1, 4, 0}, AbortedTxn{2, 7, 9, 8}, AbortedTxn{1, 8, 10, 11}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 13, []AbortedTxn{e4, e9, e10}},
		{0, 1, nil}, // ends before the first aborted record
		{0, 2, []AbortedTxn{e4}},
		{2, 4, []AbortedTxn{e4}}, // starts inside the aborted range
		{5, 7, nil},              // between transactions
		{5, 8, []AbortedTxn{e9}}, // cuts into p2's second txn
		{9, 13, []AbortedTxn{e9, e10}},
		{10, 11, []AbortedTxn{e10}},
		{11, 13, nil},
	} {
		if got := a.s.AbortedTxns(c.from, c.to); !slices.Equal(got, c.want) {
			t.Errorf("AbortedTxns(%d, %d) = %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
	if f, ok := a.s.OngoingTxn(2); !ok || f != 11 {
		t.Fatalf("ongoing %d %v", f, ok)
	}
	a.s.DropAbortedBefore(5)
	if got := a.s.AbortedTxns(0, 13); !slices.Equal(got, []AbortedTxn{e9, e10}) {
		t.Fatalf("after retention: %+v", got)
	}
}

func TestReplayEqualsLiveState(t *testing.T) {
	a, _ := scenario(t)
	a.mustAppend(data(4, 0, 0, 3))
	for i := range int32(6) {
		a.mustAppend(data(4, 0, 3+i, 1))
	}
	a.mustAppend(data(6, 0, 0, 1))
	a.marker(6, 1, false) // epoch bump by a marker with no txn here
	live := a.s.Snapshot()

	r := newState(t)
	replay(t, r, a.log)
	if got := r.Snapshot(); !bytes.Equal(got, live) {
		t.Fatalf("replayed state differs:\nlive   %x\nreplay %x", live, got)
	}
	// Replaying from a snapshot taken midway gives the same state.
	mid := newState(t)
	replay(t, mid, a.log[:7])
	snap := mid.Snapshot()
	again := newState(t)
	if err := again.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if again.MapEndOffset() != 7 {
		t.Fatalf("map end %d", again.MapEndOffset())
	}
	replay(t, again, a.log[7:])
	if !bytes.Equal(again.Snapshot(), live) {
		t.Fatal("snapshot + replay differs from live state")
	}
	// A restored state still detects duplicates of all five batches.
	for i := range int32(5) {
		if d, err := again.Check(data(4, 0, 4+i, 1)); err != nil || d.Duplicate == nil {
			t.Fatalf("batch %d after restore+replay: %+v %v", i, d, err)
		}
	}
	if d, err := again.Check(data(6, 0, 1, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker's epoch bump lost in replay: %+v %v", d, err)
	}
}

func TestSnapshotRoundTripAndCorruption(t *testing.T) {
	a, _ := scenario(t)
	snap := a.s.Snapshot()
	r := newState(t)
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) {
		t.Fatal("round trip changed the snapshot")
	}
	if got := r.LastStableOffset(13); got != 11 {
		t.Fatalf("restored LSO %d", got)
	}
	if d, err := r.Check(txnData(2, 0, 2, 2)); err != nil || d.Duplicate == nil || d.Duplicate.FirstOffset != 11 {
		t.Fatalf("restored duplicate detection: %+v %v", d, err)
	}
	for i := range snap {
		bad := slices.Clone(snap)
		bad[i] ^= 0x40
		if err := newStateT(t).Restore(bad); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("flip at byte %d: %v", i, err)
		}
	}
	for _, n := range []int{0, 3, 10, len(snap) - 1} {
		if err := newStateT(t).Restore(snap[:n]); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	// A failed Restore leaves the state as it was.
	before := r.Snapshot()
	if err := r.Restore(snap[:20]); err == nil || !bytes.Equal(r.Snapshot(), before) {
		t.Fatal("failed restore changed the state")
	}
}

func newStateT(t *testing.T) *State { return newState(t) }

func TestExpiry(t *testing.T) {
	s := newState(t)
	day := (24 * time.Hour).Milliseconds()
	s.Update(data(1, 0, 0, 1), 0, 0, 1000)
	s.Update(txnData(2, 0, 0, 1), 1, 1, 1000)
	s.Update(data(3, 0, 0, 1), 2, 2, 5000)
	if n := s.RemoveExpired(1000 + day - 1); n != 0 {
		t.Fatalf("expired early: %d", n)
	}
	if n := s.RemoveExpired(1000 + day); n != 1 {
		t.Fatalf("expired %d, want only the idle non-transactional producer", n)
	}
	ids := []int64{}
	for _, p := range s.Producers() {
		ids = append(ids, p.ProducerID)
	}
	if !slices.Equal(ids, []int64{2, 3}) {
		t.Fatalf("left %v", ids)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("zero config validated")
	}
}

func TestParseBatch(t *testing.T) {
	b := encodeMarker(Marker{ProducerID: 77, ProducerEpoch: 4, Commit: true, CoordinatorEpoch: 9}, 123, 55)
	h, err := ParseBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	want := BatchHeader{BaseOffset: 123, MaxTimestamp: 55, ProducerID: 77, ProducerEpoch: 4, BaseSequence: -1,
		Transactional: true, Control: true, ControlType: ControlCommit, CoordinatorEpoch: 9}
	if h != want {
		t.Fatalf("got %+v\nwant %+v", h, want)
	}
	if _, err := ParseBatch(b[:HeaderSize+2]); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("cut control batch: %v", err)
	}
	if _, err := ParseBatch(b[:60]); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("short header: %v", err)
	}
	d, err := ParseBatch(encodeData(txnData(1, 2, 3, 4), 10, 99))
	if err != nil || d != (BatchHeader{BaseOffset: 10, LastOffsetDelta: 3, MaxTimestamp: 99, ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3, Transactional: true}) {
		t.Fatalf("%+v %v", d, err)
	}
}

func TestTxnIndexGolden(t *testing.T) {
	b := AppendTxnIndexEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4})
	want := []byte{0, 0,
		0, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 0, 3,
		0, 0, 0, 0, 0, 0, 0, 4}
	if !bytes.Equal(b, want) || len(b) != TxnIndexEntrySize {
		t.Fatalf("%x", b)
	}
	b = AppendTxnIndexEntry(b, AbortedTxn{9, 10, 11, 12})
	got, err := DecodeTxnIndex(b)
	if err != nil || !slices.Equal(got, []AbortedTxn{{1, 2, 3, 4}, {9, 10, 11, 12}}) {
		t.Fatal(got, err)
	}
	got, err = DecodeTxnIndex(b[:50])
	if !errors.Is(err, ErrCorruptTxnIndex) || len(got) != 1 {
		t.Fatalf("torn tail: %v %v", got, err)
	}
	b[34] = 1
	if _, err := DecodeTxnIndex(b); !errors.Is(err, ErrCorruptTxnIndex) {
		t.Fatalf("unknown version: %v", err)
	}
}

// FuzzRestoreSnapshot feeds arbitrary bytes to Restore: it must never
// panic, and a snapshot it accepts must encode back to bytes that restore
// to the same state.
func FuzzRestoreSnapshot(f *testing.F) {
	s, _ := New(DefaultConfig())
	s.Update(BatchHeader{ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0, LastOffsetDelta: 2}, 0, 2, 1000)
	s.Update(BatchHeader{ProducerID: 2, ProducerEpoch: 1, BaseSequence: 0, Transactional: true}, 3, 3, 1000)
	f.Add(s.Snapshot())
	f.Add([]byte{})
	f.Add([]byte("RLPS\x00\x01\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, _ := New(DefaultConfig())
		if err := st.Restore(b); err != nil {
			return
		}
		again := st.Snapshot()
		st2, _ := New(DefaultConfig())
		if err := st2.Restore(again); err != nil {
			t.Fatalf("re-encoded snapshot refused: %v", err)
		}
		if string(st2.Snapshot()) != string(again) {
			t.Fatal("snapshot does not round-trip")
		}
	})
}
