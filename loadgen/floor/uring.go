//go:build linux

package floor

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/iouring"
)

// uringLog writes the log through an io_uring the way the broker's
// storage engine does (engine/uring.go): the write is submitted without
// waiting, the kernel signals an eventfd as it posts the completion, and
// the node parks on that eventfd in the netpoller. The ring is set up with
// SUBMIT_ALL only, as the engine's is, since a goroutine that is not
// locked to a thread cannot use SINGLE_ISSUER or DEFER_TASKRUN.
type uringLog struct {
	lg      *logFile
	ring    *iouring.Ring
	evf     *os.File
	evrc    syscall.RawConn
	ready   func(uintptr) bool // wait's callback, bound once
	pending bool               // a write is in the kernel
}

func newUringLog(lg *logFile) (*uringLog, error) {
	ring, err := iouring.New(4, iouring.WithSetupFlags(iouring.SetupSubmitAll))
	if err != nil {
		return nil, fmt.Errorf("floor node: io_uring: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("floor node: eventfd: %w", err)
	}
	u := &uringLog{lg: lg, ring: ring, evf: os.NewFile(uintptr(efd), "floor-eventfd")}
	if err := ring.RegisterEventfd(efd); err != nil {
		u.close()
		return nil, fmt.Errorf("floor node: register eventfd: %w", err)
	}
	rc, err := u.evf.SyscallConn()
	if err != nil {
		u.close()
		return nil, err
	}
	u.evrc = rc
	u.ready = func(uintptr) bool { return u.ring.CQReady() > 0 }
	return u, nil
}

// start takes the next slot for p and submits its write. The buffer
// and its iovec belong to the log for the node's whole life, so nothing
// the kernel holds can be freed or reused before wait reaps the write.
func (u *uringLog) start(p []byte) error {
	if u.pending {
		return errors.New("floor node: write started before the previous one was reaped")
	}
	lg := u.lg
	sqe := u.ring.GetSQE()
	if sqe == nil {
		return errors.New("floor node: io_uring submission queue full")
	}
	iouring.PrepWritev(sqe, lg.fd, lg.iov, uint64(lg.take(p)*int64(len(lg.buf))))
	if _, err := u.ring.Submit(); err != nil {
		return fmt.Errorf("floor node: submit: %w", err)
	}
	u.pending = true
	return nil
}

// wait reaps the write, parking on the eventfd until its completion is
// posted. As the engine does (uringQueue.waitCQ), it never reads the
// eventfd: the netpoller's edge ends the park, and the check looks at the
// CQ, which costs no system call.
func (u *uringLog) wait() error {
	if !u.pending {
		return nil
	}
	if err := u.evrc.Read(u.ready); err != nil {
		return fmt.Errorf("floor node: wait on eventfd: %w", err)
	}
	cqe, _ := u.ring.PeekCQE()
	u.ring.CQAdvance(1)
	u.pending = false
	switch {
	case cqe.Res < 0:
		return fmt.Errorf("floor node: write: %w", syscall.Errno(-cqe.Res))
	case int(cqe.Res) != len(u.lg.buf):
		return fmt.Errorf("floor node: short write %d of %d", cqe.Res, len(u.lg.buf))
	}
	return nil
}

// close waits for a write still in the kernel before the ring goes, so
// the kernel never writes from a buffer the process no longer holds.
func (u *uringLog) close() {
	if u.pending {
		u.ring.SubmitAndWait(1)
	}
	u.ring.Close()
	u.evf.Close()
}

// UringUnavailable says why ModeUring cannot run here, or "" when it can.
func UringUnavailable() string {
	if info, _ := iouring.Probe(); !info.Available {
		return info.Reason
	}
	return ""
}
