//go:build !race

package sockio

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RawRead is read(2) without the runtime's syscall bookkeeping (package
// comment). Use it only on a descriptor that never blocks.
func RawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

// RawWrite is write(2) without the runtime's syscall bookkeeping. Use it
// only on a descriptor that never blocks.
func RawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

// rawWritev is writev(2) of iov, likewise.
func rawWritev(fd uintptr, iov []unix.Iovec, _ [][]byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	return int(n), e
}
