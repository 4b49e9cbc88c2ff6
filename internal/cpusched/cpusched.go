// Package cpusched sets the Linux scheduling policy of a whole process.
//
// A broker's threads wake each other and their peers on every request: a
// socket write or an eventfd signal makes the reader runnable. Under the
// kernel's default policy (SCHED_OTHER) a task woken on a busy CPU
// preempts the one that woke it, which is then switched back in a moment
// later to finish the few microseconds of work it had left; on a shared
// or virtualized machine each such switch is an exit to the hypervisor.
// SCHED_BATCH keeps the same fair share of the CPU but lets the waker run
// on until it sleeps or its slice ends, so a woken broker thread waits for
// the end of a short stretch of work instead of interrupting it.
package cpusched

import "fmt"

// The policies Apply accepts, by the name the serve flag uses.
const (
	Normal = "normal" // SCHED_OTHER, the kernel's default
	Batch  = "batch"  // SCHED_BATCH: no preemption on wake-up
)

// Check refuses a name that is not one of the policies.
func Check(name string) error {
	if name != Normal && name != Batch {
		return fmt.Errorf("scheduling policy %q: want %s or %s", name, Batch, Normal)
	}
	return nil
}
