package iouring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Prep functions fill an SQE obtained from GetSQE. They store raw addresses:
// the caller keeps the memory alive and pinned until the completion arrives.

// SetFlags sets IOSQE_* flags, e.g. SQEIOLink to chain the next SQE.
func (s *SQE) SetFlags(flags uint8) { s.flags |= flags }

// SetUserData sets the value the completion carries back.
func (s *SQE) SetUserData(v uint64) { s.userData = v }

// Opcode reports the prepared operation.
func (s *SQE) Opcode() Opcode { return Opcode(s.opcode) }

func bufAddr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

func prepRW(s *SQE, op Opcode, fd int, addr uint64, n uint32, off uint64) {
	s.opcode = uint8(op)
	s.fd = int32(fd)
	s.addr = addr
	s.len = n
	s.off = off
}

// PrepNop prepares a no-op: it completes with res 0.
func PrepNop(s *SQE) { s.opcode = uint8(OpNop) }

// PrepWrite prepares pwrite(fd, buf, off).
func PrepWrite(s *SQE, fd int, buf []byte, off uint64) {
	prepRW(s, OpWrite, fd, bufAddr(buf), uint32(len(buf)), off)
}

// PrepRead prepares pread(fd, buf, off).
func PrepRead(s *SQE, fd int, buf []byte, off uint64) {
	prepRW(s, OpRead, fd, bufAddr(buf), uint32(len(buf)), off)
}

func iovAddr(iov []unix.Iovec) uint64 {
	if len(iov) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&iov[0])))
}

// PrepWritev prepares pwritev(fd, iov, off). The iovec array itself must
// also stay valid until completion (without FEAT_SUBMIT_STABLE, until the
// SQE is consumed at least).
func PrepWritev(s *SQE, fd int, iov []unix.Iovec, off uint64) {
	prepRW(s, OpWritev, fd, iovAddr(iov), uint32(len(iov)), off)
}

// PrepReadv prepares preadv(fd, iov, off).
func PrepReadv(s *SQE, fd int, iov []unix.Iovec, off uint64) {
	prepRW(s, OpReadv, fd, iovAddr(iov), uint32(len(iov)), off)
}

// PrepFsync prepares fsync(fd), or fdatasync(fd) when datasync is set. It
// is not ordered after other in-flight writes: link it behind them.
func PrepFsync(s *SQE, fd int, datasync bool) {
	prepRW(s, OpFsync, fd, 0, 0, 0)
	if datasync {
		s.opFlags = FsyncDatasync
	}
}

// RWFDsync is RWF_DSYNC: a write with it completes only once its data is
// durable, as if followed by fdatasync of the range.
const RWFDsync = unix.RWF_DSYNC

// SetRWFlags sets a read or write's RWF_* flags (preadv2/pwritev2's).
func (s *SQE) SetRWFlags(flags uint32) { s.opFlags = flags }
