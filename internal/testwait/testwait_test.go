package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Until returns as soon as cond holds, calling it from the caller's
// goroutine; it is true even when cond came true only on its last call.
func TestUntilReturnsWhenTrue(t *testing.T) {
	t.Parallel()
	calls := 0
	start := time.Now()
	if !Until(10*time.Second, func() bool { calls++; return calls == 5 }) {
		t.Fatal("Until false for a condition that came true")
	}
	if calls != 5 {
		t.Fatalf("%d calls, want 5 (it stops at the first true)", calls)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v for five short polls", d)
	}
	// True from another goroutine's event.
	var set atomic.Bool
	go set.Store(true)
	if !Until(10*time.Second, set.Load) {
		t.Fatal("flag set by another goroutine not seen")
	}
}

// Until gives up after its limit, not before, with one last look.
func TestUntilGivesUpAfterLimit(t *testing.T) {
	t.Parallel()
	const limit = 60 * time.Millisecond
	start := time.Now()
	var last time.Time
	if Until(limit, func() bool { last = time.Now(); return false }) {
		t.Fatal("Until true for a condition never true")
	}
	if d := time.Since(start); d < limit {
		t.Fatalf("gave up after %v, before its %v limit", d, limit)
	}
	if last.Sub(start) < limit {
		t.Fatalf("last look %v after the start, before the %v limit", last.Sub(start), limit)
	}
}

// fakeTB records a failure instead of ending the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

// For fails its test, naming what it waited for, only when the condition
// did not come true.
func TestFor(t *testing.T) {
	t.Parallel()
	ok := &fakeTB{TB: t}
	For(ok, time.Second, "nothing", func() bool { return true })
	if ok.failed != "" {
		t.Fatalf("failed on a true condition: %s", ok.failed)
	}
	bad := &fakeTB{TB: t}
	For(bad, 10*time.Millisecond, "the moon", func() bool { return false })
	if bad.failed != "timed out after 10ms waiting for the moon" {
		t.Fatalf("failure %q", bad.failed)
	}
}

// Holds looks for the whole time while cond holds, and stops at the first
// look where it does not.
func TestHolds(t *testing.T) {
	t.Parallel()
	const d = 50 * time.Millisecond
	start := time.Now()
	calls := 0
	if !Holds(d, func() bool { calls++; return true }) {
		t.Fatal("Holds false for a condition always true")
	}
	if took := time.Since(start); took < d {
		t.Fatalf("returned after %v, before %v", took, d)
	}
	if calls < 2 {
		t.Fatalf("%d looks in %v", calls, d)
	}
	calls = 0
	start = time.Now()
	if Holds(10*time.Second, func() bool { calls++; return calls < 3 }) {
		t.Fatal("Holds true for a condition that broke")
	}
	if calls != 3 {
		t.Fatalf("%d looks, want 3 (it stops at the first false)", calls)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v to see the break", took)
	}
}
