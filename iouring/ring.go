package iouring

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultSetupFlags is what New asks for first. SINGLE_ISSUER and
// DEFER_TASKRUN together are the fast path for one ring per thread;
// SUBMIT_ALL keeps the kernel consuming the whole SQ when one SQE fails to
// prepare, so a batch is never left half-submitted.
const DefaultSetupFlags = SetupSingleIssuer | SetupDeferTaskrun | SetupCoopTaskrun | SetupSubmitAll

// fallbackOrder lists the flags New drops, one at a time, while the kernel
// answers EINVAL: newest first (DEFER_TASKRUN 6.1, SINGLE_ISSUER 6.0,
// COOP_TASKRUN 5.19, SUBMIT_ALL 5.18). DEFER_TASKRUN needs SINGLE_ISSUER, so it
// goes before it.
var fallbackOrder = []uint32{SetupDeferTaskrun, SetupSingleIssuer, SetupCoopTaskrun, SetupSubmitAll, SetupCQSize}

type options struct {
	flags     uint32
	cqEntries uint32
}

// Option configures New.
type Option func(*options)

// WithCQSize asks for a completion queue of n entries (IORING_SETUP_CQSIZE);
// the kernel rounds up to a power of two. Size it for the most completions
// that can be outstanding at once.
func WithCQSize(n uint32) Option { return func(o *options) { o.cqEntries = n } }

// WithSetupFlags replaces DefaultSetupFlags. Flags the kernel rejects with
// EINVAL are still dropped one by one.
func WithSetupFlags(flags uint32) Option { return func(o *options) { o.flags = flags } }

// Stats are cumulative counters. They are written by the ring's owner and may
// be read from any goroutine.
type Stats struct {
	Enters     uint64 // io_uring_enter calls that returned (including EINTR/EBUSY)
	SQEs       uint64 // SQEs the kernel consumed
	CQEs       uint64 // completions reaped (CQAdvance)
	Interrupts uint64 // EINTR retries
	Busy       uint64 // EBUSY (CQ overflow) answers
	// SQEsPerEnter is a histogram of SQEs consumed per io_uring_enter:
	// bucket i counts enters that consumed up to EnterBucketBound(i) SQEs
	// (bucket 0: none, a wait for completions only).
	SQEsPerEnter [EnterBuckets]uint64
}

// EnterBuckets is the number of SQEsPerEnter buckets: 0, 1, 2-3, 4-7, ...,
// and 1024 or more in the last.
const EnterBuckets = 12

// EnterBucketBound is the largest SQE count of bucket i (the last bucket
// is unbounded and reports -1).
func EnterBucketBound(i int) int {
	if i >= EnterBuckets-1 {
		return -1
	}
	return 1<<i - 1
}

// BatchingFactor is SQEs per io_uring_enter.
func (s Stats) BatchingFactor() float64 {
	if s.Enters == 0 {
		return 0
	}
	return float64(s.SQEs) / float64(s.Enters)
}

type ringStats struct {
	enters, sqes, cqes, interrupts, busy atomic.Uint64
	perEnter                             [EnterBuckets]atomic.Uint64
}

// Ring is one io_uring instance. It is not safe for concurrent use: a single
// goroutine owns it, and with SetupSingleIssuer (the default) that goroutine
// must call runtime.LockOSThread before New and stay locked until Close,
// because the kernel only accepts submissions from the creating thread.
//
// Memory referenced by a prepared SQE (buffers, iovec arrays) must stay
// reachable and unmoved until its CQE is reaped. Go's heap does not move
// objects today, but pin them with runtime.Pinner anyway so that a future
// moving collector cannot break the contract (the engine's owner loop pins
// every buffer and iovec array from preparation to completion).
type Ring struct {
	fd       int
	flags    uint32
	features uint32

	sqMem, cqMem, sqeMem []byte

	sqHead, sqTail, sqFlags *uint32
	sqMask, sqEntries       uint32
	sqes                    []SQE
	sqeTail                 uint32 // next SQE slot to hand out; published to *sqTail on submit

	cqHead, cqTail    *uint32
	cqMask, cqEntries uint32
	cqes              []CQE

	stats ringStats
}

// New sets up a ring with at least entries SQ slots. It tries
// DefaultSetupFlags (or WithSetupFlags) and drops flags newest-first while the
// kernel answers EINVAL, so it works from 5.10 onward with the best flags the
// kernel has. SetupFlags reports what was accepted.
func New(entries uint32, opts ...Option) (*Ring, error) {
	o := options{flags: DefaultSetupFlags}
	for _, opt := range opts {
		opt(&o)
	}
	flags := o.flags
	if o.cqEntries > 0 {
		flags |= SetupCQSize
	}
	var p params
	var fd int
	for {
		p = params{flags: flags, cqEntries: o.cqEntries}
		var err error
		fd, err = setup(entries, &p)
		if err == nil {
			break
		}
		if err != syscall.EINVAL {
			return nil, setupError(err)
		}
		dropped := false
		for _, f := range fallbackOrder {
			if flags&f != 0 {
				flags &^= f
				dropped = true
				break
			}
		}
		if !dropped {
			return nil, setupError(err)
		}
	}
	r := &Ring{fd: fd, flags: flags, features: p.features}
	if err := r.mmap(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mmap(p *params) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(CQE{})))
	if p.features&FeatSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
	}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return &mmapError{"sq ring", err}
	}
	if p.features&FeatSingleMmap != 0 {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
		return &mmapError{"cq ring", err}
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(SQE{}))
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, sqeSize, prot, flags); err != nil {
		return &mmapError{"sqe array", err}
	}

	at := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = at(r.sqMem, p.sqOff.head)
	r.sqTail = at(r.sqMem, p.sqOff.tail)
	r.sqFlags = at(r.sqMem, p.sqOff.flags)
	r.sqMask = *at(r.sqMem, p.sqOff.ringMask)
	r.sqEntries = *at(r.sqMem, p.sqOff.ringEntries)
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	// SQEs are always handed out in ring order, so the index array is the
	// identity map and is written once here rather than on every submit.
	array := unsafe.Slice(at(r.sqMem, p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqeTail = atomic.LoadUint32(r.sqTail)

	r.cqHead = at(r.cqMem, p.cqOff.head)
	r.cqTail = at(r.cqMem, p.cqOff.tail)
	r.cqMask = *at(r.cqMem, p.cqOff.ringMask)
	r.cqEntries = *at(r.cqMem, p.cqOff.ringEntries)
	r.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	return nil
}

type mmapError struct {
	what string
	err  error
}

func (e *mmapError) Error() string { return "iouring: mmap " + e.what + ": " + e.err.Error() }
func (e *mmapError) Unwrap() error { return e.err }

// Close unmaps the rings and closes the ring fd. The kernel cancels whatever
// is still in flight; buffers of such requests must stay valid until then, so
// reap everything before Close.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return ErrClosed
	}
	var errs []error
	if r.sqeMem != nil {
		errs = append(errs, unix.Munmap(r.sqeMem))
	}
	if r.cqMem != nil && len(r.cqMem) > 0 && &r.cqMem[0] != &r.sqMem[0] {
		errs = append(errs, unix.Munmap(r.cqMem))
	}
	if r.sqMem != nil {
		errs = append(errs, unix.Munmap(r.sqMem))
	}
	errs = append(errs, unix.Close(r.fd))
	r.sqMem, r.cqMem, r.sqeMem, r.sqes, r.cqes = nil, nil, nil, nil, nil
	r.fd = -1
	return errors.Join(errs...)
}

// Fd is the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Features reports the IORING_FEAT_* bits of this kernel.
func (r *Ring) Features() uint32 { return r.features }

// SetupFlags reports the IORING_SETUP_* bits the kernel accepted.
func (r *Ring) SetupFlags() uint32 { return r.flags }

// SQEntries and CQEntries are the ring sizes the kernel chose.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }

// CQEntries is the completion queue size.
func (r *Ring) CQEntries() uint32 { return r.cqEntries }

// Stats returns the cumulative counters; safe from any goroutine.
func (r *Ring) Stats() Stats {
	st := Stats{
		Enters:     r.stats.enters.Load(),
		SQEs:       r.stats.sqes.Load(),
		CQEs:       r.stats.cqes.Load(),
		Interrupts: r.stats.interrupts.Load(),
		Busy:       r.stats.busy.Load(),
	}
	for i := range st.SQEsPerEnter {
		st.SQEsPerEnter[i] = r.stats.perEnter[i].Load()
	}
	return st
}

// SQSpace is how many SQEs GetSQE can still hand out before a submit.
func (r *Ring) SQSpace() uint32 {
	// Acquire: the kernel's head store tells us which slots it has consumed.
	return r.sqEntries - (r.sqeTail - atomic.LoadUint32(r.sqHead))
}

// GetSQE returns the next free, zeroed SQE, or nil when the SQ is full
// (submit, then retry).
func (r *Ring) GetSQE() *SQE {
	if r.SQSpace() == 0 {
		return nil
	}
	sqe := &r.sqes[r.sqeTail&r.sqMask]
	*sqe = SQE{}
	r.sqeTail++
	return sqe
}

// Submit submits prepared SQEs without waiting. On DEFER_TASKRUN rings it
// also passes GETEVENTS, because that is the only time the kernel posts
// completions for such a ring.
func (r *Ring) Submit() (int, error) { return r.SubmitAndWait(0) }

// SubmitAndWait submits all prepared SQEs and waits until at least waitNr
// completions are in the CQ, in one io_uring_enter. EINTR (Go's preemption
// signals) is retried. ErrCQOverflow means: reap, then call again.
func (r *Ring) SubmitAndWait(waitNr uint32) (int, error) {
	// Release: SQE contents written above become visible to the kernel
	// before it can observe the new tail.
	atomic.StoreUint32(r.sqTail, r.sqeTail)
	submitted := 0
	for {
		toSubmit := r.sqeTail - atomic.LoadUint32(r.sqHead)
		var flags uint32
		if waitNr > 0 || r.flags&SetupDeferTaskrun != 0 || atomic.LoadUint32(r.sqFlags)&(sqCQOverflow|sqTaskrun) != 0 {
			flags |= enterGetEvents
		}
		if toSubmit == 0 && flags == 0 {
			return submitted, nil
		}
		n, err := enter(r.fd, toSubmit, waitNr, flags)
		r.stats.enters.Add(1)
		r.stats.sqes.Add(uint64(n))
		r.stats.perEnter[min(bits.Len(uint(max(n, 0))), EnterBuckets-1)].Add(1)
		submitted += n
		if err == nil {
			return submitted, nil
		}
		errno := err.(syscall.Errno)
		switch errno {
		case syscall.EINTR:
			// Whatever was consumed before the signal is reflected in
			// sqHead; recompute and go again.
			r.stats.interrupts.Add(1)
			continue
		case syscall.EBUSY:
			r.stats.busy.Add(1)
		}
		return submitted, enterError(errno)
	}
}

// CQReady is the number of completions waiting to be reaped.
func (r *Ring) CQReady() uint32 {
	// Acquire on the tail: CQE contents are visible once the tail is.
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// PeekCQE returns the oldest unreaped completion without consuming it.
func (r *Ring) PeekCQE() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	return r.cqes[head&r.cqMask], true
}

// CQAdvance marks n completions as consumed, freeing their CQ slots.
func (r *Ring) CQAdvance(n uint32) {
	if n == 0 {
		return
	}
	// Release: our reads of the CQEs complete before the kernel may reuse
	// the slots.
	atomic.StoreUint32(r.cqHead, atomic.LoadUint32(r.cqHead)+n)
	r.stats.cqes.Add(uint64(n))
}

// ForEachCQE calls fn for every ready completion, then advances past them.
// It returns how many were handled.
func (r *Ring) ForEachCQE(fn func(CQE)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for i := head; i != tail; i++ {
		fn(r.cqes[i&r.cqMask])
	}
	r.CQAdvance(tail - head)
	return int(tail - head)
}

// RegisterEventfd makes the kernel signal the eventfd fd whenever it
// posts completions, so an owner can wait for them somewhere else than in
// io_uring_enter: in the Go netpoller, without a thread blocked in a
// syscall. Signals may be coalesced or spurious: after a wake-up, look at
// CQReady. The ring must not be set up with DEFER_TASKRUN, which posts
// completions only inside io_uring_enter.
func (r *Ring) RegisterEventfd(fd int) error {
	if r.fd < 0 {
		return ErrClosed
	}
	efd := int32(fd)
	if err := sysRegister(r.fd, registerEventfd, unsafe.Pointer(&efd), 1); err != nil {
		return fmt.Errorf("iouring: register eventfd: %w", err)
	}
	return nil
}

// SetIOWQMaxWorkers caps the kernel's async worker threads that serve this
// ring: bounded ones run work that blocks on a file (fsync, and writes
// that cannot complete inline), unbounded ones the rest. The kernel's
// default bounded cap is min(SQ entries, 4 x CPUs), so a ring that keeps
// one fsync in flight per dirty file syncs at most that many files at once.
// Zero leaves a cap as it is; the previous caps are returned. Kernels before
// 5.15 answer EINVAL.
func (r *Ring) SetIOWQMaxWorkers(bounded, unbounded uint32) (prevBounded, prevUnbounded uint32, err error) {
	if r.fd < 0 {
		return 0, 0, ErrClosed
	}
	caps := [2]uint32{bounded, unbounded}
	if err := sysRegister(r.fd, registerIOWQMaxWorkers, unsafe.Pointer(&caps[0]), 2); err != nil {
		return 0, 0, fmt.Errorf("iouring: register iowq max workers: %w", err)
	}
	return caps[0], caps[1], nil
}
