package vfs

import (
	"errors"
	"os"
	"testing"
)

func write(t *testing.T, fs FS, name, data string, sync bool) File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := f.Size()
	f.WriteAt([]byte(data), n)
	if sync {
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestMemCrashKeepsOnlySynced(t *testing.T) {
	fs := NewMem()
	fs.MkdirAll("/d", 0o755)
	fs.SyncDir("/")
	f := write(t, fs, "/d/a", "durable", true)
	fs.SyncDir("/d")
	f.WriteAt([]byte("-lost"), 7)
	write(t, fs, "/d/b", "unsynced dir entry", true) // file synced, dir not
	after := fs.Crash(CrashOptions{})
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("old handle after crash: %v", err)
	}
	names, _ := after.ReadDir("/d")
	if len(names) != 1 || names[0] != "a" {
		t.Fatalf("entries after crash %v", names)
	}
	g, _ := after.OpenFile("/d/a", os.O_RDONLY, 0)
	n, _ := g.Size()
	if n != 7 {
		t.Fatalf("size after crash %d, want 7", n)
	}
}

func TestMemTornTailIsDeterministicPrefix(t *testing.T) {
	sizes := map[int64]bool{}
	for seed := int64(0); seed < 20; seed++ {
		run := func() (int64, string) {
			fs := NewMem()
			write(t, fs, "/a", "base", true)
			fs.SyncDir("/")
			f := write(t, fs, "/a", "0123456789", false)
			_ = f
			after := fs.Crash(CrashOptions{TornTail: true, Seed: seed})
			g, _ := after.OpenFile("/a", os.O_RDONLY, 0)
			n, _ := g.Size()
			b := make([]byte, n)
			g.ReadAt(b, 0)
			return n, string(b)
		}
		n1, s1 := run()
		n2, s2 := run()
		if n1 != n2 || s1 != s2 || s1 != "base0123456789"[:n1] {
			t.Fatalf("seed %d: %q then %q", seed, s1, s2)
		}
		sizes[n1] = true
	}
	if len(sizes) < 3 {
		t.Fatalf("torn lengths not random: %v", sizes)
	}
}

func TestErrorFSInjectsOnNth(t *testing.T) {
	efs := Wrap(Default)
	dir := t.TempDir()
	efs.Inject(Fault{Op: OpSync, PathContains: ".log", Skip: 1, Count: 1})
	f := write(t, efs, dir+"/x.log", "a", true) // first sync passes
	if err := f.Datasync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("second sync: %v", err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatalf("third sync: %v", err)
	}
	if f.Fd() < 0 || efs.Count(OpSync) != 3 || efs.Fired() != 1 {
		t.Fatalf("fd %d, count %d, fired %d", f.Fd(), efs.Count(OpSync), efs.Fired())
	}
	f.Close()
}

// A file synced into a directory whose own entry was never synced is lost
// with the directory.
func TestMemCrashDropsChildrenOfLostDir(t *testing.T) {
	fs := NewMem()
	fs.MkdirAll("/a/b", 0o755)
	fs.SyncDir("/") // /a durable, /a/b not
	write(t, fs, "/a/b/f", "synced", true).Close()
	fs.SyncDir("/a/b")
	after := fs.Crash(CrashOptions{})
	if _, err := after.Stat("/a/b/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file under a lost directory: %v", err)
	}
	if names, _ := after.ReadDir("/a"); len(names) != 0 {
		t.Fatalf("/a after crash: %v", names)
	}
}
