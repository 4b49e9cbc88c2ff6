// Package iouring is ringlog's thin io_uring binding, written directly on
// io_uring_setup/enter(2) and mmap via golang.org/x/sys/unix (kernel structs
// and constants are transcribed from include/uapi/linux/io_uring.h).
//
// It is only the raw queues (Ring): GetSQE, Prep* (WRITE, WRITEV, READ,
// READV, FSYNC with optional DATASYNC, NOP), SQE flags such as SQEIOLink,
// Submit / SubmitAndWait (one io_uring_enter submits every prepared SQE and
// can wait for N completions), PeekCQE / ForEachCQE / CQAdvance, Stats,
// SetIOWQMaxWorkers, Close. The one owner loop that feeds a ring lives in
// the storage engine (engine/uring.go): it knows partitions, group commit
// and rollback, which a generic executor here would not.
//
// Probe reports whether io_uring works on this host and, if not, why; the
// broker's --io auto uses it to fall back to plain pwrite/fdatasync.
//
// # Threading model
//
// A Ring is single-owner and not safe for concurrent use. New asks for
// SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN|SUBMIT_ALL (or WithSetupFlags)
// and drops flags newest first while the kernel answers EINVAL. With
// SINGLE_ISSUER only the thread that created the ring may enter it (others
// get ErrWrongThread), so such an owner calls runtime.LockOSThread before
// New and keeps it until Close. With DEFER_TASKRUN, completions are only
// posted while the owner is inside io_uring_enter with GETEVENTS, which is
// why Submit always passes it on such rings.
//
// The storage engine's owner does not block in io_uring_enter: in Go a
// thread blocked in a syscall loses its P to sysmon, and a locked thread
// then needs a handoff of its own to run again. It sets the ring up with
// SUBMIT_ALL only, registers an eventfd (RegisterEventfd) that the kernel
// signals as it posts completions, submits without waiting and parks on the
// eventfd in the Go netpoller, checking CQReady when the poller wakes it
// rather than reading the eventfd's count.
//
// Memory referenced by a prepared SQE (buffers, iovec arrays) must stay
// reachable and unmoved until its CQE is reaped: the owner pins it
// (runtime.Pinner) from preparation to completion. The Go heap does not
// move objects today, but the kernel holds raw addresses, so the package
// does not rely on that.
//
// # Fault model
//
//   - Setup: EPERM/EACCES (kernel.io_uring_disabled, seccomp) and ENOSYS
//     become *UnavailableError (errors.Is(err, ErrUnavailable)); the caller
//     falls back to synchronous I/O. All errno mapping is in errors.go.
//   - Enter: EINTR (Go's preemption signals) is retried, recomputing what
//     is still unsubmitted from the kernel's SQ head so nothing is submitted
//     twice. EBUSY (CQ overflow with IORING_FEAT_NODROP: the kernel keeps
//     the extra completions) is ErrCQOverflow: reap, then retry. Other
//     enter errors leave the ring unusable: the owner fails every
//     outstanding op and refuses new ones; ops still in the kernel then
//     keep their buffers referenced forever rather than risk reuse.
//   - Completions: a negative res is the negated errno (OpError wraps one).
//     A failed or short op in a link chain cancels the rest of that chain
//     with ECANCELED; other chains in the same batch are unaffected. A
//     failed fsync on a buffered file cannot be retried safely (the dirty
//     pages may be gone): treat it as fatal for that file.
//   - An FSYNC is not ordered after writes still in flight: link it behind
//     the writes it must cover (SQEIOLink).
//   - Close unmaps the rings and closes the ring descriptor; the owner
//     first reaps every op it submitted, so no buffer is in the kernel
//     after it.
package iouring
