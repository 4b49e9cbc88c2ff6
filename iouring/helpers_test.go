package iouring

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// needIOUring skips when the host has no io_uring, saying why.
func needIOUring(t testing.TB) Info {
	t.Helper()
	info, err := Probe()
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("io_uring unavailable on this host: %s", info.Reason)
		}
		t.Fatalf("Probe: %v", err)
	}
	return info
}

// newTestRing locks the test goroutine to its thread (SINGLE_ISSUER) and
// creates a ring closed at cleanup.
func newTestRing(t *testing.T, entries uint32, opts ...Option) *Ring {
	t.Helper()
	needIOUring(t)
	runtime.LockOSThread()
	r, err := New(entries, opts...)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if r.fd >= 0 {
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		runtime.UnlockOSThread()
	})
	return r
}

func tempFile(t testing.TB) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "data"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// reapN waits for and collects exactly n completions.
func reapN(t *testing.T, r *Ring, n int) []CQE {
	t.Helper()
	var out []CQE
	for len(out) < n {
		if r.CQReady() == 0 {
			if _, err := r.SubmitAndWait(1); err != nil && !errors.Is(err, ErrCQOverflow) {
				t.Fatalf("SubmitAndWait: %v", err)
			}
		}
		r.ForEachCQE(func(c CQE) { out = append(out, c) })
	}
	return out
}

func byUserData(cqes []CQE) map[uint64]CQE {
	m := make(map[uint64]CQE, len(cqes))
	for _, c := range cqes {
		m[c.UserData] = c
	}
	return m
}
