package engine

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestAdvanceLogStart is DeleteRecords on the engine: the start moves
// inside a segment, whole segments below it go, reads below it are out of
// range, and the start survives a restart (the segment files alone would
// say the first remaining segment's base).
func TestAdvanceLogStart(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	if _, err := e.CreateTopic("dr", 1, map[string]string{"segment.bytes": "4096"}); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "dr", 0)
	var next int64
	for i := 0; i < 100; i++ {
		appendWait(t, p, batchOf(next, 3))
		next += 3
	}
	pdir := filepath.Join(dir, "dr-0")
	before := len(segmentFiles(t, pdir))
	if before < 4 {
		t.Fatalf("want several segments, got %d", before)
	}
	if _, err := p.AdvanceLogStart(next + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("AdvanceLogStart above HW: %v, want ErrOffsetOutOfRange", err)
	}
	const to = 151 // inside a batch and a segment
	v := p.Version()
	if got, err := p.AdvanceLogStart(to); err != nil || got != to {
		t.Fatalf("AdvanceLogStart(%d) = %d, %v", to, got, err)
	}
	// A move wakes long polls (a follower's fetch answers the new start).
	if p.Version() == v {
		t.Fatal("AdvanceLogStart did not change the partition's version")
	}
	if got, err := p.AdvanceLogStart(10); err != nil || got != to {
		t.Fatalf("AdvanceLogStart backwards = %d, %v; want %d unchanged", got, err, to)
	}
	after := len(segmentFiles(t, pdir))
	if after >= before {
		t.Fatalf("segments below the start not deleted: %d -> %d", before, after)
	}
	check := func() {
		t.Helper()
		if _, err := p.Read(to-1, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read below the start: %v, want ErrOffsetOutOfRange", err)
		}
		if off, _, err := p.OffsetForTimestamp(TimestampEarliest); err != nil || off != to {
			t.Fatalf("earliest = %d, %v; want %d", off, err, to)
		}
		recs := readAll(t, p, to)
		if len(recs) == 0 || recs[0].Offset > to || recs[len(recs)-1].Offset != next-1 {
			t.Fatalf("read from the start: %d records", len(recs))
		}
	}
	check()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	p = mustPartition(t, e, "dr", 0)
	if got := p.Info().LogStartOffset; got != to {
		t.Fatalf("log start after restart %d, want %d", got, to)
	}
	check()
	// Retention keeps working above the moved start: it deletes whole
	// segments and the start follows the first one left, also after a
	// restart (the checkpoint's lower start is ignored then).
	before = len(segmentFiles(t, pdir))
	if n := p.applyRetention(TopicConfig{RetentionMs: -1, RetentionBytes: 1}, time.Now().UnixMilli()); n == 0 {
		t.Fatal("retention deleted nothing")
	}
	ret := p.Info().LogStartOffset
	if ret <= to || len(segmentFiles(t, pdir)) >= before {
		t.Fatalf("after retention start %d (was %d), %d segments (were %d)", ret, to, len(segmentFiles(t, pdir)), before)
	}
	e.Close()
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	p = mustPartition(t, e, "dr", 0)
	if got := p.Info().LogStartOffset; got != ret {
		t.Fatalf("log start after retention and restart %d, want %d", got, ret)
	}
	// A topic of the same name created again starts at 0.
	if err := e.DeleteTopic("dr"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("dr", 1, nil); err != nil {
		t.Fatal(err)
	}
	p = mustPartition(t, e, "dr", 0)
	for i := 0; i < 100; i++ {
		appendWait(t, p, batchOf(int64(3*i), 3))
	}
	e.Close()
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	if got := mustPartition(t, e, "dr", 0).Info().LogStartOffset; got != 0 {
		t.Fatalf("recreated topic starts at %d after restart, want 0", got)
	}
}
