package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/internal/rawio"
	"github.com/ringlog/ringlog/iouring"
)

// ckRing runs a journal checkpoint's fdatasyncs and its slot write on an
// io_uring of their own, and waits for them on the netpoller.
//
// Those calls block for milliseconds, so through package syscall each
// one enters the runtime's "in a system call" state: that wakes the
// sysmon thread, which hands the broker's P to another thread and then
// polls every 20 µs for a millisecond or more. At 20k msg/s a broker
// checkpoints 20 times a second, and those wake-ups were a third of its
// context switches (BENCHMARKS.md §28). On the ring the kernel's io-wq
// workers block instead, the checkpoint goroutine parks on an eventfd,
// and the runtime sees no system call at all.
//
// One checkpoint at a time uses it (journal.ckMu).
type ckRing struct {
	ring *iouring.Ring
	evf  *os.File
	evr  *rawio.Reader
	ops  atomic.Int64 // operations completed, for tests and Stats
}

// ckRingEntries bounds the fdatasyncs in the kernel at once, as
// checkpointSyncers does for the goroutine fallback.
const ckRingEntries = 64

func newCkRing() (*ckRing, error) {
	ring, err := iouring.New(ckRingEntries, iouring.WithSetupFlags(iouring.SetupSubmitAll))
	if err != nil {
		return nil, err
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := ring.RegisterEventfd(fd); err != nil {
		unix.Close(fd)
		ring.Close()
		return nil, err
	}
	// Non-blocking, so os.NewFile makes it pollable.
	evf := os.NewFile(uintptr(fd), "checkpoint-eventfd")
	rc, err := evf.SyscallConn()
	if err != nil {
		evf.Close()
		ring.Close()
		return nil, err
	}
	return &ckRing{ring: ring, evf: evf, evr: rawio.NewReader(rc)}, nil
}

func (c *ckRing) close() {
	c.ring.Close()
	c.evf.Close()
}

// ckOp is one operation: an fdatasync of fd, or with buf a write of buf
// at off linked to an fdatasync of fd.
type ckOp struct {
	fd  int
	buf []byte
	off int64
	err error
}

// run issues ops, at most ckRingEntries SQEs in the kernel at once, and
// returns when all completed; each op's err says how it went. An error
// of the ring itself is returned: the caller then does what is left with
// system calls.
func (c *ckRing) run(ops []ckOp) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	type slot struct {
		op   int
		sync bool
	}
	var slots []slot // user data indexes it
	next, inflight := 0, 0
	for next < len(ops) || inflight > 0 {
		for next < len(ops) && c.ring.SQSpace() >= 2 && inflight+2 <= ckRingEntries {
			op := &ops[next]
			if op.buf != nil {
				pin.Pin(&op.buf[0])
				sqe := c.ring.GetSQE()
				iouring.PrepWrite(sqe, op.fd, op.buf, uint64(op.off))
				sqe.SetFlags(iouring.SQEIOLink)
				sqe.SetUserData(uint64(len(slots)))
				slots = append(slots, slot{op: next})
				inflight++
			}
			sqe := c.ring.GetSQE()
			iouring.PrepFsync(sqe, op.fd, true)
			sqe.SetUserData(uint64(len(slots)))
			slots = append(slots, slot{op: next, sync: true})
			inflight++
			next++
		}
		if _, err := c.ring.Submit(); err != nil && !errors.Is(err, iouring.ErrCQOverflow) {
			return err
		}
		if c.ring.CQReady() == 0 {
			var b [8]byte
			if _, err := c.evr.Read(b[:]); err != nil {
				return fmt.Errorf("read eventfd: %w", err)
			}
		}
		c.ring.ForEachCQE(func(cqe iouring.CQE) {
			inflight--
			s := slots[cqe.UserData]
			op := &ops[s.op]
			if s.sync {
				c.ops.Add(1)
			}
			var err error
			switch {
			case cqe.Res == -int32(syscall.ECANCELED):
				// Behind a failed write, which says what went wrong.
			case cqe.Res < 0:
				err = syscall.Errno(-cqe.Res)
			case !s.sync && int(cqe.Res) != len(op.buf):
				err = fmt.Errorf("short write %d of %d", cqe.Res, len(op.buf))
			}
			if err != nil && op.err == nil {
				what := "fdatasync"
				if !s.sync {
					what = "write"
				}
				op.err = fmt.Errorf("%s: %w", what, err)
			}
		})
	}
	return nil
}
