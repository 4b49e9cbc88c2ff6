package engine

import (
	"testing"

	"github.com/ringlog/ringlog/internal/vfs"
)

// The fault, crash and disk tests run table-driven on both write paths:
// the engine's FS is a vfs.ErrorFS and/or a crashable vfs.MemFS, which the
// pwrite path calls and the io_uring owner consults (uringQueue.faults for
// injected errors and delays, vfs.Synced for what its fdatasyncs made
// durable; a MemFS from NewMemFds gives the ring real descriptors).

// forEachIOPath runs f as a subtest per write path ("sync", "uring"), or
// only the one RINGLOG_TEST_IO names. The uring subtest skips, saying why,
// where the kernel refuses io_uring, and fails there if RINGLOG_TEST_IO
// asked for uring.
func forEachIOPath(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range []string{"sync", "uring"} {
		if m := testIOMode(); m != "auto" && m != mode {
			continue
		}
		t.Run(mode, func(t *testing.T) {
			if mode == "uring" {
				wantIOPath(t) // fails when RINGLOG_TEST_IO=uring cannot be had
				needUring(t)
			}
			f(t, mode)
		})
	}
}

// ioConfig is testConfig on write path mode.
func ioConfig(dir, mode string) Config {
	cfg := testConfig(dir)
	cfg.IOMode = mode
	return cfg
}

// crashableFS is a MemFS the write path mode can use: with memfd
// descriptors for the ring.
func crashableFS(t *testing.T, mode string) *vfs.MemFS {
	t.Helper()
	if mode == "sync" {
		return vfs.NewMem()
	}
	mem, err := vfs.NewMemFds()
	if err != nil {
		t.Skipf("the io_uring path needs descriptors and this host has no memfd: %v", err)
	}
	return mem
}

// checkIOPath fails unless e runs on write path mode.
func checkIOPath(t *testing.T, e *Engine, mode string) {
	t.Helper()
	if e.IOPath() != mode {
		e.Close()
		t.Fatalf("write path %q (%s), want %q", e.IOPath(), e.IOReason(), mode)
	}
}
