package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ringlog/ringlog/internal/vfs"
)

// TestCkRingRun: fdatasyncs and a linked write+fdatasync complete with
// their own results, and a bad descriptor fails only its own operation.
func TestCkRingRun(t *testing.T) {
	needUring(t)
	c, err := newCkRing()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	dir := t.TempDir()
	var ops []ckOp
	var files []*os.File
	for i := 0; i < 3*ckRingEntries; i++ { // more than fit in the kernel at once
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
		if _, err := f.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, ckOp{fd: int(f.Fd())})
	}
	slot := []byte("slot-bytes")
	ops = append(ops, ckOp{fd: int(files[0].Fd()), buf: slot, off: 100})
	bad, err := os.Create(filepath.Join(dir, "bad"))
	if err != nil {
		t.Fatal(err)
	}
	badFd := int(bad.Fd())
	bad.Close() // the descriptor number is now invalid
	ops = append(ops, ckOp{fd: badFd})
	if err := c.run(ops); err != nil {
		t.Fatal(err)
	}
	for i, op := range ops[:len(ops)-1] {
		if op.err != nil {
			t.Fatalf("op %d: %v", i, op.err)
		}
	}
	if err := ops[len(ops)-1].err; !errors.Is(err, syscall.EBADF) {
		t.Fatalf("closed descriptor: %v, want EBADF", err)
	}
	got := make([]byte, len(slot))
	if _, err := files[0].ReadAt(got, 100); err != nil || string(got) != string(slot) {
		t.Fatalf("linked write: %q %v", got, err)
	}
	if n := c.ops.Load(); n != int64(len(ops)) {
		t.Fatalf("%d fdatasyncs completed, want %d", n, len(ops))
	}
}

// TestCheckpointOnRing: on the ring path and the OS file system the
// journal's checkpoints sync segments and write the slot on the
// checkpoint ring, and what they made durable reads back after a reopen.
func TestCheckpointOnRing(t *testing.T) {
	needUring(t)
	cfg := testConfig(t.TempDir())
	cfg.IOMode = "uring"
	cfg.FS = vfs.Default
	e := mustOpen(t, cfg)
	checkIOPath(t, e, "uring")
	if e.j == nil || e.j.ck == nil {
		e.Close()
		t.Fatal("no checkpoint ring on the ring path")
	}
	if _, err := e.CreateTopic("ck", 3, nil); err != nil {
		t.Fatal(err)
	}
	want := map[int32][]string{}
	for i := 0; i < 30; i++ {
		part := int32(i % 3)
		v := fmt.Sprintf("v%d", i)
		appendWait(t, mustPartition(t, e, "ck", part), valuesBatch(v, 1))
		want[part] = append(want[part], v+"/0")
	}
	before := e.j.ck.ops.Load()
	if err := e.checkpointJournal(); err != nil {
		t.Fatal(err)
	}
	// Three dirty segments and the slot.
	if n := e.j.ck.ops.Load() - before; n < 4 {
		t.Fatalf("%d operations on the checkpoint ring, want at least 4", n)
	}
	e.j.mu.Lock()
	moved := e.j.start == e.j.settled
	e.j.mu.Unlock()
	if !moved {
		t.Fatal("the checkpoint did not move the journal's start")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := mustOpen(t, cfg)
	defer e2.Close()
	for part := int32(0); part < 3; part++ {
		checkValues(t, mustPartition(t, e2, "ck", part), want[part])
	}
}
