package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/vfs"
)

// fakeDisk is a StatFS whose free space the test sets.
type fakeDisk struct {
	free, total atomic.Int64
	calls       atomic.Int64
}

func (d *fakeDisk) statfs(string) (int64, int64, error) {
	d.calls.Add(1)
	return d.free.Load(), d.total.Load(), nil
}

// openFakeDisk opens an in-memory engine on write path mode on a
// 100000-byte fake disk with 50000 free and creates topic with configs.
func openFakeDisk(t *testing.T, mode, topic string, configs map[string]string) (*fakeDisk, *Engine) {
	t.Helper()
	d := &fakeDisk{}
	d.total.Store(100000)
	d.free.Store(50000)
	cfg := diskConfig(crashableFS(t, mode), d)
	cfg.IOMode = mode
	e := mustOpen(t, cfg)
	t.Cleanup(func() { e.Close() })
	checkIOPath(t, e, mode)
	if _, err := e.CreateTopic(topic, 1, configs); err != nil {
		t.Fatal(err)
	}
	return d, e
}

func diskConfig(fs vfs.FS, d *fakeDisk) Config {
	cfg := testConfig("/data")
	cfg.FS = fs
	cfg.StatFS = d.statfs
	cfg.MinFreeBytes = 1000
	cfg.MinFreePercent = 10 // of 100000: the threshold is 10000
	cfg.DiskCheckInterval = time.Hour
	return cfg
}

// The threshold state machine: the estimate between samples, refusal
// with the message clients see, internal appends and reads going on,
// hysteresis, and a deletion sampling at once.
func TestDiskThreshold(t *testing.T) {
	forEachIOPath(t, testDiskThreshold)
}

func testDiskThreshold(t *testing.T, mode string) {
	d, e := openFakeDisk(t, mode, "t", nil)
	if _, err := e.CreateTopic("other", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	appendWait(t, p, batchOf(0, 1))
	if st := e.DiskStatus(); st.Degraded || st.MinFreeBytes != 10000 || st.ResumeFreeBytes != 11250 || st.TotalBytes != 100000 {
		t.Fatalf("status %+v", st)
	}

	// Just above the threshold: the next append's bytes would cross it by
	// the estimate, so it samples first; statfs still says enough.
	d.free.Store(10600)
	e.CheckDisk()
	big := batchtest.Sized(1, 700)
	calls := d.calls.Load()
	appendWait(t, p, big)
	if d.calls.Load() == calls {
		t.Fatal("crossing the threshold by the estimate did not sample statfs")
	}
	// Now statfs agrees: refused, with the message clients get.
	d.free.Store(9000)
	_, err := p.Append(batchtest.Sized(1, 700))
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append below the threshold: %v, want ErrDiskFull", err)
	}
	if want := "disk space below threshold: 9000 bytes free, need 10000"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	if e.DiskFull() == nil || !e.DiskStatus().Degraded || e.DiskStatus().RefusedAppends != 1 {
		t.Fatalf("not degraded: %+v", e.DiskStatus())
	}
	end := p.Info().LogEndOffset
	// Internal records (group offsets) and reads keep working.
	w, err := p.AppendInternal(batchOf(end, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, p, 0)); got != 3 {
		t.Fatalf("read %d records while degraded, want 3", got)
	}

	// Hysteresis: back at the threshold is not enough.
	d.free.Store(10500)
	if st := e.CheckDisk(); !st.Degraded {
		t.Fatalf("resumed at %d free, below the resume point %d", st.FreeBytes, st.ResumeFreeBytes)
	}
	d.free.Store(11250)
	if st := e.CheckDisk(); st.Degraded {
		t.Fatalf("still degraded at the resume point: %+v", st)
	}
	appendWait(t, p, batchOf(end+1, 1))

	// Degraded again; deleting a topic samples at once (the test's disk
	// "frees" the space), so produce resumes without waiting for a tick.
	d.free.Store(100)
	e.CheckDisk()
	if _, err := p.Append(batchOf(end+2, 1)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append at 100 bytes free: %v", err)
	}
	d.free.Store(60000)
	if err := e.DeleteTopic("other"); err != nil {
		t.Fatal(err)
	}
	if st := e.DiskStatus(); st.Degraded {
		t.Fatalf("DeleteTopic did not sample the freed space: %+v", st)
	}
	appendWait(t, p, batchOf(end+2, 1))
}

// Retention that deletes segments samples the free space at once too.
func TestDiskRetentionResamples(t *testing.T) {
	forEachIOPath(t, testDiskRetentionResamples)
}

func testDiskRetentionResamples(t *testing.T, mode string) {
	d, e := openFakeDisk(t, mode, "r", map[string]string{"segment.bytes": "1024", "retention.bytes": "1024"})
	p := mustPartition(t, e, "r", 0)
	for i := range 6 {
		appendWait(t, p, batchtest.Sized(1, 600+i))
	}
	d.free.Store(100)
	e.CheckDisk()
	d.free.Store(60000)
	if n := e.RunRetention(); n == 0 {
		t.Fatal("retention deleted nothing")
	}
	if st := e.DiskStatus(); st.Degraded {
		t.Fatalf("retention did not sample the freed space: %+v", st)
	}
}

// A write that fails half way on a full disk is cut back to the last
// whole batch at once; the partition takes appends again once space is
// back, and a restart finds nothing to repair. This is the pwrite path's
// undo, where Append itself fails; the ring's rollback of the same fault
// is TestDiskFullRollback.
func TestShortWriteTruncatedAtOnce(t *testing.T) {
	d := &fakeDisk{}
	d.total.Store(1 << 30)
	d.free.Store(1 << 29)
	mem := vfs.NewMem()
	efs := vfs.Wrap(mem)
	cfg := diskConfig(efs, d)
	cfg.IOMode = "sync"
	e := mustOpen(t, cfg)
	if _, err := e.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	appendWait(t, p, batchOf(0, 1))
	segPath := "/data/t-0/" + segmentName(0, logSuffix)
	size := func() int64 {
		fi, err := mem.Stat(segPath)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	whole := size()
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, PathContains: "t-0/", Count: 1, Err: syscall.ENOSPC, Partial: 40})
	_, err := p.Append(batchOf(1, 3))
	if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ErrStorage wrapping ENOSPC", err)
	}
	if efs.Fired() != 1 {
		t.Fatalf("fault fired %d times", efs.Fired())
	}
	if got := size(); got != whole {
		t.Fatalf("segment is %d bytes after the failed write, want %d (torn tail cut at once)", got, whole)
	}
	// ENOSPC degrades the monitor even though statfs said there was room.
	if !e.DiskStatus().Degraded {
		t.Fatal("ENOSPC did not degrade the disk monitor")
	}
	if _, err := p.Append(batchOf(1, 1)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append while degraded: %v", err)
	}
	e.CheckDisk() // statfs says there is room again
	res := appendWait(t, p, batchOf(1, 2))
	if res.BaseOffset != 1 {
		t.Fatalf("append after the failed write at %d, want 1", res.BaseOffset)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, cfg)
	defer e.Close()
	recs := readAll(t, mustPartition(t, e, "t", 0), 0)
	if len(recs) != 3 {
		t.Fatalf("%d records after restart, want 3", len(recs))
	}
	for i, r := range recs {
		if want := val(int64(i)); string(r.Value) != want {
			t.Fatalf("record %d is %q, want %q", i, r.Value, want)
		}
	}

	// Any other failed write is cut back too, and fails the partition
	// (the cause is unknown).
	p = mustPartition(t, e, "t", 0)
	whole = size()
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, PathContains: "t-0/", Count: 1, Err: syscall.EIO, Partial: 40})
	if _, err := p.Append(batchOf(3, 1)); !errors.Is(err, ErrStorage) {
		t.Fatalf("append on EIO: %v", err)
	}
	if got := size(); got != whole {
		t.Fatalf("segment is %d bytes after EIO, want %d", got, whole)
	}
	if _, err := p.Append(batchOf(3, 1)); err == nil || !strings.Contains(fmt.Sprint(err), "partition t-0") {
		t.Fatalf("append after EIO: %v, want the partition failed", err)
	}
}

func TestDiskConfigValidate(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		pct   float64
		every time.Duration
	}{{-1, 5, time.Second}, {0, -1, time.Second}, {0, 100, time.Second}, {0, 5, 0}} {
		cfg := testConfig("/d")
		cfg.MinFreeBytes, cfg.MinFreePercent, cfg.DiskCheckInterval = c.bytes, c.pct, c.every
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", c)
		}
	}
}

// On a full disk DeleteTopic frees the topic's logs before rewriting
// topics.json, which needs the space: the deletion succeeds, and a
// restart does not bring the topic back.
func TestDeleteTopicOnFullDisk(t *testing.T) {
	forEachIOPath(t, testDeleteTopicOnFullDisk)
}

func testDeleteTopicOnFullDisk(t *testing.T, mode string) {
	mem := crashableFS(t, mode)
	efs := vfs.Wrap(mem)
	cfg := ioConfig("/data", mode)
	cfg.FS = efs
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	for _, name := range []string{"big", "small"} {
		if _, err := e.CreateTopic(name, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	appendWait(t, mustPartition(t, e, "big", 0), batchOf(0, 10))
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, PathContains: topicsFileName, Count: 1, Err: syscall.ENOSPC})
	if err := e.DeleteTopic("big"); err != nil {
		t.Fatalf("DeleteTopic on a full disk: %v", err)
	}
	if efs.Fired() != 1 {
		t.Fatalf("fault fired %d times, want 1", efs.Fired())
	}
	if _, err := mem.Stat("/data/big-0"); err == nil {
		t.Fatal("big-0 still on disk")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, cfg)
	defer e.Close()
	if _, ok := e.Topic("big"); ok {
		t.Fatal("deleted topic back after restart")
	}
	if _, ok := e.Topic("small"); !ok {
		t.Fatal("other topic lost")
	}
}
