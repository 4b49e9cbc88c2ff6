//go:build !race

package rawio

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read is read(2) as a raw system call.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

// Write is write(2) as a raw system call.
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), e
}

// Writev is writev(2) of iov (which describes bufs) as a raw system call.
func Writev(fd uintptr, iov []unix.Iovec, _ [][]byte) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	return int(n), e
}

// Pwritev is pwritev(2) of iov (which describes bufs) at off as a raw
// system call.
func Pwritev(fd int, iov []unix.Iovec, _ [][]byte, off int64) (int, syscall.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_PWRITEV, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)), uintptr(off), uintptr(uint64(off)>>32), 0)
	return int(n), e
}

// PreadNowait is preadv2(2) of one buffer at off with RWF_NOWAIT, as a raw
// system call: it never waits for the disk (EAGAIN when the range is not
// all in the page cache), so it may hold the P.
func PreadNowait(fd int, p []byte, off int64) (int, syscall.Errno) {
	iov := unix.Iovec{Base: unsafe.SliceData(p)}
	iov.SetLen(len(p))
	n, _, e := unix.RawSyscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), uintptr(uint64(off)>>32), unix.RWF_NOWAIT)
	return int(n), e
}
