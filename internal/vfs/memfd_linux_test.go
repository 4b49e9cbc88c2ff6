package vfs

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A MemFS from NewMemFds behaves like NewMem through the File interface,
// and what the kernel writes through Fd is written but not durable until
// Synced reports the kernel's fdatasync: a crash drops it, keeps it after.
func TestMemFdsKernelWritesDurableOnlyWhenSynced(t *testing.T) {
	fs, err := NewMemFds()
	if err != nil {
		t.Skipf("no memfd: %v", err)
	}
	f := write(t, fs, "/a", "base", true)
	fs.SyncDir("/")
	if f.Fd() < 0 || !KernelFiles(fs) || !KernelFiles(Wrap(fs)) || KernelFiles(NewMem()) {
		t.Fatalf("fd %d, KernelFiles %v", f.Fd(), KernelFiles(fs))
	}
	// The kernel writes past the synced end: visible at once.
	if n, err := unix.Pwrite(f.Fd(), []byte("-ring"), 4); err != nil || n != 5 {
		t.Fatalf("pwrite: %d %v", n, err)
	}
	contents := func(fs *MemFS) string {
		t.Helper()
		g, err := fs.OpenFile("/a", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := g.Size()
		b := make([]byte, n)
		g.ReadAt(b, 0)
		return string(b)
	}
	if got := contents(fs); got != "base-ring" {
		t.Fatalf("read %q after the kernel's write", got)
	}
	crashed := fs.Crash(CrashOptions{})
	if got := contents(crashed); got != "base" {
		t.Fatalf("after a crash before the sync: %q, want the synced %q", got, "base")
	}
	if crashed.OpenFile("/b", os.O_RDWR|os.O_CREATE, 0o644); !crashed.fds {
		t.Fatal("the crashed FS lost its descriptors")
	}

	// The same again, with the sync reported (through an ErrorFS file).
	fs, _ = NewMemFds()
	efs := Wrap(fs)
	f = write(t, efs, "/a", "base", true)
	fs.SyncDir("/")
	unix.Pwrite(f.Fd(), []byte("-ring"), 4)
	if err := unix.Fdatasync(f.Fd()); err != nil {
		t.Fatal(err)
	}
	if err := Synced(f); err != nil {
		t.Fatal(err)
	}
	unix.Pwrite(f.Fd(), []byte("-late"), 9) // after the sync: lost
	if got := contents(fs.Crash(CrashOptions{})); got != "base-ring" {
		t.Fatalf("after a crash behind a reported sync: %q, want %q", got, "base-ring")
	}
	// The crashed machine's kernel syncs nothing any more.
	if err := Synced(f); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Synced after the crash: %v, want ErrCrashed", err)
	}
}
