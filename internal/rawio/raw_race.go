//go:build race

package rawio

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Read is read(2) (race build: through syscall.Read).
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errno(err)
}

// Write is write(2) (race build: through syscall.Write).
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errno(err)
}

// Writev writes the first buffer only (race build); callers loop over
// short writes.
func Writev(fd uintptr, _ []unix.Iovec, bufs [][]byte) (int, syscall.Errno) {
	return Write(fd, bufs[0])
}

// Pwritev is pwritev(2) (race build: through unix.Pwritev).
func Pwritev(fd int, _ []unix.Iovec, bufs [][]byte, off int64) (int, syscall.Errno) {
	n, err := unix.Pwritev(fd, bufs, off)
	return max(n, 0), errno(err)
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}

// PreadNowait is preadv2(2) with RWF_NOWAIT (race build: through
// unix.Preadv2).
func PreadNowait(fd int, p []byte, off int64) (int, syscall.Errno) {
	n, err := unix.Preadv2(fd, [][]byte{p}, off, unix.RWF_NOWAIT)
	return max(n, 0), errno(err)
}
