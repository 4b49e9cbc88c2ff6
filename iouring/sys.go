package iouring

import (
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Values below are transcribed from include/uapi/linux/io_uring.h. x/sys/unix
// only defines the syscall numbers, so the structs and flags live here.

// Setup flags (io_uring_params.flags).
const (
	SetupIOPoll       uint32 = 1 << 0
	SetupSQPoll       uint32 = 1 << 1
	SetupSQAff        uint32 = 1 << 2
	SetupCQSize       uint32 = 1 << 3
	SetupClamp        uint32 = 1 << 4
	SetupAttachWQ     uint32 = 1 << 5
	SetupRDisabled    uint32 = 1 << 6
	SetupSubmitAll    uint32 = 1 << 7
	SetupCoopTaskrun  uint32 = 1 << 8
	SetupTaskrunFlag  uint32 = 1 << 9
	SetupSQE128       uint32 = 1 << 10
	SetupCQE32        uint32 = 1 << 11
	SetupSingleIssuer uint32 = 1 << 12
	SetupDeferTaskrun uint32 = 1 << 13
)

// Feature flags reported by the kernel (io_uring_params.features).
const (
	FeatSingleMmap     uint32 = 1 << 0
	FeatNoDrop         uint32 = 1 << 1
	FeatSubmitStable   uint32 = 1 << 2
	FeatRWCurPos       uint32 = 1 << 3
	FeatCurPersonality uint32 = 1 << 4
	FeatFastPoll       uint32 = 1 << 5
	FeatPoll32Bits     uint32 = 1 << 6
	FeatSQPollNonfixed uint32 = 1 << 7
	FeatExtArg         uint32 = 1 << 8
	FeatNativeWorkers  uint32 = 1 << 9
	FeatRsrcTags       uint32 = 1 << 10
	FeatCQESkip        uint32 = 1 << 11
	FeatLinkedFile     uint32 = 1 << 12
	FeatRegRegRing     uint32 = 1 << 13
)

// SQE flags (io_uring_sqe.flags; IOSQE_* in the kernel header).
const (
	SQEFixedFile      uint8 = 1 << 0
	SQEIODrain        uint8 = 1 << 1
	SQEIOLink         uint8 = 1 << 2
	SQEIOHardlink     uint8 = 1 << 3
	SQEAsync          uint8 = 1 << 4
	SQEBufferSelect   uint8 = 1 << 5
	SQECQESkipSuccess uint8 = 1 << 6
)

// FsyncDatasync makes an FSYNC behave like fdatasync(2) (IORING_FSYNC_DATASYNC).
const FsyncDatasync uint32 = 1 << 0

// io_uring_enter flags.
const (
	enterGetEvents uint32 = 1 << 0
)

// sq_ring->flags bits.
const (
	sqNeedWakeup uint32 = 1 << 0
	sqCQOverflow uint32 = 1 << 1
	sqTaskrun    uint32 = 1 << 2
)

// mmap offsets.
const (
	offSQRing int64 = 0
	offCQRing int64 = 0x8000000
	offSQEs   int64 = 0x10000000
)

// Opcode is an io_uring operation (enum io_uring_op).
type Opcode uint8

// The operations this package prepares. The numbering is the kernel's.
const (
	OpNop    Opcode = 0
	OpReadv  Opcode = 1
	OpWritev Opcode = 2
	OpFsync  Opcode = 3
	OpRead   Opcode = 22
	OpWrite  Opcode = 23
)

func (o Opcode) String() string {
	switch o {
	case OpNop:
		return "nop"
	case OpReadv:
		return "readv"
	case OpWritev:
		return "writev"
	case OpFsync:
		return "fsync"
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params mirrors struct io_uring_params (120 bytes).
type params struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        sqringOffsets
	cqOff        cqringOffsets
}

// SQE mirrors struct io_uring_sqe (64 bytes); the unions are flattened to the
// members this package uses.
type SQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64 // off / addr2
	addr        uint64 // addr / splice_off_in
	len         uint32
	opFlags     uint32 // rw_flags / fsync_flags / ...
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

// CQE mirrors struct io_uring_cqe (16 bytes; CQE32 rings are not supported).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Compile-time layout checks against the kernel ABI.
var (
	_ [64]byte  = [unsafe.Sizeof(SQE{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(CQE{})]byte{}
	_ [120]byte = [unsafe.Sizeof(params{})]byte{}
)

func sysSetup(entries uint32, p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// enter is sysEnter; a variable so tests can inject EINTR/EBUSY, which the
// real kernel produces only under timing it does not let a test control.
var enter = sysEnter

// setup is io_uring_setup; tests swap it to play an older kernel that
// refuses newer flags.
var setup = sysSetup

// sysEnter uses Syscall6 when it waits for completions, because then it
// blocks: the Go runtime must be told so it can hand the P to another
// thread. A submission alone does not block (what would is punted to the
// kernel's workers), so it is a RawSyscall6: entering a syscall the
// runtime's way wakes its sysmon thread whenever the process had gone
// idle, once per round for a ring owner that submits after every wake.
func sysEnter(fd int, toSubmit, minComplete, flags uint32) (int, error) {
	if minComplete == 0 {
		n, _, errno := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), 0, uintptr(flags), 0, 0)
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// registerIOWQMaxWorkers is IORING_REGISTER_IOWQ_MAX_WORKERS (5.15).
const registerIOWQMaxWorkers = 19

// registerEventfd is IORING_REGISTER_EVENTFD (5.1).
const registerEventfd = 4

func sysRegister(fd int, op uint32, arg unsafe.Pointer, n uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(op), uintptr(arg), uintptr(n), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
