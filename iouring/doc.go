// Package iouring is ringlog's thin io_uring binding, written directly on
// io_uring_setup/enter(2) and mmap via golang.org/x/sys/unix (kernel structs
// and constants are transcribed from include/uapi/linux/io_uring.h).
//
// Two layers:
//
//   - Ring: the raw queues. GetSQE, Prep* (WRITE, WRITEV, READ, READV, FSYNC
//     with optional DATASYNC, NOP), SQE flags such as SQEIOLink, Submit /
//     SubmitAndWait (one io_uring_enter submits every prepared SQE and can
//     wait for N completions), PeekCQE / ForEachCQE / CQAdvance, Close.
//   - Executor: a Ring owned by one goroutine, fed batches of Ops by any
//     number of goroutines. This is what the storage engine uses.
//
// Probe reports whether io_uring works on this host and, if not, why; the
// broker's --io auto uses it to fall back to plain pwrite/fdatasync.
//
// # Threading model
//
// A Ring is single-owner and not safe for concurrent use. New asks for
// SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN|SUBMIT_ALL and drops flags newest
// first while the kernel answers EINVAL. With SINGLE_ISSUER only the thread
// that created the ring may enter it (others get ErrWrongThread), so the
// owner calls runtime.LockOSThread before New and keeps it until Close. With
// DEFER_TASKRUN, completions are only posted while the owner is inside
// io_uring_enter with GETEVENTS, which is why Submit always passes it on
// such rings.
//
// The Executor's owner goroutine locks its thread, sets up the ring and then
// loops: take submissions from a channel without blocking, move whole
// linked chains from a FIFO into the SQ (a chain is never split; a chain
// that does not fit waits for the next round, and in-flight ops are capped
// at the CQ size so the CQ cannot overflow), then make one io_uring_enter
// that submits everything and waits for at least one completion, and reap.
// Its only blocking point is that io_uring_enter: an eventfd READ is always
// armed in the ring, and a submitter that finds the owner parked (an atomic
// flag set just before the wait, followed by one more look at the channel)
// writes the eventfd, which completes that read and ends the wait. So an
// idle owner sleeps in the kernel, new work never waits for an unrelated
// slow fsync, and no side spins. Results go back by closing the Batch's
// done channel; the owner never blocks on a submitter. Backpressure: when
// MaxQueuedOps are queued the owner stops draining and Submit blocks.
//
// Buffers handed to the kernel are pinned (runtime.Pinner) by the executor
// from preparation until completion and the Batch keeps them reachable; the
// Go heap does not move objects today, but the kernel holds raw addresses,
// so the package does not rely on that. Callers must not touch a buffer
// until its batch is done.
//
// # Fault model
//
//   - Setup: EPERM/EACCES (kernel.io_uring_disabled, seccomp) and ENOSYS
//     become *UnavailableError (errors.Is(err, ErrUnavailable)); the caller
//     falls back to synchronous I/O. All errno mapping is in errors.go.
//   - Enter: EINTR (Go's preemption signals) is retried, recomputing what
//     is still unsubmitted from the kernel's SQ head so nothing is submitted
//     twice. EBUSY (CQ overflow with IORING_FEAT_NODROP: the kernel keeps
//     the extra completions) is ErrCQOverflow: reap, then retry; the
//     executor does this itself. Other enter errors make the executor fail
//     every outstanding op and refuse new ones; ops still in the kernel then
//     keep their buffers referenced forever rather than risk reuse.
//   - Completions: a negative res becomes an *OpError wrapping the errno.
//     A failed or short op in a link chain cancels the rest of that chain
//     with ECANCELED; other chains in the same batch are unaffected. A
//     failed fsync on a buffered file cannot be retried safely (the dirty
//     pages may be gone): treat it as fatal for that file.
//   - An FSYNC is not ordered after writes still in flight: link it behind
//     the writes it must cover (Chain does this).
//   - Close drains: the executor completes every accepted op, retires its
//     eventfd read, unmaps the rings and closes all descriptors.
package iouring
