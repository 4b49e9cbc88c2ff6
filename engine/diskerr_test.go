package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/internal/vfs"
)

// Disk-error tests run on both write paths (forEachIOPath): the engine's
// FS is an ErrorFS over the OS one, which the sync path calls and the
// io_uring owner consults (uringQueue.faults), so one fault reaches both.

// openFaulty opens an engine on write path mode over an ErrorFS on the OS
// file system.
func openFaulty(t *testing.T, dir, mode string) (*Engine, *vfs.ErrorFS) {
	t.Helper()
	efs := vfs.Wrap(vfs.Default)
	cfg := ioConfig(dir, mode)
	cfg.FS = efs
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	return e, efs
}

// An EIO from a segment write or fdatasync takes that partition offline:
// waiters of appends not yet durable fail with ErrStorage (none is
// acknowledged), appends and reads answer ErrStorage, Offline fires, the
// other partition keeps appending and syncing, and reopening recovers
// every acknowledged record.
func TestDiskErrorTakesPartitionOffline(t *testing.T) {
	forEachIOPath(t, testDiskErrorTakesPartitionOffline)
}

func testDiskErrorTakesPartitionOffline(t *testing.T, mode string) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		name := map[vfs.Op]string{vfs.OpWrite: "write", vfs.OpSync: "fsync"}[op]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			e, efs := openFaulty(t, dir, mode)
			defer func() { e.Close() }()
			if _, err := e.CreateTopic("d", 2, nil); err != nil {
				t.Fatal(err)
			}
			p0, p1 := mustPartition(t, e, "d", 0), mustPartition(t, e, "d", 1)
			for i := int64(0); i < 5; i++ {
				appendWait(t, p0, batchOf(i, 1))
				appendWait(t, p1, batchOf(i, 1))
			}
			offline := e.Offline()
			efs.Inject(vfs.Fault{Op: op, PathContains: "d-0/", Count: 1, Err: syscall.EIO})
			// A burst of appends: the first write/fsync to reach the disk
			// fails, every waiter not yet durable with it.
			const burst = 20
			ws := make([]AppendWaiter, 0, burst)
			failed := 0 // a failed pwrite (sync path) fails Append itself
			for i := int64(0); i < burst; i++ {
				w, err := p0.Append(batchOf(5+i, 1))
				if err != nil {
					if !errors.Is(err, ErrStorage) {
						t.Fatalf("append %d: %v", i, err)
					}
					failed++
					break
				}
				ws = append(ws, w)
			}
			acked := int64(5)
			for i, w := range ws {
				_, err := w.Result()
				switch {
				case err == nil && failed == 0 && i == int(acked-5):
					acked = 5 + int64(i) + 1
				case errors.Is(err, ErrStorage):
					failed++
				default:
					t.Fatalf("waiter %d: %v (after %d failures)", i, err, failed)
				}
			}
			if failed == 0 {
				t.Fatalf("no waiter failed; fault fired %d times", efs.Fired())
			}
			select {
			case <-offline:
			case <-time.After(5 * time.Second):
				t.Fatal("Offline did not fire")
			}
			if off := e.OfflinePartitions(); len(off) != 1 || off[0] != p0 || !errors.Is(p0.Failed(), ErrStorage) {
				t.Fatalf("offline partitions %v", off)
			}
			if _, err := p0.Append(batchOf(100, 1)); !errors.Is(err, ErrStorage) {
				t.Fatalf("append to offline partition: %v", err)
			}
			if _, err := p0.Read(0, 1<<16, true); !errors.Is(err, ErrStorage) {
				t.Fatalf("read of offline partition: %v", err)
			}
			if hw := p0.Info().HighWatermark; hw != acked {
				t.Fatalf("HW %d, want the acknowledged end %d", hw, acked)
			}
			// The other partition keeps working, syncs included.
			syncs := efs.Count(vfs.OpSync)
			for i := int64(5); i < 15; i++ {
				appendWait(t, p1, batchOf(i, 1))
			}
			if efs.Count(vfs.OpSync) == syncs {
				t.Fatal("no fsync on the healthy partition")
			}
			// Close does not fail for a partition already offline, but
			// leaves no clean marker: the next Open scans and recovers.
			if err := e.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, cleanMarkerName)); !os.IsNotExist(err) {
				t.Fatalf("clean marker after closing with an offline partition: %v", err)
			}

			// Restart: recovery brings the partition back with every
			// acknowledged record.
			e, _ = openFaulty(t, dir, mode)
			p0, p1 = mustPartition(t, e, "d", 0), mustPartition(t, e, "d", 1)
			got := readAll(t, p0, 0)
			if int64(len(got)) < acked {
				t.Fatalf("%d records after restart, %d were acknowledged", len(got), acked)
			}
			checkSequence(t, got, 0, val)
			checkSequence(t, readAll(t, p1, 0), 0, val)
			if n := len(readAll(t, p1, 0)); n != 15 {
				t.Fatalf("healthy partition has %d records, want 15", n)
			}
			end := p0.LogEndOffset()
			appendWait(t, p0, batchOf(end, 1))
		})
	}
}

// A slow fdatasync (an injected delay) holds back only the acknowledgment:
// the append succeeds after the delay and the HW does not cover it before.
// On the io_uring path other partitions sync meanwhile; the sync path has
// one flusher for all partitions, so there they wait too (as on a disk
// that stalls as a whole).
func TestSlowFsyncDelaysAck(t *testing.T) {
	forEachIOPath(t, testSlowFsyncDelaysAck)
}

func testSlowFsyncDelaysAck(t *testing.T, mode string) {
	e, efs := openFaulty(t, t.TempDir(), mode)
	defer e.Close()
	if _, err := e.CreateTopic("s", 2, nil); err != nil {
		t.Fatal(err)
	}
	p0, p1 := mustPartition(t, e, "s", 0), mustPartition(t, e, "s", 1)
	appendWait(t, p0, batchOf(0, 1))
	const delay = 1500 * time.Millisecond
	efs.Inject(vfs.Fault{Op: vfs.OpSync, PathContains: "s-0/", Count: 1, Delay: delay})
	start := time.Now()
	w, err := p0.Append(batchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	// For a third of the stall the HW stays below the append: the fsync
	// cannot end before delay, so it must hold all that time.
	if !testwait.Holds(delay/3, func() bool { return p0.Info().HighWatermark == 1 }) {
		t.Fatalf("HW %d covers an append whose fsync is stalled", p0.Info().HighWatermark)
	}
	t1 := time.Now()
	appendWait(t, p1, batchtest.Values("other"))
	other := time.Since(t1)
	if _, err := w.Result(); err != nil {
		t.Fatalf("slow append failed: %v", err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("append acknowledged after %v, before the %v fsync delay", took, delay)
	}
	if e.IOPath() == "uring" && other > delay/2 {
		t.Fatalf("healthy partition waited %v behind the stalled fsync", other)
	}
	if p0.Failed() != nil {
		t.Fatalf("slow partition failed: %v", p0.Failed())
	}
	checkSequence(t, readAll(t, p0, 0), 0, val)
	fmt.Fprintf(testWriter{t}, "path %s: healthy partition ack %v during a %v fsync stall\n", e.IOPath(), other, delay)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// Under FsyncInterval appends are acknowledged once written; a failed
// periodic flush still takes the partition offline (the ring's flush
// requests consult the faults too).
func TestIntervalFlushErrorTakesPartitionOffline(t *testing.T) {
	forEachIOPath(t, testIntervalFlushErrorTakesPartitionOffline)
}

func testIntervalFlushErrorTakesPartitionOffline(t *testing.T, mode string) {
	efs := vfs.Wrap(vfs.Default)
	cfg := ioConfig(t.TempDir(), mode)
	cfg.FS = efs
	cfg.Fsync = FsyncInterval
	cfg.FsyncInterval = 10 * time.Millisecond
	e := mustOpen(t, cfg)
	defer e.Close()
	checkIOPath(t, e, mode)
	if _, err := e.CreateTopic("i", 2, nil); err != nil {
		t.Fatal(err)
	}
	p0, p1 := mustPartition(t, e, "i", 0), mustPartition(t, e, "i", 1)
	offline := e.Offline()
	efs.Inject(vfs.Fault{Op: vfs.OpSync, PathContains: "i-0/00000000000000000000.log", Err: syscall.EIO})
	appendWait(t, p0, batchOf(0, 1)) // acknowledged when written
	select {
	case <-offline:
	case <-time.After(10 * time.Second):
		t.Fatal("a failed interval flush did not take the partition offline")
	}
	if _, err := p0.Append(batchOf(1, 1)); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after a failed flush: %v", err)
	}
	appendWait(t, p1, batchOf(0, 1))
}
