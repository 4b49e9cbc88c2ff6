package iouring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Op is one operation handed to an Executor.
type Op struct {
	Code     Opcode   // OpNop, OpWrite, OpWritev, OpRead, OpReadv, OpFsync
	Fd       int      //
	Buf      []byte   // OpWrite, OpRead
	Bufs     [][]byte // OpWritev, OpReadv
	Offset   uint64   //
	Datasync bool     // OpFsync: fdatasync instead of fsync
	// Link chains the next op of the same batch behind this one
	// (IOSQE_IO_LINK): it starts only after this one succeeds, and is
	// cancelled (ECANCELED) if this one fails or is short. A batch always
	// ends a chain.
	Link bool
}

// Write, Writev, Read, Fsync and Nop build Ops; Chain links them.
func Write(fd int, buf []byte, off uint64) Op {
	return Op{Code: OpWrite, Fd: fd, Buf: buf, Offset: off}
}

// Writev builds a vectored write.
func Writev(fd int, bufs [][]byte, off uint64) Op {
	return Op{Code: OpWritev, Fd: fd, Bufs: bufs, Offset: off}
}

// Read builds a positioned read into buf.
func Read(fd int, buf []byte, off uint64) Op { return Op{Code: OpRead, Fd: fd, Buf: buf, Offset: off} }

// Fsync builds fsync (datasync=false) or fdatasync (datasync=true).
func Fsync(fd int, datasync bool) Op { return Op{Code: OpFsync, Fd: fd, Datasync: datasync} }

// Nop builds a no-op.
func Nop() Op { return Op{Code: OpNop} }

// Chain links ops in order (all but the last get Link, set in place in the
// argument slice) and returns them, so
// batches can be built as append(Chain(w1, w2, sync), Chain(w3, sync2)...).
func Chain(ops ...Op) []Op {
	for i := range ops {
		ops[i].Link = i < len(ops)-1
	}
	return ops
}

// Result is the outcome of one Op: Res is the CQE result (bytes for reads
// and writes), Err is non-nil (an *OpError wrapping the errno) when Res < 0.
type Result struct {
	Res int32
	Err error
}

// Batch is a submitted group of ops. Results is valid after Done is closed.
type Batch struct {
	ops       []Op
	results   []Result
	next      int // first op not yet placed in the SQ (owner only)
	remaining int // ops not yet completed (owner only)
	done      chan struct{}
	pinner    runtime.Pinner // owner only
	iovecs    [][]unix.Iovec // keeps iovec arrays alive until completion
}

// Done is closed once every op of the batch has completed.
func (b *Batch) Done() <-chan struct{} { return b.done }

// Wait blocks until the batch completes and returns one Result per op.
func (b *Batch) Wait() []Result {
	<-b.done
	return b.results
}

// ExecutorConfig sizes an Executor.
type ExecutorConfig struct {
	// Entries is the SQ size: the most SQEs one io_uring_enter can submit,
	// and the longest allowed chain.
	Entries uint32
	// CQEntries is the CQ size and so the most ops in flight in the kernel
	// (one slot is kept for the executor's wakeup read). 0 means 4*Entries.
	CQEntries uint32
	// MaxQueuedOps bounds ops accepted but not yet in the kernel; beyond it
	// Submit blocks (backpressure).
	MaxQueuedOps int
	// ChannelDepth is the capacity of the submission channel; 0 means the
	// default.
	ChannelDepth int
	// SetupFlags replaces DefaultSetupFlags when non-zero.
	SetupFlags uint32
}

// DefaultExecutorConfig suits a storage engine with a few hundred ops in
// flight.
func DefaultExecutorConfig() ExecutorConfig {
	return ExecutorConfig{Entries: 256, CQEntries: 1024, MaxQueuedOps: 16384, ChannelDepth: 256}
}

// Validate checks the fields against each other.
func (c ExecutorConfig) Validate() error {
	if c.Entries < 2 || c.Entries > 32768 {
		return fmt.Errorf("iouring: Entries %d out of range [2, 32768]", c.Entries)
	}
	if c.CQEntries != 0 && c.CQEntries < c.Entries {
		return fmt.Errorf("iouring: CQEntries %d smaller than Entries %d", c.CQEntries, c.Entries)
	}
	if c.MaxQueuedOps < 1 {
		return fmt.Errorf("iouring: MaxQueuedOps %d must be positive", c.MaxQueuedOps)
	}
	if c.ChannelDepth < 0 {
		return fmt.Errorf("iouring: ChannelDepth %d negative", c.ChannelDepth)
	}
	return nil
}

// wakeupUserData marks the CQE of the executor's eventfd read.
const wakeupUserData = ^uint64(0)

type slot struct {
	batch *Batch
	index int
}

// Executor owns a Ring on a dedicated, OS-thread-locked goroutine and runs
// batches of Ops for any number of goroutines. See the package doc for the
// threading model.
type Executor struct {
	ch     chan *Batch
	mu     sync.RWMutex // Submit holds it shared while sending; Close exclusively
	closed bool
	parked atomic.Bool // owner is (about to be) blocked in io_uring_enter
	wakeFd int         // eventfd; submitters write it to end the owner's wait
	ring   *Ring
	tid    int // owner's OS thread, for tests that signal it
	maxOps int // longest chain accepted
	stop   chan struct{}
	err    error // fatal ring error, written by the owner before stop closes

	// Owner-only state.
	fifo         []*Batch
	fifoHead     int
	queuedOps    int
	maxQueued    int
	slots        []slot
	freeSlots    []uint32
	inflight     int // user ops in the kernel
	maxInflight  int
	wakeBuf      *[8]byte
	wakePin      runtime.Pinner
	wakeInFlight bool
	leaked       []*Batch // batches abandoned in a broken ring: never freed
}

// NewExecutor starts the owner goroutine and sets up its ring on that
// goroutine's locked OS thread.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if cfg.CQEntries == 0 {
		cfg.CQEntries = 4 * cfg.Entries
	}
	if cfg.ChannelDepth == 0 {
		cfg.ChannelDepth = DefaultExecutorConfig().ChannelDepth
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A blocking eventfd: io_uring would fail a read on an O_NONBLOCK file
	// with EAGAIN instead of waiting for it to become readable.
	wakeFd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("iouring: eventfd: %w", err)
	}
	e := &Executor{
		ch:        make(chan *Batch, cfg.ChannelDepth),
		wakeFd:    wakeFd,
		stop:      make(chan struct{}),
		maxQueued: cfg.MaxQueuedOps,
		wakeBuf:   new([8]byte),
	}
	ready := make(chan error, 1)
	go e.run(cfg, ready)
	if err := <-ready; err != nil {
		<-e.stop
		unix.Close(wakeFd)
		return nil, err
	}
	return e, nil
}

// SetupFlags reports the IORING_SETUP_* bits of the executor's ring.
func (e *Executor) SetupFlags() uint32 { return e.ring.SetupFlags() }

// Features reports the kernel's IORING_FEAT_* bits.
func (e *Executor) Features() uint32 { return e.ring.Features() }

// Stats returns the ring's counters (they include the executor's own wakeup
// reads). Stats().BatchingFactor() is SQEs per io_uring_enter.
func (e *Executor) Stats() Stats { return e.ring.Stats() }

// Submit hands ops to the owner and returns at once (it blocks only for
// backpressure). The ops' buffers must not be touched until the batch is
// done. A chain may not be longer than the ring's SQ.
func (e *Executor) Submit(ops []Op) (*Batch, error) {
	if err := e.validate(ops); err != nil {
		return nil, err
	}
	b := &Batch{ops: ops, results: make([]Result, len(ops)), remaining: len(ops), done: make(chan struct{})}
	if len(ops) == 0 {
		close(b.done)
		return b, nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	select {
	case e.ch <- b:
	default:
		// Channel full: make sure the owner is not asleep before blocking,
		// or the send could wait for a completion that never comes.
		if e.parked.CompareAndSwap(true, false) {
			e.wake()
		}
		e.ch <- b
	}
	// Wake the owner only if it may be sleeping in the kernel. Done under
	// the read lock so Close cannot have closed the eventfd meanwhile.
	if e.parked.CompareAndSwap(true, false) {
		e.wake()
	}
	return b, nil
}

// Do submits ops and waits for their results.
func (e *Executor) Do(ops []Op) ([]Result, error) {
	b, err := e.Submit(ops)
	if err != nil {
		return nil, err
	}
	return b.Wait(), nil
}

// Close stops accepting work, waits for queued and in-flight ops to
// complete, and closes the ring. It returns the ring's fatal error, if any.
func (e *Executor) Close() error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.ch)
		e.wake()
	}
	e.mu.Unlock()
	<-e.stop
	e.mu.Lock()
	if e.wakeFd >= 0 {
		unix.Close(e.wakeFd)
		e.wakeFd = -1
	}
	e.mu.Unlock()
	return e.err
}

func (e *Executor) wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		_, err := unix.Write(e.wakeFd, one[:])
		if err != syscall.EINTR {
			return
		}
	}
}

func (e *Executor) validate(ops []Op) error {
	run := 0
	for i := range ops {
		switch ops[i].Code {
		case OpNop, OpWrite, OpRead, OpWritev, OpReadv, OpFsync:
		default:
			return fmt.Errorf("%w: opcode %v at index %d", ErrInvalidOp, ops[i].Code, i)
		}
		run++
		if !ops[i].Link || i == len(ops)-1 {
			if run > e.maxOps {
				return fmt.Errorf("%w: %d ops, at most %d", ErrChainTooLong, run, e.maxOps)
			}
			run = 0
		}
	}
	return nil
}

// run is the owner goroutine.
func (e *Executor) run(cfg ExecutorConfig, ready chan<- error) {
	defer close(e.stop)
	// Before io_uring_setup: with SINGLE_ISSUER the kernel binds the ring to
	// the creating thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	opts := []Option{WithCQSize(cfg.CQEntries)}
	if cfg.SetupFlags != 0 {
		opts = append(opts, WithSetupFlags(cfg.SetupFlags))
	}
	ring, err := New(cfg.Entries, opts...)
	if err != nil {
		ready <- err
		return
	}
	e.ring = ring
	e.tid = unix.Gettid()
	e.maxInflight = int(ring.CQEntries()) - 1
	e.maxOps = min(int(ring.SQEntries())-1, e.maxInflight)
	e.slots = make([]slot, e.maxInflight)
	e.freeSlots = make([]uint32, e.maxInflight)
	for i := range e.freeSlots {
		e.freeSlots[i] = uint32(e.maxInflight - 1 - i)
	}
	e.wakePin.Pin(e.wakeBuf)
	defer e.wakePin.Unpin()
	ready <- nil

	intake := e.ch
	for e.err == nil {
		intake = e.drain(intake)
		if intake == nil && e.queuedOps == 0 && e.inflight == 0 {
			break
		}
		e.fill()
		// Announce the sleep, then look once more: a submitter that sent
		// after our drain either is seen here or sees parked and writes
		// the eventfd, which completes the wakeup read and ends the wait.
		// If something did arrive, submit what is prepared without waiting
		// and come straight back for it.
		wait := uint32(1)
		e.parked.Store(true)
		if intake != nil && e.queuedOps < e.maxQueued {
			select {
			case b, ok := <-intake:
				e.parked.Store(false)
				wait = 0
				if !ok {
					intake = nil
				} else {
					e.enqueue(b)
				}
			default:
			}
		}
		_, err := e.ring.SubmitAndWait(wait)
		e.parked.Store(false)
		if err != nil && !errors.Is(err, ErrCQOverflow) {
			e.fail(err)
			break
		}
		e.reap()
	}
	if e.err != nil {
		// The ring is unusable: fail whatever else arrives until Close.
		for intake != nil {
			b, ok := <-intake
			if !ok {
				break
			}
			e.reject(b)
		}
		ring.Close()
		return
	}
	e.retireWakeup()
	if err := ring.Close(); err != nil && e.err == nil {
		e.err = err
	}
}

// drain takes submissions without blocking, up to the queue bound. It
// returns nil once the channel is closed.
func (e *Executor) drain(intake chan *Batch) chan *Batch {
	for intake != nil && e.queuedOps < e.maxQueued {
		select {
		case b, ok := <-intake:
			if !ok {
				return nil
			}
			e.enqueue(b)
		default:
			return intake
		}
	}
	return intake
}

func (e *Executor) enqueue(b *Batch) {
	// Compact a FIFO that never fully drains so it does not grow forever.
	if e.fifoHead > 1024 && 2*e.fifoHead > len(e.fifo) {
		n := copy(e.fifo, e.fifo[e.fifoHead:])
		clear(e.fifo[n:])
		e.fifo, e.fifoHead = e.fifo[:n], 0
	}
	e.fifo = append(e.fifo, b)
	e.queuedOps += len(b.ops)
}

// fill moves whole chains from the FIFO into the SQ while both the SQ and
// the CQ budget have room. Order is strictly FIFO; a chain that does not fit
// waits for the next round rather than being split.
func (e *Executor) fill() {
	r := e.ring
	if !e.wakeInFlight {
		sqe := r.GetSQE()
		if sqe == nil {
			return
		}
		PrepRead(sqe, e.wakeFd, e.wakeBuf[:], 0)
		sqe.SetUserData(wakeupUserData)
		e.wakeInFlight = true
	}
	for e.fifoHead < len(e.fifo) {
		b := e.fifo[e.fifoHead]
		end := b.next
		for end < len(b.ops)-1 && b.ops[end].Link {
			end++
		}
		end++
		n := end - b.next
		if n > int(r.SQSpace()) || e.inflight+n > e.maxInflight {
			return
		}
		for i := b.next; i < end; i++ {
			e.prep(b, i, i < end-1)
		}
		b.next = end
		e.queuedOps -= n
		if end == len(b.ops) {
			e.fifo[e.fifoHead] = nil
			e.fifoHead++
		}
	}
	e.fifo, e.fifoHead = e.fifo[:0], 0
}

func (e *Executor) prep(b *Batch, i int, link bool) {
	op := &b.ops[i]
	sqe := e.ring.GetSQE() // fill checked SQSpace
	switch op.Code {
	case OpNop:
		PrepNop(sqe)
	case OpWrite, OpRead:
		if len(op.Buf) > 0 {
			b.pinner.Pin(&op.Buf[0])
		}
		if op.Code == OpWrite {
			PrepWrite(sqe, op.Fd, op.Buf, op.Offset)
		} else {
			PrepRead(sqe, op.Fd, op.Buf, op.Offset)
		}
	case OpWritev, OpReadv:
		iov := make([]unix.Iovec, len(op.Bufs))
		for j, buf := range op.Bufs {
			if len(buf) > 0 {
				b.pinner.Pin(&buf[0])
				iov[j].Base = &buf[0]
				iov[j].SetLen(len(buf))
			}
		}
		if len(iov) > 0 {
			b.pinner.Pin(&iov[0])
		}
		b.iovecs = append(b.iovecs, iov)
		if op.Code == OpWritev {
			PrepWritev(sqe, op.Fd, iov, op.Offset)
		} else {
			PrepReadv(sqe, op.Fd, iov, op.Offset)
		}
	case OpFsync:
		PrepFsync(sqe, op.Fd, op.Datasync)
	}
	if link {
		sqe.SetFlags(SQEIOLink)
	}
	s := e.freeSlots[len(e.freeSlots)-1]
	e.freeSlots = e.freeSlots[:len(e.freeSlots)-1]
	e.slots[s] = slot{batch: b, index: i}
	sqe.SetUserData(uint64(s))
	e.inflight++
}

func (e *Executor) reap() {
	r := e.ring
	for {
		cqe, ok := r.PeekCQE()
		if !ok {
			return
		}
		r.CQAdvance(1)
		if cqe.UserData == wakeupUserData {
			e.wakeInFlight = false
			if cqe.Res < 0 && cqe.Res != -int32(syscall.EINTR) && cqe.Res != -int32(syscall.EAGAIN) {
				e.fail(fmt.Errorf("iouring: executor wakeup read: %w", syscall.Errno(-cqe.Res)))
			}
			continue
		}
		s := &e.slots[cqe.UserData]
		b, i := s.batch, s.index
		*s = slot{}
		e.freeSlots = append(e.freeSlots, uint32(cqe.UserData))
		e.inflight--
		b.results[i] = Result{Res: cqe.Res, Err: resultError(b.ops[i].Code, cqe.Res)}
		b.remaining--
		if b.remaining == 0 {
			b.pinner.Unpin()
			b.iovecs = nil
			close(b.done)
		}
	}
}

// retireWakeup completes the pending eventfd read so that no request refers
// to wakeBuf when the ring is closed.
func (e *Executor) retireWakeup() {
	if !e.wakeInFlight {
		return
	}
	e.wake()
	for e.wakeInFlight {
		if _, err := e.ring.SubmitAndWait(1); err != nil && !errors.Is(err, ErrCQOverflow) {
			e.err = err
			return
		}
		e.reap()
	}
}

// fail marks the ring broken. Every unfinished op fails with err. Batches
// with ops still in the kernel stay referenced (and pinned) forever, because
// the kernel may still write into their buffers.
func (e *Executor) fail(err error) {
	if e.err != nil {
		return
	}
	e.err = fmt.Errorf("iouring: executor ring failed: %w", err)
	inKernel := map[*Batch]bool{}
	for i, s := range e.slots {
		if s.batch != nil {
			s.batch.results[s.index] = Result{Res: -1, Err: e.err}
			inKernel[s.batch] = true
			e.slots[i] = slot{}
		}
	}
	for _, b := range e.fifo[e.fifoHead:] {
		for i := b.next; i < len(b.ops); i++ {
			b.results[i] = Result{Res: -1, Err: e.err}
		}
		if !inKernel[b] {
			b.pinner.Unpin()
			close(b.done)
		}
	}
	for b := range inKernel {
		e.leaked = append(e.leaked, b)
		close(b.done)
	}
	e.fifo, e.fifoHead, e.queuedOps, e.inflight = nil, 0, 0, 0
}

// reject fails a batch that arrives after the ring broke.
func (e *Executor) reject(b *Batch) {
	for i := range b.results {
		b.results[i] = Result{Res: -1, Err: e.err}
	}
	close(b.done)
}
