package iouring

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// All errno-to-error mapping of the package lives in this file.

var (
	// ErrUnavailable is matched (errors.Is) by every error saying io_uring
	// cannot be used on this host; callers fall back to synchronous I/O.
	ErrUnavailable = errors.New("iouring: io_uring unavailable")
	// ErrCQOverflow: the kernel holds overflowed completions (EBUSY from
	// io_uring_enter). Reap completions, then retry the submit.
	ErrCQOverflow = errors.New("iouring: completion queue overflow; reap and retry")
	// ErrWrongThread: a SINGLE_ISSUER ring was entered from a thread other
	// than the one that created it (EEXIST).
	ErrWrongThread = errors.New("iouring: ring used from a thread other than its creator (SINGLE_ISSUER)")
	// ErrClosed is returned for use after Close.
	ErrClosed = errors.New("iouring: closed")
)

// UnavailableError says why io_uring could not be set up.
type UnavailableError struct {
	Errno  syscall.Errno
	Reason string
}

func (e *UnavailableError) Error() string {
	return "iouring: io_uring unavailable: " + e.Reason + " (" + e.Errno.Error() + ")"
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap exposes the errno.
func (e *UnavailableError) Unwrap() error { return e.Errno }

// OpError is a failed completion: the negative res of a CQE as an errno.
// errors.Is(err, syscall.ECANCELED) etc. work through Unwrap.
type OpError struct {
	Op    Opcode
	Errno syscall.Errno
}

func (e *OpError) Error() string { return "iouring: " + e.Op.String() + ": " + e.Errno.Error() }

// Unwrap exposes the errno.
func (e *OpError) Unwrap() error { return e.Errno }

// resultError turns a CQE res into an error; nil for res >= 0.
func resultError(op Opcode, res int32) error {
	if res >= 0 {
		return nil
	}
	return &OpError{Op: op, Errno: syscall.Errno(-res)}
}

// setupError maps an io_uring_setup errno. EPERM/EACCES/ENOSYS mean "this host
// will not give us io_uring" and become UnavailableError; the rest are bugs or
// resource limits and stay plain.
func setupError(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("iouring: setup: %w", err)
	}
	switch errno {
	case syscall.EPERM, syscall.EACCES:
		reason := "denied by seccomp filter or kernel.io_uring_disabled"
		if v, rerr := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); rerr == nil {
			switch strings.TrimSpace(string(v)) {
			case "1":
				reason = "kernel.io_uring_disabled=1 (only members of kernel.io_uring_group may use it)"
			case "2":
				reason = "kernel.io_uring_disabled=2"
			default:
				reason = "denied (kernel.io_uring_disabled=0, so most likely a seccomp filter, e.g. a container runtime's default profile)"
			}
		}
		return &UnavailableError{Errno: errno, Reason: reason}
	case syscall.ENOSYS:
		return &UnavailableError{Errno: errno, Reason: "syscall not implemented (kernel without CONFIG_IO_URING, gVisor, or seccomp returning ENOSYS)"}
	case syscall.ENOMEM:
		return fmt.Errorf("iouring: setup: %w (RLIMIT_MEMLOCK too low on kernels before 5.12?)", errno)
	}
	return fmt.Errorf("iouring: setup: %w", errno)
}

// enterError maps an io_uring_enter errno (EINTR is retried by the caller and
// never reaches here). EPERM/ENOSYS are also possible here when a seccomp
// profile allows setup but filters enter.
func enterError(errno syscall.Errno) error {
	switch errno {
	case syscall.EBUSY:
		return fmt.Errorf("%w: %w", ErrCQOverflow, errno)
	case syscall.EEXIST:
		return fmt.Errorf("%w: %w", ErrWrongThread, errno)
	case syscall.EPERM, syscall.ENOSYS:
		return &UnavailableError{Errno: errno, Reason: "io_uring_enter denied (seccomp)"}
	}
	return fmt.Errorf("iouring: enter: %w", errno)
}
