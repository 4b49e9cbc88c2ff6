//go:build linux

package cpusched

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// threadPolicies maps every thread of the process to its policy.
func threadPolicies(t *testing.T) map[int]uint32 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint32{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited meanwhile
		}
		out[tid] = attr.Policy
	}
	return out
}

// startThreads makes the runtime start new threads: goroutines locked to
// their threads while others keep running need one each.
func startThreads(n int) (stop func()) {
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread() // held until exit: the thread then ends with it
			ready.Done()
			<-release
		}()
	}
	ready.Wait()
	return func() { close(release); done.Wait() }
}

func TestApplySetsEveryThreadAndTheirChildren(t *testing.T) {
	defer Apply(Normal) //nolint:errcheck // restore for the other tests
	stop := startThreads(4)
	defer stop()
	if err := Apply(Batch); err != nil {
		t.Fatal(err)
	}
	if got := Current(); got != Batch {
		t.Fatalf("Current() = %q after Apply(batch)", got)
	}
	before := threadPolicies(t)
	stop2 := startThreads(4) // started after Apply: inherit it
	defer stop2()
	after := threadPolicies(t)
	if len(after) <= len(before) {
		t.Fatalf("no new threads were started (%d before, %d after)", len(before), len(after))
	}
	for tid, pol := range after {
		if pol != unix.SCHED_BATCH {
			t.Errorf("thread %d has policy %d, want SCHED_BATCH (%d); new thread: %v", tid, pol, unix.SCHED_BATCH, before[tid] == 0)
		}
	}
	if err := Apply(Normal); err != nil {
		t.Fatal(err)
	}
	for tid, pol := range threadPolicies(t) {
		if pol != unix.SCHED_NORMAL {
			t.Errorf("thread %d has policy %d after Apply(normal)", tid, pol)
		}
	}
}

func TestApplyRefusesUnknownPolicy(t *testing.T) {
	if err := Apply("fifo"); err == nil {
		t.Fatal("Apply(fifo) succeeded; want an error naming the accepted policies")
	}
}
