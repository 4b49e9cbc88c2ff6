//go:build race

package sockio

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Under the race detector the reads and writes go through package
// syscall, whose Read and Write tell the detector that bytes written to
// a descriptor happen before they are read back: with raw system calls it
// reported the kernel's own hand-over of a message as a data race.

// RawRead is read(2) (race build: through syscall.Read).
func RawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errno(err)
}

// RawWrite is write(2) (race build: through syscall.Write).
func RawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errno(err)
}

// rawWritev writes the first buffer only (race build): the caller loops.
func rawWritev(fd uintptr, _ []unix.Iovec, bufs [][]byte) (int, syscall.Errno) {
	return RawWrite(fd, bufs[0])
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
