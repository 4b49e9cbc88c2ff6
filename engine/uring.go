package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/internal/rawio"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/ringlog/ringlog/iouring"
)

// uringQueue is the io_uring write path. One owner goroutine owns the ring. Appends from every partition
// land in one intake list; each round the owner turns a partition's queued
// appends into one group, a single (p)writev of their contiguous bytes,
// with FsyncAlways followed by a linked FSYNC(DATASYNC), and submits all
// partitions' groups with one io_uring_enter. A partition has at most one
// group in the kernel: what arrives meanwhile accumulates into the next
// group (pipelined group commit per partition, all partitions in flight at
// once).
//
// The owner never takes a partition lock: Append holds it while rolling a
// segment and waits for the owner (barrier), so the owner hands finished
// groups to a completer goroutine that takes the lock, advances the HW and
// completes waiters. Per partition the owner retires groups only in offset
// order (the contiguous completed prefix), so the HW never covers bytes
// whose write is still in flight, whatever order completions arrive in.
type uringQueue struct {
	e      *Engine
	ring   *iouring.Ring // owner only
	always bool          // FsyncAlways: link an fsync behind every group
	// wakeFd is an eventfd registered with the ring: the kernel signals it
	// when it posts completions, appenders and close when they need the
	// owner. The owner waits for it in the Go netpoller (waitCQ): no
	// thread sits blocked in io_uring_enter, which cost a P handoff (and
	// kept sysmon polling) at every wait. It never reads the count: a wait
	// ends on the poller's edge and then looks at the CQ and at kicked,
	// which saved the read and the EAGAIN read of every wait, and the
	// poller events those reads raised (BENCHMARKS.md section 35).
	wakeFd int
	evf    *os.File
	evrc   syscall.RawConn // evf's, for waitCQ; set up on first use
	parked atomic.Bool     // owner is (about to be) waiting
	// kicked: a waker wants the owner out of its wait (set before the
	// eventfd write). An appender's wake stays an eventfd write rather
	// than a channel send: with a channel, the goroutine it readied made
	// Go's scheduler hand the P to another thread, a futex wake per
	// append (1.3 more switches per message on one broker).
	kicked   atomic.Bool
	waitSeen uint32             // waitCQ: the CQ count its wait started from
	waitFn   func(uintptr) bool // waitCQ's callback, bound once (no allocation per wait)
	// iovScratch is the owner's iovec list for inline raw pwritevs.
	iovScratch []unix.Iovec
	active     atomic.Bool // requests are in the kernel: a completion will wake the owner

	mu      sync.Mutex
	intake  []ioReq
	spare   []ioReq // owner only: the intake's other slice (drain)
	closing bool
	broken  error // the ring failed: requests are refused
	fdGone  bool  // wakeFd is closed: timers must not write it

	// Owner-only state.
	parts    map[*Partition]*partIO
	ready    []*Partition // partitions with unsent groups
	flushes  []*ioFlush   // fsyncs ready to be prepared
	touched  []*Partition // partitions with completions this round
	slots    []opRef
	free     []uint32
	inflight int // SQEs in the kernel
	maxInfl  int
	waits    int        // barriers and flushes not yet answered
	leaked   []*ioGroup // buffers the kernel may still use after a ring failure

	// Owner to completer handoff.
	nmu          sync.Mutex
	pendingNotes []ioNote // guarded by nmu
	applying     bool     // guarded by nmu: the completer holds a batch it has not finished
	notes        []ioNote // owner only: this round's notes
	notify       chan struct{}
	stopC        chan struct{}
	ownerDn      chan struct{}
	complDn      chan struct{}

	// Test hooks (nil in production; tests reach the queue through
	// uringOpened): the descriptor a write or fsync of seg uses, so tests
	// can make the kernel fail one.
	writeFd, syncFd func(seg *segment) int
	// journalSyncFd, when set, is the descriptor the journal's fsync uses.
	journalSyncFd func() int
	// journalWriteFd, when set (tests), is the descriptor the journal's
	// O_DIRECT writes use.
	journalWriteFd func() int

	// faults is the engine's ErrorFS when it wraps the OS file system
	// (tests, --fault-injection): the ring bypasses the FS, so the owner
	// consults its faults itself (faultHold, prepGroup, fill). An injected
	// error becomes the operation's completion result without reaching the
	// kernel; an injected fsync delay holds the partition's next chain
	// that long. Owner only, apart from the FS's own locking.
	faults   *vfs.ErrorFS
	injected []injectedCQE // completions to apply at the next reap
	injSpare []injectedCQE // reap's other list

	// The journal (uring_journal.go), owner only: groups whose segment
	// write completed wait in jPending for the next journal write; jio is
	// the one in flight. jQueued counts groups queued so far, jDone the
	// highest of them whose journal write completed; drains wait for it.
	j        *journal
	jPending []*ioGroup
	jio      *jwIO
	jioSlot  jwIO   // what jio points to while set, reused (fillJournal)
	jRecs    []jrec // fillJournal's, reused
	// Group commit's pacing (holdJournal); jWakeAt is when the armed
	// jTimer wakes the owner.
	jPacer  commitPacer
	jWakeAt time.Time
	jTimer  *time.Timer
	jQueued uint64
	jDone   uint64
	drains  []jdrain
}

// Ring sizes. One round holds at most one chain (writev + fsync) per
// partition, so 1024 SQEs carry 512 partitions per io_uring_enter; the CQ
// size bounds SQEs in flight.
const (
	uringSQEntries = 1024
	uringCQEntries = 4096
	maxGroupIovecs = 1024 // IOV_MAX
	// waitDivisor: the owner waits for 1/waitDivisor of the SQEs in flight.
	waitDivisor = 8
	// uringMaxBlockingWorkers caps the kernel threads running blocking
	// work (fsync) for the ring: enough for one fsync per partition of a
	// round's worth of chains.
	uringMaxBlockingWorkers = 256
)

type ioReqKind uint8

const (
	reqAppend  ioReqKind = iota
	reqFlush             // fsync the dirty segments once writes below end completed
	reqBarrier           // answer once every write queued so far completed
	reqDrain             // answer once every group queued for the journal so far is in it
)

// ioReq is one request to the owner.
type ioReq struct {
	kind  ioReqKind
	p     *Partition
	seg   *segment // append: target (the request holds a ref); flush: last segment
	data  []byte
	pos   int64 // append: file position; flush: end position in seg
	end   int64 // offset after the append, or the flushed end
	w     *waiter
	segs  []*segment // flush: dirty segments, each with a ref
	reply chan error // barrier
	gen   uint64     // the partition's truncation generation (Partition.gen)
	repl  bool       // append: the partition was replicated (noteReadable)
}

// partIO is a partition's state in the owner. Only the owner touches it.
type partIO struct {
	busy   atomic.Bool // a group is in the kernel; its completion wakes the owner
	seq    uint64      // groups created
	groups []*ioGroup  // not yet retired, ascending offsets
	unsent int         // the last unsent groups are not in the kernel yet
	out    int         // sent groups not done yet
	queued bool        // on q.ready
	waits  []ioWait
	failed error
	// torn is the segment a write failed on and tornPos the lowest failed
	// write position in it (a ref is held), where the write of offset
	// tornOff began: once none of the partition's writes is in the kernel
	// the partition is rolled back there (undo, uring_undo.go) or, after a
	// fatal failure, the file is cut there.
	torn    *segment
	tornPos int64
	tornOff int64
	// fatal is a failure no rollback can repair (a failed fdatasync, a
	// write failing with another errno than ENOSPC/EDQUOT): the partition
	// goes offline with it.
	fatal error
	// undo is set while the partition is rolled back after writes failed
	// for lack of space.
	undo *undoState
	// dropped are sent journal groups dropGroups dropped, for
	// finishDropped.
	dropped []*ioGroup
	// jwaiting counts journal groups written but not done (waiting for
	// the journal): they no longer hold the partition back, so its next
	// segment write overlaps the journal write (busy: out > jwaiting).
	jwaiting int
}

type ioWait struct {
	seq uint64 // every group up to this one must have been written
	req ioReq
}

// ioGroup is one write of a partition's contiguous appends to one segment.
type ioGroup struct {
	p       *Partition
	seg     *segment
	seq     uint64
	pos     int64 // file position of the first byte
	bufs    [][]byte
	iov     []unix.Iovec
	n       int64
	base    int64 // offset of the first append
	end     int64 // offset after the last append
	refs    int   // segment refs held (one per append)
	waiters []*waiter
	sync    bool // an fsync is linked behind the write
	// jrnl: the group is made durable by a journal write (after its
	// segment write completed: jq once queued, journaled once durable;
	// jseq is its place in the journal queue).
	jrnl, jq, journaled bool
	repl                bool // an append of it was to a replicated partition (noteReadable)
	dropped             bool // by dropGroups
	jseq                uint64
	gen                 uint64
	sentAt              time.Time // when prepared: the fsync latency runs from here
	// Fault seam (q.faults): checked once per group; the errno a write or
	// fsync completes with instead of running, and when it may be sent.
	checked           bool
	writeErr, syncErr syscall.Errno
	partial           int // bytes of a failing write that land (a short write)
	notBefore         time.Time
	// Completion state.
	sent, wrote, synced bool
	err                 error
	pin                 runtime.Pinner
	// The first buffer and waiter live here, so the usual group of one
	// append costs no allocation for its lists.
	buf1    [1][]byte
	waiter1 [1]*waiter
}

func (g *ioGroup) done() bool {
	// A dropped group (its partition failed or rolls back) that is not
	// queued for the journal will never be: its write is all it waits for.
	return g.wrote && (!g.sync || g.synced) && (!g.jrnl || g.journaled || g.dropped && !g.jq)
}

// ioFlush is an interval/close flush: one fsync per dirty segment.
type ioFlush struct {
	req     ioReq
	next    int // segs prepared so far
	pending int
	err     error
	sentAt  time.Time // first fsync prepared
}

// opRef maps an SQE's user_data back to what it belongs to.
type opRef struct {
	g    *ioGroup
	f    *ioFlush
	seg  *segment // flush: the segment synced
	sync bool
	jw   *jwIO // a journal write's SQE
	want int64 // journal write: the bytes it must write
}

type noteKind uint8

const (
	noteAdvance noteKind = iota // writes (and fsyncs) done up to end
	noteFlushed                 // an interval/close flush finished
	noteFail
	noteReject // waiters fail, the partition stays online (an undo)
	noteUndo   // roll the partition back to end, at pos in seg (Partition.rollBack)
	// noteReadable: a journal group's segment write is in the file, its
	// journal write not done yet: followers may read up to end
	// (Partition.readable).
	noteReadable
)

// ioNote is what the completer applies under the partition lock.
type ioNote struct {
	kind    noteKind
	p       *Partition
	end     int64
	seg     *segment
	pos     int64
	durable bool
	waiters []*waiter
	err     error
	gen     uint64
}

func newUringQueue(e *Engine) (*uringQueue, error) {
	wakeFd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	q := newUringState(e)
	q.wakeFd = wakeFd
	// Non-blocking, so os.NewFile makes it pollable: reads park the owner
	// goroutine instead of blocking its thread.
	q.evf = os.NewFile(uintptr(wakeFd), "ring-eventfd")
	q.faults, _ = e.fs.(*vfs.ErrorFS)
	if q.j != nil {
		q.j.mu.Lock()
		q.j.wake = q.kick // a checkpoint freed journal space
		q.j.mu.Unlock()
	}
	ready := make(chan error, 1)
	go q.run(ready)
	if err := <-ready; err != nil {
		<-q.ownerDn
		q.evf.Close()
		return nil, err
	}
	go q.complete()
	if uringOpened != nil {
		uringOpened(q)
	}
	return q, nil
}

// uringOpened, when set (tests only), is handed every uringQueue an Open
// starts, before the engine loads: tests set its descriptor hooks through
// it instead of digging the queue out of the writeQueue seam.
var uringOpened func(*uringQueue)

// newUringState builds the owner state without a ring (tests of the
// tracker use it directly).
func newUringState(e *Engine) *uringQueue {
	return &uringQueue{
		e:       e,
		always:  e.cfg.Fsync == FsyncAlways,
		j:       e.j,
		wakeFd:  -1,
		parts:   map[*Partition]*partIO{},
		notify:  make(chan struct{}, 1),
		stopC:   make(chan struct{}),
		ownerDn: make(chan struct{}),
		complDn: make(chan struct{}),
	}
}

func (q *uringQueue) name() string { return "uring" }

// write does nothing: the ring writes stamped appends (submit).
func (q *uringQueue) write(*segment, []byte, int64) error { return nil }

// ringStats reports the ring's counters.
func (q *uringQueue) ringStats() (iouring.Stats, bool) { return q.ring.Stats(), true }

// submit hands a stamped append to the owner. The partition lock is held,
// so one partition's appends arrive in offset order. data belongs to the
// queue until the waiter completes; seg holds a ref for the request. The
// owner completes w and moves the HW once the write (and, under
// FsyncAlways, its linked fdatasync) completed; until then the bytes sit
// above the HW, so no read can see them.
func (q *uringQueue) submit(p *Partition, seg *segment, data []byte, pos, end int64, w *waiter) error {
	seg.acquire()
	if err := q.put(ioReq{kind: reqAppend, p: p, seg: seg, data: data, pos: pos, end: end, w: w, gen: p.gen, repl: p.replicated}); err != nil {
		seg.release()
		return err
	}
	return nil
}

func (q *uringQueue) put(r ioReq) error {
	q.mu.Lock()
	if q.broken != nil || q.closing && r.kind == reqAppend {
		err := q.broken
		q.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	q.intake = append(q.intake, r)
	q.mu.Unlock()
	// While anything is in the kernel no wakeup is needed: the next
	// completion wakes the owner, which drains the intake before it waits
	// again. So appends accumulate while a batch is in flight instead of
	// each one waking the owner into a round of its own.
	if q.active.Load() {
		return nil
	}
	if q.parked.CompareAndSwap(true, false) {
		q.wake()
	}
	return nil
}

// wake ends the owner's wait, for a caller that took parked. The
// eventfd write never blocks (the counter cannot reach its maximum here),
// so it is a raw system call: unix.Write would wake the runtime's sysmon
// thread whenever the process had gone idle.
func (q *uringQueue) wake() {
	q.kicked.Store(true)
	q.signalFd()
}

func (q *uringQueue) signalFd() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		_, e := rawio.Write(uintptr(q.wakeFd), one[:])
		if e != unix.EINTR {
			return
		}
	}
}

// barrier waits until every write of p queued so far has completed. roll
// calls it with the partition lock held before it fdatasyncs the segment
// it seals, since an fdatasync does not cover writes still in flight.
func (q *uringQueue) barrier(p *Partition) error {
	reply := make(chan error, 1)
	if err := q.put(ioReq{kind: reqBarrier, p: p, reply: reply, gen: p.gen}); err != nil {
		return err
	}
	return <-reply
}

// requestFlush fsyncs p's dirty segments through the ring once the writes
// they hold completed (interval flushes and Close; FsyncAlways groups carry
// their own fsync).
func (q *uringQueue) requestFlush(p *Partition) {
	segs, end, last, lastPos, gen := p.takeDirty()
	if len(segs) == 0 {
		return
	}
	if err := q.put(ioReq{kind: reqFlush, p: p, segs: segs, seg: last, pos: lastPos, end: end, gen: gen}); err != nil {
		for _, s := range segs {
			s.release()
		}
		p.failLocked(err)
	}
}

// close drains the ring: everything queued is written (and flushed where
// asked), every waiter completed, then the ring is closed.
func (q *uringQueue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	if q.parked.CompareAndSwap(true, false) {
		q.wake()
	}
	<-q.ownerDn
	close(q.stopC)
	<-q.complDn
	q.mu.Lock()
	q.fdGone = true
	q.mu.Unlock()
	if q.evf != nil {
		q.evf.Close()
		q.wakeFd = -1
	}
}

// run is the owner goroutine.
func (q *uringQueue) run(ready chan<- error) {
	defer close(q.ownerDn)
	// Completions must reach the eventfd while the owner is parked
	// outside io_uring_enter: no DEFER_TASKRUN (it posts them only inside
	// an enter), and so no SINGLE_ISSUER either, since the owner
	// goroutine is not locked to a thread. Nor COOP_TASKRUN: a thread
	// that submitted may sleep for long in the Go scheduler, and work the
	// kernel queues for it must not wait for it to wake.
	ring, err := iouring.New(uringSQEntries, iouring.WithCQSize(uringCQEntries), iouring.WithSetupFlags(iouring.SetupSubmitAll))
	if err != nil {
		ready <- err
		return
	}
	if err := ring.RegisterEventfd(q.wakeFd); err != nil {
		ring.Close()
		ready <- err
		return
	}
	q.ring = ring
	// fsyncs block, so the kernel runs them on its bounded io-wq workers,
	// by default only a handful (4 on a 2-CPU VM): with one fsync in flight
	// per dirty partition, that cap, not the disk, set how many files
	// synced at once. Raising it let 256 partitions sync about 1.4x faster
	// (docs/bench-io.md). Old kernels refuse it (EINVAL); that only costs
	// the speed-up.
	if prev, _, err := ring.SetIOWQMaxWorkers(uringMaxBlockingWorkers, 0); err != nil {
		q.e.log.Info("io_uring: keeping the kernel's async worker cap", "err", err)
	} else {
		q.e.log.Debug("io_uring async worker cap raised", "from", prev, "to", uringMaxBlockingWorkers)
	}
	q.maxInfl = int(ring.CQEntries()) - 1
	q.slots = make([]opRef, q.maxInfl)
	q.free = make([]uint32, q.maxInfl)
	for i := range q.free {
		q.free[i] = uint32(q.maxInfl - 1 - i)
	}
	ready <- nil

	for {
		closing := q.drain()
		q.fill()
		if closing && q.idle() {
			break
		}
		if _, err := ring.Submit(); err != nil && !errors.Is(err, iouring.ErrCQOverflow) {
			q.breakRing(err)
			return
		}
		// Wait for a share of what is in flight, not just the first
		// completion: parallel fsyncs end close together, and reaping them
		// in one round lets the next submission carry all their
		// partitions' new appends instead of one partition per enter.
		// Announce the wait, then look once more: an appender that queued
		// after the drain either is seen here or sees parked and wakes the
		// owner, which ends the wait.
		wait := uint32(max(1, q.inflight/waitDivisor))
		q.parked.Store(true)
		for {
			ready := ring.CQReady()
			if ready >= wait {
				break
			}
			q.mu.Lock()
			pending := len(q.intake) > 0 || q.closing != closing || len(q.injected) > 0
			q.mu.Unlock()
			if pending {
				break
			}
			if err := q.waitCQ(ready); err != nil {
				q.parked.Store(false)
				q.breakRing(err)
				return
			}
			if q.kicked.Swap(false) {
				// An appender, close, or a fault or pacing timer (kick)
				// that needs another fill.
				break
			}
		}
		q.parked.Store(false)
		q.reap()
		// Cleared only once nothing is in the kernel, and before the next
		// drain, which then sees whatever was queued while it was set.
		q.active.Store(q.inflight > 0)
		q.deliver()
	}
	ring.Close()
}

// waitCQ parks the owner until the CQ holds more than seen completions or
// a waker set kicked. It waits in the netpoller on the eventfd, which the
// kernel signals after posting a completion and kick after setting the
// flag; each signal is a new edge for Go's edge-triggered poller, so the
// count is never read. RawConn.Read clears the descriptor's readiness
// before it calls waitFn, and waitFn looks at the CQ and the flag after
// that: a signal sent before the look is seen by it, one sent after it
// ends the park.
func (q *uringQueue) waitCQ(seen uint32) error {
	if q.evrc == nil {
		rc, err := q.evf.SyscallConn()
		if err != nil {
			return err
		}
		q.evrc = rc
		q.waitFn = func(uintptr) bool { return q.ring.CQReady() > q.waitSeen || q.kicked.Load() }
	}
	q.waitSeen = seen
	if err := q.evrc.Read(q.waitFn); err != nil {
		return fmt.Errorf("wait on eventfd: %w", err)
	}
	return nil
}

// idle reports that nothing is queued, in flight or waiting.
func (q *uringQueue) idle() bool {
	return q.inflight == 0 && len(q.ready) == 0 && len(q.flushes) == 0 && q.waits == 0 && len(q.injected) == 0 &&
		len(q.jPending) == 0 && q.jio == nil && len(q.drains) == 0
}

// drain takes the intake and turns it into groups and waits. It reports
// whether the queue is closing.
func (q *uringQueue) drain() bool {
	q.mu.Lock()
	reqs := q.intake
	// The two intake slices take turns: a new slice per round cost an
	// allocation (and growth) for the first append after every drain.
	q.intake = q.spare[:0]
	closing := q.closing
	q.mu.Unlock()
	for i := range reqs {
		q.accept(reqs[i])
	}
	clear(reqs)
	q.spare = reqs[:0]
	for _, p := range q.touched {
		q.checkWaits(p, q.parts[p])
	}
	q.touched = q.touched[:0]
	q.deliver()
	return closing
}

func (q *uringQueue) partIO(p *Partition) *partIO {
	pio := q.parts[p]
	if pio == nil {
		pio = &partIO{}
		q.parts[p] = pio
	}
	return pio
}

func (q *uringQueue) touch(p *Partition) { q.touched = append(q.touched, p) }

// accept files one request. Owner only.
func (q *uringQueue) accept(r ioReq) {
	if r.kind == reqDrain {
		q.drains = append(q.drains, jdrain{target: q.jQueued, reply: r.reply})
		q.answerDrains()
		return
	}
	pio := q.partIO(r.p)
	if pio.undo != nil && pio.undo.sent && r.gen > pio.undo.gen {
		pio.undo = nil // stamped after the rollback was applied
	}
	switch r.kind {
	case reqAppend:
		if pio.failed != nil {
			r.seg.release()
			q.note(ioNote{kind: noteFail, p: r.p, err: pio.failed, waiters: []*waiter{r.w}})
			return
		}
		if pio.undo != nil {
			// Stamped past a failed write before the rollback: refused,
			// its offsets are handed out again.
			r.seg.release()
			q.note(ioNote{kind: noteReject, p: r.p, err: pio.undo.err, waiters: []*waiter{r.w}})
			return
		}
		// Under the journal a group is one journal record, so it stays
		// within a journal write; an append too large for one is synced
		// in its segment (a linked fsync) instead.
		jr := q.always && q.j != nil && q.j.fits(journalRecFixed+int64(len(r.p.dirName()))+int64(len(r.data)))
		var g *ioGroup
		if pio.unsent > 0 {
			g = pio.groups[len(pio.groups)-1]
			if g.seg != r.seg || g.pos+g.n != r.pos || g.gen != r.gen || len(g.bufs) >= maxGroupIovecs ||
				g.jrnl != jr || jr && !q.j.fits(journalRecFixed+int64(len(r.p.dirName()))+g.n+int64(len(r.data))) {
				g = nil
			}
		}
		if g == nil {
			pio.seq++
			g = &ioGroup{p: r.p, seg: r.seg, seq: pio.seq, pos: r.pos, base: r.w.res.BaseOffset, sync: q.always && !jr, jrnl: jr, gen: r.gen, repl: r.repl}
			g.bufs, g.waiters = g.buf1[:0], g.waiter1[:0]
			pio.groups = append(pio.groups, g)
			pio.unsent++
			if !pio.queued {
				pio.queued = true
				q.ready = append(q.ready, r.p)
			}
		} else {
			r.seg.release() // the group already holds one for this segment
			g.refs--
		}
		g.repl = g.repl || r.repl
		g.bufs = append(g.bufs, r.data)
		g.n += int64(len(r.data))
		g.end = r.end
		g.refs++
		g.waiters = append(g.waiters, r.w)
	case reqFlush, reqBarrier:
		q.waits++
		pio.waits = append(pio.waits, ioWait{seq: pio.seq, req: r})
		q.touch(r.p)
	}
}

// checkWaits answers barriers and starts flushes whose writes completed.
// While the partition is rolled back, barriers stamped before the rollback
// fail with the undo's error (a roll or truncation must not go on over the
// failed writes), and its flushes start only once the rollback note is
// out, so their notes, behind it, cannot move the HW over the failed writes.
func (q *uringQueue) checkWaits(p *Partition, pio *partIO) {
	n := 0
	for _, wt := range pio.waits {
		undo := pio.undo != nil && wt.req.gen <= pio.undo.gen
		var err error
		switch {
		case pio.failed != nil:
			err = pio.failed
		case undo && wt.req.kind == reqBarrier:
			err = pio.undo.err
		case undo && !pio.undo.sent, !pio.writtenUpTo(wt.seq):
			pio.waits[n] = wt
			n++
			continue
		}
		q.waits--
		switch wt.req.kind {
		case reqBarrier:
			wt.req.reply <- err
		case reqFlush:
			if err != nil {
				for _, s := range wt.req.segs {
					s.release()
				}
				continue
			}
			q.flushes = append(q.flushes, &ioFlush{req: wt.req})
		}
	}
	clear(pio.waits[n:])
	pio.waits = pio.waits[:n]
}

// writtenUpTo reports that the writes of groups up to seq completed.
func (pio *partIO) writtenUpTo(seq uint64) bool {
	for _, g := range pio.groups {
		if g.seq > seq {
			break
		}
		if !g.wrote {
			return false
		}
	}
	return true
}

// fill prepares SQEs: each ready partition's unsent groups (when it has
// none in the kernel) and ready flushes, while the SQ and CQ have room.
func (q *uringQueue) fill() {
	r := q.ring
	n := 0
	for _, p := range q.ready {
		pio := q.parts[p]
		if pio.failed != nil || pio.unsent == 0 {
			pio.queued = false
			continue
		}
		if pio.busy.Load() || q.faults != nil && q.faultHold(pio) || !q.sendGroups(pio) {
			q.ready[n] = p
			n++
			continue
		}
		pio.queued = false
	}
	clear(q.ready[n:])
	q.ready = q.ready[:n]
	n = 0
	for _, f := range q.flushes {
		if f.next == 0 {
			f.sentAt = time.Now()
		}
		for f.next < len(f.req.segs) && r.SQSpace() > 0 && q.inflight < q.maxInfl {
			s := f.req.segs[f.next]
			if q.faults != nil {
				if _, err := q.faults.Check(vfs.OpSync, s.path(logSuffix)); err != nil {
					q.injected = append(q.injected, injectedCQE{opRef{f: f, seg: s, sync: true}, -int32(errnoOf(err))})
					f.next++
					f.pending++
					continue
				}
			}
			fd := s.log.Fd()
			if q.syncFd != nil {
				fd = q.syncFd(s)
			}
			iouring.PrepFsync(q.sqe(opRef{f: f, seg: s, sync: true}), fd, true)
			f.next++
			f.pending++
		}
		if f.next < len(f.req.segs) {
			q.flushes[n] = f
			n++
		}
	}
	clear(q.flushes[n:])
	q.flushes = q.flushes[:n]
	if q.j != nil {
		q.fillJournal()
	}
}

// sqe takes an SQE and a slot for ref. The caller checked space.
func (q *uringQueue) sqe(ref opRef) *iouring.SQE {
	sqe := q.ring.GetSQE()
	s := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	q.slots[s] = ref
	sqe.SetUserData(uint64(s))
	q.inflight++
	q.active.Store(true)
	return sqe
}

// sendGroups prepares all unsent groups of a partition, or none if they do
// not fit this round.
func (q *uringQueue) sendGroups(pio *partIO) bool {
	groups := pio.groups[len(pio.groups)-pio.unsent:]
	need := 0
	for _, g := range groups {
		need++
		if g.sync {
			need++
		}
	}
	if need > int(q.ring.SQSpace()) || q.inflight+need > q.maxInfl {
		return false
	}
	for _, g := range groups {
		q.prepGroup(g)
	}
	pio.out += len(groups)
	pio.unsent = 0
	pio.busy.Store(true)
	return true
}

func (q *uringQueue) prepGroup(g *ioGroup) {
	fd := g.seg.log.Fd()
	if q.writeFd != nil {
		fd = q.writeFd(g.seg)
	}
	g.sent = true
	if g.writeErr != 0 {
		// Injected: the write fails without reaching the kernel (or tears
		// after Fault.Partial bytes), and its linked fsync is cancelled as
		// the kernel would.
		g.sentAt = time.Now()
		q.injected = append(q.injected, injectedCQE{opRef{g: g}, q.tearWrite(g, fd)})
		if g.sync {
			q.injected = append(q.injected, injectedCQE{opRef{g: g, sync: true}, -int32(syscall.ECANCELED)})
		}
		return
	}
	if !g.sync {
		// A write without its own fsync (under the journal, or fsync
		// interval/never) is a page-cache copy: done here, inline, it
		// costs one pwritev. Through the ring, ext4 cannot take a
		// buffered write without blocking, so the kernel handed each to
		// an io-wq worker thread and woke it: a thread wake-up per round.
		q.injected = append(q.injected, injectedCQE{opRef{g: g}, q.pwritevRes(fd, g.bufs, g.pos)})
		return
	}
	w := q.sqe(opRef{g: g})
	if len(g.bufs) == 1 {
		g.pin.Pin(&g.bufs[0][0])
		iouring.PrepWrite(w, fd, g.bufs[0], uint64(g.pos))
	} else {
		g.iov = make([]unix.Iovec, len(g.bufs))
		for i, b := range g.bufs {
			g.pin.Pin(&b[0])
			g.iov[i].Base = &b[0]
			g.iov[i].SetLen(len(b))
		}
		g.pin.Pin(&g.iov[0])
		iouring.PrepWritev(w, fd, g.iov, uint64(g.pos))
	}
	if !g.sync {
		return
	}
	g.sentAt = time.Now()
	if g.syncErr != 0 {
		// Injected: the write runs, its fsync fails.
		q.injected = append(q.injected, injectedCQE{opRef{g: g, sync: true}, -int32(g.syncErr)})
		return
	}
	// The fsync starts only after the write succeeded in full; a failed or
	// short write cancels it (ECANCELED).
	w.SetFlags(iouring.SQEIOLink)
	sfd := g.seg.log.Fd()
	if q.syncFd != nil {
		sfd = q.syncFd(g.seg)
	}
	iouring.PrepFsync(q.sqe(opRef{g: g, sync: true}), sfd, true)
}

// pwritevRes writes bufs at off as the ring would: the bytes written, or
// minus the errno. A short write is reported as such (the caller fails
// it), not continued. Writes up to rawWriteMax are raw system calls
// (internal/rawio: unix.Pwritev woke the sysmon thread whenever the
// broker had gone idle); a page-cache copy that size does not block for
// long, while larger ones may meet dirty-page throttling, which a raw call
// would sit out holding its P.
func (q *uringQueue) pwritevRes(fd int, bufs [][]byte, off int64) int32 {
	bufs = bufs[:min(len(bufs), maxGroupIovecs)]
	iov := q.iovScratch[:0]
	total := 0
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
			total += len(b)
		}
	}
	defer func() { clear(iov); q.iovScratch = iov[:0] }() // drop the buffer references
	for {
		var n int
		var e syscall.Errno
		switch {
		case total == 0:
			return 0
		case total > rawWriteMax:
			var err error
			if n, err = unix.Pwritev(fd, bufs, off); err != nil {
				e = errnoOf(err)
			}
		default:
			n, e = rawio.Pwritev(fd, iov, bufs, off)
		}
		switch e {
		case 0:
			return int32(n)
		case unix.EINTR:
			continue
		}
		return -int32(e)
	}
}

// rawWriteMax bounds the inline segment writes issued as raw system calls.
const rawWriteMax = 1 << 20

// reap handles every ready completion, then retires what it finished.
func (q *uringQueue) reap() {
	// The two injected lists take turns, as the intake's do: completed
	// may inject more, which go to the other one.
	inj := q.injected
	q.injected = q.injSpare[:0]
	for _, c := range inj {
		q.completed(c.ref, c.res)
	}
	clear(inj)
	q.injSpare = inj[:0]
	q.ring.ForEachCQE(func(c iouring.CQE) {
		ref := q.slots[c.UserData]
		q.slots[c.UserData] = opRef{}
		q.free = append(q.free, uint32(c.UserData))
		q.inflight--
		q.completed(ref, c.Res)
	})
	q.settle()
}

// settle retires finished groups and answers waits of the partitions that
// had completions.
func (q *uringQueue) settle() {
	if q.j != nil {
		// Queue newly written groups for the journal first: a barrier
		// answered below is followed by a drain that must see them.
		for _, p := range q.touched {
			q.queueJournal(q.parts[p])
		}
	}
	for _, p := range q.touched {
		pio := q.parts[p]
		q.retire(p, pio)
		q.checkWaits(p, pio)
	}
	q.touched = q.touched[:0]
}

// completed applies one completion. Owner only.
func (q *uringQueue) completed(ref opRef, res int32) {
	if ref.f != nil {
		q.flushCompleted(ref, res)
		return
	}
	if ref.jw != nil {
		q.journalCompleted(ref, res)
		return
	}
	g := ref.g
	q.touch(g.p)
	if ref.sync {
		g.synced = true
		q.e.stats.fdatasyncs.Add(1)
		q.e.stats.fsyncLatency.observe(time.Since(g.sentAt))
		var serr error
		switch {
		case res == -int32(syscall.ECANCELED):
			// Only a failed write cancels its fsync (which then never
			// ran); the write's completion says what went wrong.
		case res < 0:
			serr = syscall.Errno(-res)
		default:
			// A crashable FS counts the write durable now, or fails the
			// fdatasync after a simulated crash.
			serr = vfs.Synced(g.seg.log)
		}
		if serr != nil {
			// A failed fdatasync: the dirty pages may be gone, so it is
			// fatal for the segment and the partition.
			serr = fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, g.seg.path(logSuffix), serr)
			g.err = serr
			if pio := q.parts[g.p]; pio.fatal == nil {
				pio.fatal = serr
			}
		}
	} else {
		g.wrote = true
		g.pin.Unpin()
		g.iov = nil
		if g.jrnl {
			pio := q.parts[g.p]
			pio.jwaiting++
			pio.busy.Store(pio.out > pio.jwaiting)
		}
		// This write's own outcome: g.err may already hold its fsync's
		// (an injected completion can be reaped first), which says
		// nothing about the bytes in the file.
		var werr error
		switch {
		case res < 0:
			werr = fmt.Errorf("%w: write %s at %d: %w", ErrStorage, g.seg.path(logSuffix), g.pos, syscall.Errno(-res))
		case int64(res) != g.n:
			werr = fmt.Errorf("%w: write %s at %d: short write %d of %d", ErrStorage, g.seg.path(logSuffix), g.pos, res, g.n)
		}
		if werr != nil {
			g.err = werr // the write's own error says more than a cancelled fsync's
			q.noteTorn(g, res, werr)
		} else if g.jrnl && g.repl {
			q.noteReadable(g)
		}
	}
	q.finished(g)
}

// noteReadable lets followers read a journal group once its segment
// write is in the file, while its journal write (the barrier) is still to
// come, as the pwrite path does: the leader's and the followers' barriers
// then overlap instead of running one after the other in every
// acknowledged round. The HW still waits for the leader's own durable
// end (DurableEnd). Only a clean prefix is exposed: no write of the
// partition before g failed or is outstanding, and no rollback is under
// way, so an undo (which only cuts from a failed write on) never removes
// bytes a follower may have read; a failure after this point is fatal
// for the partition, as a leader's crash would be.
func (q *uringQueue) noteReadable(g *ioGroup) {
	pio := q.parts[g.p]
	if pio.failed != nil || pio.fatal != nil || pio.undo != nil || pio.torn != nil {
		return
	}
	// A failed write sets torn or fatal (above); only an earlier write
	// still in the kernel (a group with its own fsync) is left to check.
	for _, h := range pio.groups {
		if h == g {
			break
		}
		if !h.wrote {
			return
		}
	}
	q.note(ioNote{kind: noteReadable, p: g.p, end: g.end, seg: g.seg, pos: g.pos + g.n, gen: g.gen})
}

// finished releases a group once it is done: its buffers, segment refs
// and the partition's place in the kernel.
func (q *uringQueue) finished(g *ioGroup) {
	if !g.done() {
		return
	}
	g.bufs = nil
	clear(g.buf1[:])
	for ; g.refs > 0; g.refs-- {
		g.seg.release()
	}
	pio := q.parts[g.p]
	pio.out--
	if g.jrnl {
		pio.jwaiting--
	}
	pio.busy.Store(pio.out > pio.jwaiting)
	if pio.out == 0 && pio.torn != nil && (pio.failed != nil || pio.fatal != nil) {
		q.cutTorn(g.p, pio)
	}
}

func (q *uringQueue) flushCompleted(ref opRef, res int32) {
	f := ref.f
	f.pending--
	q.e.stats.fdatasyncs.Add(1)
	q.e.stats.fsyncLatency.observe(time.Since(f.sentAt))
	var serr error
	if res < 0 {
		serr = syscall.Errno(-res)
	} else {
		serr = vfs.Synced(ref.seg.log) // as in completed
	}
	if serr != nil && f.err == nil {
		f.err = fmt.Errorf("%w: fdatasync %s: %v", ErrStorage, ref.seg.path(logSuffix), serr)
	}
	ref.seg.release()
	if f.pending > 0 || f.next < len(f.req.segs) {
		return
	}
	if f.err != nil {
		q.failPart(f.req.p, q.parts[f.req.p], f.err)
		return
	}
	q.note(ioNote{kind: noteFlushed, p: f.req.p, end: f.req.end, seg: f.req.seg, pos: f.req.pos, gen: f.req.gen})
}

func (q *uringQueue) note(n ioNote) { q.notes = append(q.notes, n) }

// breakRing handles a failed io_uring_enter: the ring is unusable. Every
// partition with work fails, later requests are refused, and buffers the
// kernel may still touch stay referenced (and pinned) forever.
func (q *uringQueue) breakRing(err error) {
	err = fmt.Errorf("%w: io_uring failed: %v", ErrStorage, err)
	q.mu.Lock()
	q.broken = err
	reqs := q.intake
	q.intake = nil
	q.mu.Unlock()
	for i := range reqs {
		q.accept(reqs[i])
	}
	for _, ref := range q.slots {
		if ref.g != nil {
			q.leaked = append(q.leaked, ref.g)
		}
	}
	for p, pio := range q.parts {
		q.failPart(p, pio, err)
		q.checkWaits(p, pio)
	}
	for _, d := range q.drains {
		d.reply <- err
	}
	q.drains = nil
	q.deliver()
}
