package engine

import (
	"bytes"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/internal/vfs"
)

// leaderBytes appends values as a leader in epoch and returns the stored
// bytes of the new batches (what a follower fetch would carry).
func leaderBytes(t *testing.T, p *Partition, epoch int32, values ...string) []byte {
	t.Helper()
	if err := p.AssignLeaderEpoch(epoch); err != nil {
		t.Fatal(err)
	}
	start := p.LogEndOffset()
	for _, v := range values {
		appendWait(t, p, batchtest.Values(v))
	}
	p.SetHighWatermark(p.LogEndOffset())
	res, err := p.ReadReplica(start, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return readRange(t, res.Data)
}

func waitPending(t *testing.T, pend ReplicaPending, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	<-pend.Done()
	if err := pend.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestReplicaLogAppendTruncateEpochs(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	for _, n := range []string{"lead", "foll"} {
		if _, err := e.CreateTopic(n, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	lead, foll := mustPartition(t, e, "lead", 0), mustPartition(t, e, "foll", 0)
	lead.SetReplicated(true)
	foll.SetReplicated(true)

	b1 := leaderBytes(t, lead, 3, "a", "b")
	b2 := leaderBytes(t, lead, 5, "c")
	pend, err := foll.AppendReplicated(bytes.Clone(b1))
	waitPending(t, pend, err)
	pend, err = foll.AppendReplicated(bytes.Clone(b2))
	waitPending(t, pend, err)
	if got, want := foll.LogEndOffset(), lead.LogEndOffset(); got != want || got != 3 {
		t.Fatalf("follower LEO %d, leader %d", got, want)
	}
	if got := foll.EpochEntries(); len(got) != 2 || got[0] != (epochcache.Entry{Epoch: 3, StartOffset: 0}) || got[1] != (epochcache.Entry{Epoch: 5, StartOffset: 2}) {
		t.Fatalf("follower epochs %v", got)
	}
	// Byte-identical copies.
	res, err := foll.ReadReplica(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := readRange(t, res.Data); !bytes.Equal(got, append(bytes.Clone(b1), b2...)) {
		t.Fatal("follower bytes differ from the leader's")
	}
	// HW is replication's: nothing visible to consumers until set.
	if hw := foll.HighWatermark(); hw != 0 {
		t.Fatalf("follower HW %d before SetHighWatermark", hw)
	}
	if res, err := foll.Read(1, 1<<20, true); err != nil || res.Data.Len() != 0 {
		t.Fatalf("read between HW and LEO: %v len %d", err, res.Data.Len())
	}
	foll.SetHighWatermark(2)
	if got := readAll(t, foll, 0); len(got) != 2 {
		t.Fatalf("read %d records below HW 2", len(got))
	}
	// Gaps are refused.
	if _, err := foll.AppendReplicated(bytes.Clone(b1)); err == nil {
		t.Fatal("append at a wrong offset accepted")
	}

	// Truncate into the middle: offsets >= 2 go, epoch 5 leaves the cache.
	if err := foll.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if foll.LogEndOffset() != 2 || foll.LatestEpoch() != 3 || foll.HighWatermark() != 2 {
		t.Fatalf("after truncate: LEO %d epoch %d HW %d", foll.LogEndOffset(), foll.LatestEpoch(), foll.HighWatermark())
	}
	// An epoch assigned at the end with nothing appended is trimmed by a
	// truncation at or past the end (Kafka's truncateTo).
	if err := foll.AssignLeaderEpoch(7); err != nil {
		t.Fatal(err)
	}
	if err := foll.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if got := foll.LatestEpoch(); got != 3 {
		t.Fatalf("empty epoch 7 survived TruncateTo past the end: latest %d", got)
	}
	// Appends continue after truncation and the result survives a restart.
	pend, err = foll.AppendReplicated(bytes.Clone(b2))
	waitPending(t, pend, err)
	if ep, end := foll.EndOffsetForEpoch(3); ep != 3 || end != 2 {
		t.Fatalf("end of epoch 3: %d %d", ep, end)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	foll = mustPartition(t, e, "foll", 0)
	if foll.LogEndOffset() != 3 || foll.LatestEpoch() != 5 {
		t.Fatalf("after reopen: LEO %d epoch %d", foll.LogEndOffset(), foll.LatestEpoch())
	}
	if got := readAll(t, foll, 0); len(got) != 3 || string(got[2].Value) != "c" {
		t.Fatalf("after reopen read %+v", got)
	}

	// Full restart at a new offset.
	if err := foll.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if foll.LogStartOffset() != 100 || foll.LogEndOffset() != 100 || foll.LatestEpoch() != -1 {
		t.Fatalf("after restart at 100: start %d end %d epoch %d", foll.LogStartOffset(), foll.LogEndOffset(), foll.LatestEpoch())
	}
}

func TestReplicaTruncateAcrossSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	e := mustOpen(t, cfg)
	defer e.Close()
	if _, err := e.CreateTopic("seg", 1, map[string]string{"segment.bytes": "200"}); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "seg", 0)
	p.SetReplicated(true)
	for i := range 20 {
		appendWait(t, p, batchtest.Sized(1, 90+i))
	}
	if len(p.segs) < 3 {
		t.Fatalf("want several segments, have %d", len(p.segs))
	}
	if err := p.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 5 {
		t.Fatalf("LEO %d", p.LogEndOffset())
	}
	for range 3 {
		appendWait(t, p, batchtest.Sized(1, 50))
	}
	p.SetHighWatermark(p.LogEndOffset())
	if got := readAll(t, p, 0); len(got) != 8 {
		t.Fatalf("read %d records, want 8", len(got))
	}
}

// The HW survives a restart through replication-offset-checkpoint and is
// applied on the first switch to replicated; RF=1 users keep the log end.
func TestHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	for _, n := range []string{"repl", "solo"} {
		if _, err := e.CreateTopic(n, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	repl, solo := mustPartition(t, e, "repl", 0), mustPartition(t, e, "solo", 0)
	repl.SetReplicated(true)
	if err := repl.AssignLeaderEpoch(1); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		appendWait(t, repl, batchtest.Values(v))
		appendWait(t, solo, batchtest.Values(v))
	}
	repl.SetHighWatermark(2)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	for round := 0; round < 2; round++ {
		e = mustOpen(t, testConfig(dir))
		repl, solo = mustPartition(t, e, "repl", 0), mustPartition(t, e, "solo", 0)
		if got := solo.HighWatermark(); got != 4 {
			t.Fatalf("round %d: RF=1 HW %d, want the log end 4", round, got)
		}
		solo.SetReplicated(false)
		if got := solo.HighWatermark(); got != 4 {
			t.Fatalf("round %d: RF=1 HW %d after SetReplicated(false), want 4", round, got)
		}
		// Before replication takes over, a checkpoint keeps the old HW
		// (round 1 checks that the write at Close did).
		repl.SetReplicated(true)
		if got := repl.HighWatermark(); got != 2 {
			t.Fatalf("round %d: replicated HW %d after restart, want the checkpointed 2", round, got)
		}
		if res, err := repl.Read(2, 1<<20, true); err != nil || res.Data.Len() != 0 {
			t.Fatalf("round %d: read above the checkpointed HW: %v len %d", round, err, res.Data.Len())
		}
		if res, err := repl.Read(0, 1<<20, true); err != nil || res.Data.Len() == 0 {
			t.Fatalf("round %d: read below the checkpointed HW: %v len %d", round, err, res.Data.Len())
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointed HW never exceeds the recovered log end.
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	repl = mustPartition(t, e, "repl", 0)
	repl.SetReplicated(true)
	repl.SetHighWatermark(4)
	if err := repl.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if err := e.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	b, err := vfs.ReadFile(e.fs, dir+"/"+hwCheckpointName, 0)
	if err != nil || !bytes.Contains(b, []byte("repl 0 3\n")) {
		t.Fatalf("checkpoint %q, %v", b, err)
	}
}

// A replica truncation while a fetch still holds a range of the truncated
// file (a follower reading from us while we led) must not change what the
// range reads: the range keeps the old bytes, the log gets the new ones.
func TestTruncateKeepsHeldRangesIntact(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	if _, err := e.CreateTopic("held", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "held", 0)
	p.SetReplicated(true)
	for i := range 10 {
		appendWait(t, p, batchtest.Sized(1, 200+i))
	}
	p.SetHighWatermark(p.LogEndOffset())
	held, err := p.ReadReplica(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, held.Data.Len())
	if _, err := held.Data.ReadAt(want, held.Data.Pos()); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	// New, different bytes where the removed batches were.
	for range 8 {
		appendWait(t, p, batchtest.Sized(1, 333))
	}
	got := readRange(t, held.Data)
	if !bytes.Equal(got, want) {
		t.Fatalf("held range changed under truncation: %d bytes, first difference at %d", len(got), firstDiff(got, want))
	}
	p.SetHighWatermark(p.LogEndOffset())
	recs := readAll(t, p, 0)
	if len(recs) != 12 {
		t.Fatalf("log has %d records after truncation and appends, want 12", len(recs))
	}
	// With nobody holding a range, truncation happens in place.
	if err := p.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	p.SetHighWatermark(p.LogEndOffset())
	if recs := readAll(t, p, 0); len(recs) != 6 {
		t.Fatalf("%d records after the second truncation, want 6", len(recs))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
