//go:build linux

package cpusched

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

func policyOf(name string) (uint32, error) {
	if err := Check(name); err != nil {
		return 0, err
	}
	if name == Batch {
		return unix.SCHED_BATCH, nil
	}
	return unix.SCHED_NORMAL, nil
}

// Apply sets the named policy on every thread of the process, keeping each
// thread's nice value. A thread inherits its creator's policy, so the
// threads the Go runtime starts later get it too; a pass that finds a
// thread started meanwhile by one not yet set runs again.
func Apply(name string) error {
	pol, err := policyOf(name)
	if err != nil {
		return err
	}
	for pass := 0; pass < 10; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		changed := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			attr, err := unix.SchedGetAttr(tid, 0)
			if err == unix.ESRCH {
				continue // the thread exited
			}
			if err != nil {
				return fmt.Errorf("sched_getattr thread %d: %w", tid, err)
			}
			if attr.Policy == pol {
				continue
			}
			set := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: pol, Nice: attr.Nice}
			if err := unix.SchedSetAttr(tid, &set, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("sched_setattr thread %d to %s: %w", tid, name, err)
			}
			changed++
		}
		if changed == 0 {
			return nil
		}
	}
	return fmt.Errorf("scheduling policy %s: threads kept appearing unset", name)
}

// Current names the calling thread's policy (Normal, Batch, or the
// kernel's number for another), "" when it cannot be read.
func Current() string {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return ""
	}
	switch attr.Policy {
	case unix.SCHED_NORMAL:
		return Normal
	case unix.SCHED_BATCH:
		return Batch
	}
	return "policy " + strconv.Itoa(int(attr.Policy))
}
