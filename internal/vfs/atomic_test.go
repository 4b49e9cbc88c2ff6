package vfs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func readAll(t *testing.T, fs FS, name string) (string, bool) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	f.ReadAt(b, 0)
	return string(b), true
}

// memDir returns a MemFS whose /d exists durably.
func memDir(t *testing.T) *MemFS {
	t.Helper()
	fs := NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	fs.SyncDir("/")
	return fs
}

// A new file written by WriteFileAtomic is there after a power cut that
// comes right after the call: contents and directory entry were synced.
func TestWriteFileAtomicSurvivesCrash(t *testing.T) {
	fs := memDir(t)
	if err := WriteFileAtomic(fs, "/d/f", []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := fs.Crash(CrashOptions{TornTail: true})
	if got, ok := readAll(t, after, "/d/f"); !ok || got != "v1" {
		t.Fatalf("after crash: %q present %v", got, ok)
	}
	if names, _ := after.ReadDir("/d"); len(names) != 1 {
		t.Fatalf("entries %v", names)
	}
}

// A failure at any step of a replacement, followed by a power cut, leaves
// the old contents or the new ones, never a mix, an empty file or none;
// a call that returned nil always leaves the new ones; a call that failed
// before its rename leaves no temporary file behind.
func TestWriteFileAtomicFaultAtEachStep(t *testing.T) {
	ops := []Op{OpOpen, OpWrite, OpSync, OpClose, OpRename, OpSyncDir}
	cases := 0
	for _, op := range ops {
		for skip := 0; ; skip++ {
			mem := memDir(t)
			if err := WriteFileAtomic(mem, "/d/f", []byte("old contents"), 0o644); err != nil {
				t.Fatal(err)
			}
			efs := Wrap(mem)
			efs.Inject(Fault{Op: op, PathContains: "/d", Skip: skip, Count: 1})
			err := WriteFileAtomic(efs, "/d/f", []byte("new"), 0o644)
			if efs.Fired() == 0 {
				if err != nil {
					t.Fatalf("op %d skip %d: no fault fired but %v", op, skip, err)
				}
				break
			}
			cases++
			name := fmt.Sprintf("op %d skip %d", op, skip)
			live, _ := readAll(t, mem, "/d/f")
			if err == nil && live != "new" || err != nil && live != "old contents" && !errors.Is(err, ErrDirSync) {
				t.Fatalf("%s: err %v, file %q", name, err, live)
			}
			if names, _ := mem.ReadDir("/d"); len(names) != 1 {
				t.Fatalf("%s: entries %v after %v", name, names, err)
			}
			for _, torn := range []bool{false, true} {
				after := mem.Crash(CrashOptions{TornTail: torn, Seed: int64(skip)})
				got, ok := readAll(t, after, "/d/f")
				switch {
				case !ok || got != "old contents" && got != "new":
					t.Fatalf("%s: after crash %q present %v", name, got, ok)
				case err == nil && got != "new":
					t.Fatalf("%s: succeeded, but the crash brought back %q", name, got)
				}
			}
		}
	}
	if cases < len(ops) {
		t.Fatalf("only %d failure points", cases)
	}
}

// ReplaceFile syncs the contents but not the directory: a new name may be
// lost in a crash (callers rebuild such files), a replaced one is old or new.
func TestReplaceFileSkipsDirSync(t *testing.T) {
	fs := memDir(t)
	efs := Wrap(fs)
	if err := ReplaceFile(efs, "/d/f", []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := efs.Count(OpSyncDir); n != 0 {
		t.Fatalf("%d directory syncs", n)
	}
	if got, _ := readAll(t, fs, "/d/f"); got != "v1" {
		t.Fatalf("live %q", got)
	}
	if _, ok := readAll(t, fs.Crash(CrashOptions{}), "/d/f"); ok {
		t.Fatal("unsynced directory entry survived the crash")
	}
}

func TestAtomicFileStreaming(t *testing.T) {
	fs := memDir(t)
	WriteFileAtomic(fs, "/d/seg.log", []byte("old segment"), 0o644)
	a, err := CreateAtomic(fs, "/d/seg.log", "/d/seg.log.cleaned"+TempSuffix, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f := a.File()
	f.WriteAt([]byte("new "), 0)
	f.WriteAt([]byte("segment"), 4)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, fs, "/d/seg.log"); got != "old segment" {
		t.Fatalf("before commit %q", got)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	a.Abort() // after a commit: nothing
	// The caller keeps the open file, now at the final path.
	b := make([]byte, 11)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "new segment" {
		t.Fatalf("read through the kept file: %q %v", b, err)
	}
	f.Close()
	after := fs.Crash(CrashOptions{})
	if got, _ := readAll(t, after, "/d/seg.log"); got != "new segment" {
		t.Fatalf("after crash %q", got)
	}
	if names, _ := after.ReadDir("/d"); len(names) != 1 {
		t.Fatalf("entries %v", names)
	}

	// Abort removes the temporary file and leaves the target alone.
	fs = memDir(t)
	a, _ = CreateAtomic(fs, "/d/x", "", 0o644)
	a.File().WriteAt([]byte("partial"), 0)
	a.Abort()
	a.Abort()
	if names, _ := fs.ReadDir("/d"); len(names) != 0 {
		t.Fatalf("after abort %v", names)
	}
	if err := a.Commit(); err == nil {
		t.Fatal("commit after abort")
	}

	for _, tmp := range []string{"/other/x" + TempSuffix, "/d/x.partial"} {
		if _, err := CreateAtomic(fs, "/d/x", tmp, 0o644); err == nil || !strings.Contains(err.Error(), "temporary name") {
			t.Fatalf("temporary name %s accepted: %v", tmp, err)
		}
	}
}

// A directory sync failing after the rename is reported as ErrDirSync: the
// new file is in place and the caller still holds it.
func TestAtomicFileDirSyncError(t *testing.T) {
	mem := memDir(t)
	efs := Wrap(mem)
	efs.Inject(Fault{Op: OpSyncDir, Count: 1})
	a, _ := CreateAtomic(efs, "/d/x", "", 0o644)
	a.File().WriteAt([]byte("data"), 0)
	if err := a.Commit(); !errors.Is(err, ErrDirSync) || !errors.Is(err, ErrInjected) {
		t.Fatalf("commit: %v", err)
	}
	if got, _ := readAll(t, mem, "/d/x"); got != "data" {
		t.Fatalf("live %q", got)
	}
	a.Abort() // closes the kept file, removes nothing
	if got, _ := readAll(t, mem, "/d/x"); got != "data" {
		t.Fatalf("after abort %q", got)
	}
}

func TestReadFileLimit(t *testing.T) {
	fs := memDir(t)
	WriteFileAtomic(fs, "/d/f", []byte("twelve bytes"), 0o644)
	if b, err := ReadFile(fs, "/d/f", 12); err != nil || string(b) != "twelve bytes" {
		t.Fatalf("%q %v", b, err)
	}
	if b, err := ReadFile(fs, "/d/f", 0); err != nil || len(b) != 12 {
		t.Fatalf("no limit: %q %v", b, err)
	}
	if _, err := ReadFile(fs, "/d/f", 11); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := ReadFile(fs, "/d/missing", 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
