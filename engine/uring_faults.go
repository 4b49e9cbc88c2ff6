package engine

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/internal/vfs"
)

// The io_uring path's fault seam. The ring bypasses the engine's FS, so
// when that FS is a vfs.ErrorFS (tests, --fault-injection) the owner
// consults its faults itself: once per group, for the group's write and
// (under FsyncAlways) its fsync, in faultHold; for interval and close
// flushes in fill. An injected error becomes the operation's completion
// result without reaching the kernel (a cancelled fsync behind a failed
// write, as the kernel does for a linked chain), applied at the next reap;
// an injected fsync delay holds the partition's next chain that long (the
// partition's acknowledgments wait, as behind a slow disk; other
// partitions go on).
//
// Crashes: every fdatasync the ring completes is reported to the FS with
// vfs.Synced (completed, flushCompleted). A crashable vfs.MemFS (NewMemFds)
// counts a ring write durable only then, and after its Crash Synced fails,
// which the owner treats as a failed fdatasync, so nothing is acknowledged
// past a simulated power cut, exactly as on the pwrite path.

// injectedCQE is a completion the fault seam made up.
type injectedCQE struct {
	ref opRef
	res int32
}

// faultHold consults the injected faults for p's unsent groups (once per
// group) and reports whether they must wait for an injected fsync delay.
// Owner only.
func (q *uringQueue) faultHold(pio *partIO) bool {
	now := time.Now()
	hold := false
	for _, g := range pio.groups[len(pio.groups)-pio.unsent:] {
		if !g.checked {
			g.checked = true
			path := g.seg.path(logSuffix)
			if _, partial, err := q.faults.CheckWrite(path); err != nil {
				g.writeErr, g.partial = errnoOf(err), partial
			}
			if g.sync || g.jrnl {
				// Under the journal the injected fdatasync fault of a
				// segment stands for its barrier, the journal write
				// (queueJournal).
				d, err := q.faults.Check(vfs.OpSync, path)
				if err != nil {
					g.syncErr = errnoOf(err)
				}
				if d > 0 {
					g.notBefore = now.Add(d)
					time.AfterFunc(d, q.kick)
				}
			}
		}
		hold = hold || now.Before(g.notBefore)
	}
	return hold
}

// kick wakes the owner from a timer (an injected delay or the journal's
// pacing ended) or when a checkpoint freed journal space, whether or not
// it is waiting: a kick while it runs ends its next wait at once, as an
// unread eventfd count did.
func (q *uringQueue) kick() {
	q.kicked.Store(true)
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.fdGone {
		q.signalFd()
	}
}

// errnoOf is the errno an injected error stands for; EIO unless it
// carries one.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	return syscall.EIO
}

// tearWrite is the result of an injected write failure: with
// Fault.Partial the first bytes of the group land in the file and the
// write completes short (what the kernel returns when a disk fills in the
// middle of a write), otherwise it fails with the errno. Owner only.
func (q *uringQueue) tearWrite(g *ioGroup, fd int) int32 {
	n := min(int64(g.partial), g.n-1)
	if n <= 0 {
		return -int32(g.writeErr)
	}
	done := int64(0)
	for _, b := range g.bufs {
		if done >= n {
			break
		}
		b = b[:min(int64(len(b)), n-done)]
		w, err := unix.Pwrite(fd, b, g.pos+done)
		if err != nil {
			break
		}
		done += int64(w)
		if w < len(b) {
			break
		}
	}
	if done == 0 {
		return -int32(g.writeErr)
	}
	return int32(done)
}
