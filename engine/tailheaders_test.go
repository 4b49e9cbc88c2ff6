package engine

import (
	"fmt"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/vfs"
)

// Reads near the log end find their batch headers in memory: a follower
// or consumer fetch at the tail costs no pread per partition. After a
// truncation the reused positions hold new batches, and reads return
// those, not what the remembered headers described.
func TestTailHeadersServeReads(t *testing.T) {
	efs := vfs.Wrap(vfs.Default)
	cfg := testConfig(t.TempDir())
	cfg.FS = efs
	e := mustOpen(t, cfg)
	defer e.Close()
	for _, n := range []string{"lead", "foll"} {
		if _, err := e.CreateTopic(n, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	lead, foll := mustPartition(t, e, "lead", 0), mustPartition(t, e, "foll", 0)
	lead.SetReplicated(true)
	foll.SetReplicated(true)
	replicate := func(epoch int32, values ...string) {
		b := leaderBytes(t, lead, epoch, values...)
		pend, err := foll.AppendReplicated(b)
		waitPending(t, pend, err)
	}
	var vals []string
	for i := range 40 {
		vals = append(vals, fmt.Sprintf("v%d", i))
	}
	replicate(1, vals...)
	first := func(off int64) string {
		t.Helper()
		res, err := foll.ReadReplica(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := batchtest.Decode(readRange(t, res.Data))
		if err != nil || len(bs) == 0 || len(bs[0].Records) == 0 {
			t.Fatalf("decode at %d: %v (%d batches)", off, err, len(bs))
		}
		r := bs[0].Records[0]
		if r.Offset != off {
			t.Fatalf("read at %d starts at %d", off, r.Offset)
		}
		return string(r.Value)
	}
	// Only ReadReplica is counted: readRange's copy reads the file too.
	preads := func(off int64) int64 {
		t.Helper()
		before := efs.Count(vfs.OpRead)
		res, err := foll.ReadReplica(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		n := efs.Count(vfs.OpRead) - before
		res.Data.Release()
		return n
	}
	for off := int64(40 - tailHeaders); off < 40; off++ {
		if n := preads(off); n != 0 {
			t.Fatalf("read at %d (within the last %d batches) did %d preads, want 0", off, tailHeaders, n)
		}
		if got, want := first(off), vals[off]; got != want {
			t.Fatalf("offset %d: %q, want %q", off, got, want)
		}
	}
	// Older batches are found on disk: the counter does see header reads.
	if n := preads(1); n == 0 {
		t.Fatal("read at offset 1 (outside the remembered tail) did no pread")
	}
	if got := first(1); got != "v1" {
		t.Fatalf("offset 1: %q", got)
	}

	// Cut the follower back to fewer batches than the tail holds, so the
	// rescan does not overwrite every remembered header, and replicate
	// different-sized batches at the reused positions (a new leader's log).
	if err := foll.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if err := lead.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	var newer []string
	for i := 5; i < 40; i++ {
		newer = append(newer, fmt.Sprintf("after-truncation-%d", i))
	}
	replicate(2, newer...)
	for off := int64(0); off < 40; off++ {
		want := vals[off]
		if off >= 5 {
			want = newer[off-5]
		}
		if got := first(off); got != want {
			t.Fatalf("after truncation, offset %d: %q, want %q", off, got, want)
		}
	}
}
