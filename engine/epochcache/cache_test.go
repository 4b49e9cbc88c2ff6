package epochcache

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/vfs"
)

func TestAssignAndLookup(t *testing.T) {
	c := New()
	if e, o := c.EndOffsetFor(0, 10); e != Undefined || o != Undefined {
		t.Fatalf("empty cache: got (%d,%d)", e, o)
	}
	for _, a := range []Entry{{1, 0}, {1, 5}, {3, 20}, {5, 40}} {
		if err := c.Assign(a.Epoch, a.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	want := []Entry{{1, 0}, {3, 20}, {5, 40}} // same epoch at a later offset is not new
	if got := c.Entries(); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	for _, tc := range []struct {
		req       int32
		epoch     int32
		endOffset int64
	}{
		{5, 5, 100}, // latest: log end offset
		{3, 3, 40},  // ends where 5 starts
		{4, 3, 40},  // unknown epoch: largest below, end of it
		{1, 1, 20},
		{0, 0, 0}, // below every epoch: asked epoch, our first offset
		{6, Undefined, Undefined},
		{Undefined, Undefined, Undefined},
	} {
		if e, o := c.EndOffsetFor(tc.req, 100); e != tc.epoch || o != tc.endOffset {
			t.Errorf("EndOffsetFor(%d) = (%d,%d), want (%d,%d)", tc.req, e, o, tc.epoch, tc.endOffset)
		}
	}
	if c.LatestEpoch() != 5 {
		t.Fatalf("latest %d", c.LatestEpoch())
	}
	// A contradicting assignment (a new leader after truncation) removes
	// the entries it overrides.
	if err := c.Assign(4, 30); err != nil {
		t.Fatal(err)
	}
	if got := c.Entries(); !slices.Equal(got, []Entry{{1, 0}, {3, 20}, {4, 30}}) {
		t.Fatalf("after contradicting assign: %v", got)
	}
}

func TestTruncate(t *testing.T) {
	c := New()
	for _, a := range []Entry{{1, 0}, {2, 10}, {3, 20}} {
		_ = c.Assign(a.Epoch, a.StartOffset)
	}
	_ = c.TruncateFromEnd(20) // an empty epoch 3 goes too
	if got := c.Entries(); !slices.Equal(got, []Entry{{1, 0}, {2, 10}}) {
		t.Fatalf("truncate from end: %v", got)
	}
	_ = c.TruncateFromStart(15)
	if got := c.Entries(); !slices.Equal(got, []Entry{{2, 15}}) {
		t.Fatalf("truncate from start: %v", got)
	}
	_ = c.TruncateFromStart(5) // below the first entry: nothing to do
	if got := c.Entries(); !slices.Equal(got, []Entry{{2, 15}}) {
		t.Fatalf("truncate from start below: %v", got)
	}
}

func batch(base int64, epoch int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	b[16] = 2
	return b
}

func TestAssignFromBatches(t *testing.T) {
	c := New()
	var b []byte
	b = append(b, batch(0, 1, 70)...)
	b = append(b, batch(3, 1, 61)...)
	b = append(b, batch(7, 4, 80)...)
	if err := c.AssignFromBatches(b); err != nil {
		t.Fatal(err)
	}
	if got := c.Entries(); !slices.Equal(got, []Entry{{1, 0}, {4, 7}}) {
		t.Fatalf("entries %v", got)
	}
	if err := c.AssignFromBatches(b[:75]); err == nil {
		t.Fatal("torn batch accepted")
	}
}

func TestCheckpointFile(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/p", 0o755); err != nil {
		t.Fatal(err)
	}
	fs.SyncDir("/") // the partition directory itself is durable (the engine's job)
	path := "/p/" + layout.LeaderEpochCheckpoint
	c, err := Open(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Assign(0, 0)
	if err := c.Assign(2, 17); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.OpenFile(path, os.O_RDONLY, 0)
	buf := make([]byte, 64)
	n, _ := f.ReadAt(buf, 0)
	f.Close()
	if got := string(buf[:n]); got != "0\n2\n0 0\n2 17\n" {
		t.Fatalf("file %q", got)
	}
	// Every write was synced and renamed, so a crash keeps all of it.
	after := fs.Crash(vfs.CrashOptions{})
	c2, err := Open(after, path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.Entries(); !slices.Equal(got, []Entry{{0, 0}, {2, 17}}) {
		t.Fatalf("reloaded %v", got)
	}
	for _, bad := range []string{"1\n0\n", "0\n2\n0 0\n", "0\n2\n3 5\n1 9\n", "0\n1\nx y\n", ""} {
		g, _ := after.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		_, _ = g.WriteAt([]byte(bad), 0)
		g.Close()
		if _, err := Open(after, path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: err %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestCheckpointWriteFailure(t *testing.T) {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("/p", 0o755)
	c, _ := Open(fs, "/p/"+layout.LeaderEpochCheckpoint)
	_ = c.Assign(0, 0)
	fs.Crash(vfs.CrashOptions{}) // the old fs now fails every call
	if err := c.Assign(1, 5); err == nil {
		t.Fatal("write to a crashed fs succeeded")
	}
}

// Reset replaces the entries durably, refuses bad histories, and leaves
// the cache as it was when the write fails.
func TestReset(t *testing.T) {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("/p", 0o755)
	fs.SyncDir("/")
	path := "/p/" + layout.LeaderEpochCheckpoint
	c, _ := Open(fs, path)
	_ = c.Assign(0, 0)
	_ = c.Assign(1, 10)
	for _, bad := range [][]Entry{{{2, 5}, {1, 9}}, {{1, 5}, {2, 5}}, {{-1, 0}}, {{1, -3}}} {
		if err := c.Reset(bad); err == nil {
			t.Fatalf("Reset(%v) accepted", bad)
		}
		if got := c.Entries(); !slices.Equal(got, []Entry{{0, 0}, {1, 10}}) {
			t.Fatalf("refused Reset(%v) changed the cache: %v", bad, got)
		}
	}
	if err := c.Reset([]Entry{{4, 100}, {6, 120}}); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(fs.Crash(vfs.CrashOptions{}), path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.Entries(); !slices.Equal(got, []Entry{{4, 100}, {6, 120}}) {
		t.Fatalf("after a crash %v", got)
	}
	// fs is crashed now: the write fails and memory is unchanged.
	if err := c.Reset(nil); err == nil {
		t.Fatal("Reset on a crashed fs succeeded")
	}
	if got := c.Entries(); !slices.Equal(got, []Entry{{4, 100}, {6, 120}}) {
		t.Fatalf("failed Reset changed the cache: %v", got)
	}
}
