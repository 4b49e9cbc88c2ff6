package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/internal/vfs"
)

// A write that fails for lack of space leaves the partition online on
// both write paths (forEachIOPath): on the io_uring path the appends
// stamped from the failed one on are rolled back (uring_undo.go), on the
// pwrite path the failed write is undone before anything moved.

// openRollback opens an engine over an ErrorFS on the OS file system
// with a fake statfs that always has room, so only the injected ENOSPC
// degrades it and CheckDisk clears it.
func openRollback(t *testing.T, dir, mode string, policy FsyncPolicy) (*Engine, *vfs.ErrorFS, Config) {
	t.Helper()
	d := &fakeDisk{}
	d.total.Store(1 << 40)
	d.free.Store(1 << 39)
	efs := vfs.Wrap(vfs.Default)
	cfg := diskConfig(efs, d)
	cfg.Dir = dir
	cfg.IOMode = mode
	cfg.Fsync = policy
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	return e, efs, cfg
}

// burstIntoENOSPC appends batch(i) for i = from, from+1, ... without
// waiting, with one write failing with ENOSPC after Partial bytes once a
// write has gone through, until an append is refused (the disk monitor
// degraded) or the fault fired and every waiter finished. It checks that
// the acknowledged appends form a dense prefix starting at from and that
// every other one failed with a storage error, and returns the end of
// that prefix.
func burstIntoENOSPC(t *testing.T, p *Partition, efs *vfs.ErrorFS, from int64, batch func(int64) []byte) int64 {
	t.Helper()
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, PathContains: p.dir + "/", Skip: 1, Count: 1, Err: syscall.ENOSPC, Partial: 40})
	var ws []AppendWaiter
	refused := 0 // appends that failed themselves
	for i := int64(0); i < 400; i++ {
		w, err := p.Append(batch(from + i))
		if err != nil {
			// The pwrite path fails the append itself; after the ENOSPC
			// the degraded monitor refuses appends up front.
			if !errors.Is(err, ErrStorage) && !errors.Is(err, ErrDiskFull) {
				t.Fatalf("append %d: %v", from+i, err)
			}
			if errors.Is(err, ErrStorage) {
				refused++
			}
			break
		}
		ws = append(ws, w)
		if i%8 == 7 {
			// Let the ring send what accumulated, so later appends are
			// stamped while the failing write is in flight.
			<-w.Done()
			if efs.Fired() > 0 {
				break
			}
		}
	}
	end, failed := from, 0
	for i, w := range ws {
		res, err := w.Result()
		switch {
		case err == nil && failed == 0:
			if res.BaseOffset != end {
				t.Fatalf("waiter %d acknowledged at %d, want %d", i, res.BaseOffset, end)
			}
			end = res.LastOffset + 1
		case errors.Is(err, ErrStorage):
			failed++
		default:
			t.Fatalf("waiter %d: %v (after %d failures)", i, err, failed)
		}
	}
	failed += refused
	if efs.Fired() != 1 || failed == 0 {
		t.Fatalf("fault fired %d times, %d appends failed", efs.Fired(), failed)
	}
	t.Logf("path %s: %d appends acknowledged before the ENOSPC, %d failed", p.e.IOPath(), end-from, failed)
	return end
}

// checkRolledBack waits for the partition to end at end (the ring's
// rollback is applied by its completer) and checks it stayed online, with
// the HW at end, the segment file ending where the log does, and appends
// refused with ErrDiskFull until the disk is sampled again.
func checkRolledBack(t *testing.T, e *Engine, p *Partition, offline <-chan struct{}, end int64) {
	t.Helper()
	testwait.Until(10*time.Second, func() bool { return p.LogEndOffset() == end }) // checked below
	p.mu.RLock()
	logEnd, hw, rend, seg, size := p.logEnd, p.hw, p.rend, p.active(), p.active().size
	p.mu.RUnlock()
	if logEnd != end || hw != end || rend != end {
		t.Fatalf("log end %d, HW %d, readable end %d after the failed write; want all %d", logEnd, hw, rend, end)
	}
	if err := p.Failed(); err != nil {
		t.Fatalf("partition offline after ENOSPC: %v", err)
	}
	select {
	case <-offline:
		t.Fatal("Offline fired for a write that failed for lack of space")
	default:
	}
	fi, err := os.Stat(seg.path(logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Fatalf("segment file is %d bytes, the log ends at byte %d (torn tail left)", fi.Size(), size)
	}
	if !e.DiskStatus().Degraded {
		t.Fatal("ENOSPC did not degrade the disk monitor")
	}
	// One failed write: one rollback (or one undone pwrite) counted.
	if n := e.Stats().DiskFullRollbacks; n != 1 {
		t.Fatalf("DiskFullRollbacks %d after one write failed for lack of space, want 1", n)
	}
	if _, err := p.Append(batchOf(end, 1)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append while degraded: %v", err)
	}
}

// A burst of appends where one write fails with ENOSPC (torn after 40
// bytes): acknowledged appends stay, the failed and later ones fail with
// a storage error, the partition stays online with no torn tail, and once
// space is back the next append takes the next dense offset without a
// restart. Reopening finds exactly those records.
func TestDiskFullRollback(t *testing.T) {
	forEachIOPath(t, testDiskFullRollback)
}

func testDiskFullRollback(t *testing.T, mode string) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			e, efs, cfg := openRollback(t, dir, mode, policy)
			defer func() { e.Close() }()
			if _, err := e.CreateTopic("r", 2, nil); err != nil {
				t.Fatal(err)
			}
			p, other := mustPartition(t, e, "r", 0), mustPartition(t, e, "r", 1)
			for i := int64(0); i < 5; i++ {
				appendWait(t, p, batchOf(i, 1))
			}
			offline := e.Offline()
			// A follower reads (up to the readable end) throughout.
			stop, read := make(chan struct{}), make(chan int64)
			go followReads(t, p, 5, stop, read)
			end := burstIntoENOSPC(t, p, efs, 5, func(i int64) []byte { return batchOf(i, 1) })
			checkRolledBack(t, e, p, offline, end)
			close(stop)
			if got := <-read; got > end {
				t.Fatalf("a follower read up to offset %d, past the failed write at %d", got, end)
			}

			efs.Clear()
			e.CheckDisk() // the fake statfs has room
			for i := end; i < end+3; i++ {
				if res := appendWait(t, p, batchOf(i, 1)); res.BaseOffset != i {
					t.Fatalf("append after the rollback at %d, want %d", res.BaseOffset, i)
				}
			}
			appendWait(t, other, batchOf(0, 1))
			got := readAll(t, p, 0)
			checkSequence(t, got, 0, val)
			if int64(len(got)) != end+3 {
				t.Fatalf("%d records readable, want %d", len(got), end+3)
			}
			if err := e.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			e = mustOpen(t, cfg)
			got = readAll(t, mustPartition(t, e, "r", 0), 0)
			checkSequence(t, got, 0, val)
			if int64(len(got)) != end+3 {
				t.Fatalf("%d records after reopening, want %d", len(got), end+3)
			}
		})
	}
}

// The idempotent producer's view: the batch whose write failed is retried
// with the same sequence and accepted at the offset it had (the producer
// state was rebuilt: no duplicate of a rolled-back batch, no
// OUT_OF_ORDER_SEQUENCE), while a retry of an acknowledged batch is still
// answered as a duplicate.
func TestDiskFullRollbackIdempotent(t *testing.T) {
	forEachIOPath(t, testDiskFullRollbackIdempotent)
}

func testDiskFullRollbackIdempotent(t *testing.T, mode string) {
	dir := t.TempDir()
	e, efs, cfg := openRollback(t, dir, mode, FsyncAlways)
	defer func() { e.Close() }()
	if _, err := e.CreateTopic("r", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "r", 0)
	// One record per batch from offset 0: sequence == offset.
	batch := func(seq int64) []byte { return idem(7, 0, int32(seq), false, 1) }
	for i := int64(0); i < 5; i++ {
		appendWait(t, p, batch(i))
	}
	offline := e.Offline()
	end := burstIntoENOSPC(t, p, efs, 5, batch)
	checkRolledBack(t, e, p, offline, end)
	efs.Clear()
	e.CheckDisk()

	dup := appendWait(t, p, batch(end-1))
	if dup.BaseOffset != end-1 || p.LogEndOffset() != end {
		t.Fatalf("retry of the last acknowledged batch at %d (log end %d), want the duplicate at %d", dup.BaseOffset, p.LogEndOffset(), end-1)
	}
	for seq := end; seq < end+3; seq++ {
		w, err := p.Append(batch(seq))
		if err != nil {
			if errors.Is(err, producerstate.ErrOutOfOrderSequence) {
				t.Fatalf("retried sequence %d refused as out of order: the rolled-back batches are still in the producer state", seq)
			}
			t.Fatalf("retry of sequence %d: %v", seq, err)
		}
		res, err := w.Result()
		if err != nil || res.BaseOffset != seq {
			t.Fatalf("retry of sequence %d at %d (%v), want offset %d", seq, res.BaseOffset, err, seq)
		}
	}
	want := func(o int64) string { return fmt.Sprintf("p7-s%d", o) }
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e = mustOpen(t, cfg)
	got := readAll(t, mustPartition(t, e, "r", 0), 0)
	checkSequence(t, got, 0, want)
	if int64(len(got)) != end+3 {
		t.Fatalf("%d records after reopening, want %d", len(got), end+3)
	}
}

// followReads reads p as a follower does (ReadReplica) from offset from
// until stop, checking every record's value, and sends the end it read to.
// At the end it waits for the partition to change, as a long poll does.
func followReads(t *testing.T, p *Partition, from int64, stop <-chan struct{}, read chan<- int64) {
	next := from
	defer func() { read <- next }()
	w := NewWaker()
	for {
		select {
		case <-stop:
			return
		default:
		}
		seen := w.Seen(p)
		res, err := p.ReadReplica(next, 1<<16)
		if err != nil {
			t.Errorf("follower read at %d: %v", next, err)
			return
		}
		if res.Data.Len() == 0 {
			res.Data.Release()
			p.Watch(w, seen)
			select {
			case <-stop:
			case <-w.C():
			}
			p.Unwatch(w)
			w.Drain()
			continue
		}
		b := make([]byte, res.Data.Len())
		_, err = res.Data.ReadAt(b, res.Data.Pos())
		res.Data.Release()
		if err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("follower read at %d: %v", next, err)
			return
		}
		bs, err := batchtest.Decode(b)
		if err != nil {
			t.Errorf("follower decode at %d: %v", next, err)
			return
		}
		for _, b := range bs {
			for _, r := range b.Records {
				if string(r.Value) != val(r.Offset) {
					t.Errorf("follower read %q at %d", r.Value, r.Offset)
				}
			}
			next = b.BaseOffset + int64(b.LastOffsetDelta) + 1
		}
	}
}

// An append admitted just before another append's write fails with
// ENOSPC, and stamped only after that failure rolled the partition back,
// is refused: it must not take the rolled-back offsets and be
// acknowledged while an append sent before it failed (a pipelined
// producer's batches would land out of order). appendAdmitted holds the
// append between its admission and the partition lock while the failure
// and the rollback happen.
func TestAppendAdmittedBeforeENOSPCRefused(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		e, efs, _ := openRollback(t, t.TempDir(), mode, FsyncNever)
		defer e.Close()
		if _, err := e.CreateTopic("r", 1, nil); err != nil {
			t.Fatal(err)
		}
		p := mustPartition(t, e, "r", 0)
		for i := int64(0); i < 5; i++ {
			appendWait(t, p, batchOf(i, 1))
		}
		held := false
		appendAdmitted = func(q *Partition) {
			if q != p || held {
				return
			}
			held = true
			efs.Inject(vfs.Fault{Op: vfs.OpWrite, PathContains: p.dir + "/", Count: 1, Err: syscall.ENOSPC, Partial: 40})
			w, err := p.Append(batchOf(5, 1)) // sent first; its write fails
			if err == nil {
				<-w.Done()
				_, err = w.Result()
			}
			if !errors.Is(err, ErrStorage) {
				t.Errorf("the append whose write failed: %v", err)
			}
			testwait.Until(10*time.Second, func() bool { return p.LogEndOffset() == 5 })
		}
		defer func() { appendAdmitted = nil }()
		w, err := p.Append(batchOf(6, 1)) // admitted, then held
		if err == nil {
			<-w.Done()
			res, rerr := w.Result()
			t.Fatalf("an append admitted before the ENOSPC was acknowledged at %d (%v) after the append sent before it failed", res.BaseOffset, rerr)
		}
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("append admitted before the ENOSPC: %v, want ErrDiskFull", err)
		}
		if p.LogEndOffset() != 5 {
			t.Fatalf("log end %d, want 5", p.LogEndOffset())
		}
	})
}
