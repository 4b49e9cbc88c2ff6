package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// newMemFd makes an anonymous in-memory kernel file (memfd_create), closed
// when the returned File is collected.
func newMemFd(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate("ringlog-vfs", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
