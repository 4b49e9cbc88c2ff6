package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/ringlog/ringlog/iouring"
	"golang.org/x/sys/unix"
)

// needUring skips when this host has no io_uring.
func needUring(t testing.TB) {
	t.Helper()
	if info, err := iouring.Probe(); err != nil {
		t.Skipf("io_uring unavailable: %s", info.Reason)
	}
}

func openUring(t *testing.T, cfg Config) (*Engine, *uringQueue) {
	t.Helper()
	needUring(t)
	cfg.IOMode = "uring"
	var q *uringQueue
	uringOpened = func(uq *uringQueue) { q = uq }
	defer func() { uringOpened = nil }()
	e := mustOpen(t, cfg)
	if q == nil || e.IOPath() != "uring" {
		t.Fatalf("IOPath %q: %s", e.IOPath(), e.IOReason())
	}
	return e, q
}

// Many partitions under FsyncAlways: data is intact, and durability is
// batched across partitions: with the journal, one journal write carries
// many partitions' groups; without it, each enter carries many
// partitions' writes and fsyncs. (With the journal a group's segment
// write and its journal write go in different enters, so SQEs per enter
// is not the measure there.)
func TestUringManyPartitionsFsyncAlways(t *testing.T) {
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.Journal = journal
			uringManyPartitions(t, cfg)
		})
	}
}

func uringManyPartitions(t *testing.T, cfg Config) {
	e, _ := openUring(t, cfg)
	defer e.Close()
	const parts, writers, per = 64, 128, 20
	e.CreateTopic("m", parts, map[string]string{"segment.bytes": "16384"})
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, _ := e.Partition("m", int32(w%parts))
			for i := 0; i < per; i++ {
				aw, err := p.Append(batchtest.Values(fmt.Sprintf("w%d-%d", w, i)))
				if err == nil {
					_, err = aw.Result()
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for i := int32(0); i < parts; i++ {
		p := mustPartition(t, e, "m", i)
		recs := readAll(t, p, 0)
		checkSequence(t, recs, 0, nil)
		if len(recs) != writers/parts*per {
			t.Fatalf("partition %d: %d records, want %d", i, len(recs), writers/parts*per)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[string(r.Value)] {
				t.Fatalf("partition %d: duplicate %s", i, r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
	st := e.Stats()
	t.Logf("%d appends, %d fdatasyncs, %d enters, %d SQEs (%.1f per enter), %d journal writes of %d records", st.Appends, st.Fdatasyncs, st.RingEnters, st.RingSQEs, st.SQEsPerEnter(), st.JournalWrites, st.JournalRecords)
	if cfg.Journal {
		if st.JournalWrites == 0 || float64(st.JournalRecords)/float64(st.JournalWrites) < 3 {
			t.Fatalf("%d journal writes for %d records: rounds are not batched across partitions", st.JournalWrites, st.JournalRecords)
		}
	} else if st.SQEsPerEnter() < 3 {
		t.Fatalf("%.2f SQEs per io_uring_enter: writes are not batched across partitions", st.SQEsPerEnter())
	}
	if st.Fdatasyncs >= st.Appends {
		t.Fatalf("%d fdatasyncs for %d appends: no group commit", st.Fdatasyncs, st.Appends)
	}
}

// Every write path and fsync policy, with segment rolls and a restart.
func TestBothPathsRoundTrip(t *testing.T) {
	for _, mode := range []string{"sync", "uring"} {
		for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
			t.Run(mode+"/"+policy.String(), func(t *testing.T) {
				if mode == "uring" {
					needUring(t)
				}
				dir := t.TempDir()
				cfg := testConfig(dir)
				cfg.IOMode, cfg.Fsync, cfg.FsyncInterval = mode, policy, 5e6
				e := mustOpen(t, cfg)
				if e.IOPath() != mode {
					t.Fatalf("IOPath %q", e.IOPath())
				}
				e.CreateTopic("r", 3, map[string]string{"segment.bytes": "2048"})
				var wg sync.WaitGroup
				for w := 0; w < 6; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						p, _ := e.Partition("r", int32(w%3))
						for i := 0; i < 50; i++ {
							if _, err := p.Append(batchtest.Values(fmt.Sprint(w, i))); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				// The last append's waiter may still be open: Close drains.
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				e2 := mustOpen(t, cfg)
				defer e2.Close()
				for i := int32(0); i < 3; i++ {
					p := mustPartition(t, e2, "r", i)
					if n := len(readAll(t, p, 0)); n != 100 {
						t.Fatalf("partition %d: %d records after restart, want 100", i, n)
					}
					if len(p.segs) < 2 {
						t.Fatalf("partition %d did not roll", i)
					}
				}
			})
		}
	}
}

// A write the kernel fails (EBADF: the descriptor is read-only) fails the
// partition's waiters with ErrStorage, its linked fsync is cancelled, the
// HW does not move and other partitions keep working.
func TestUringWriteErrorFailsPartition(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.Fsync = policy
			e, q := openUring(t, cfg)
			defer e.Close()
			e.CreateTopic("f", 2, nil)
			p := mustPartition(t, e, "f", 0)
			appendWait(t, p, batchOf(0, 1))
			ro, err := os.Open(filepath.Join(dir, "f-0", segmentName(0, logSuffix)))
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			q.writeFd = func(s *segment) int {
				if strings.Contains(s.dir, "f-0") {
					return int(ro.Fd())
				}
				return s.log.Fd()
			}
			w, err := p.Append(batchOf(1, 1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Result(); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "bad file descriptor") {
				t.Fatalf("waiter err %v, want ErrStorage with EBADF", err)
			}
			if _, err := p.Append(batchOf(1, 1)); !errors.Is(err, ErrStorage) {
				t.Fatalf("append after write failure: %v", err)
			}
			if hw := p.Info().HighWatermark; hw != 1 {
				t.Fatalf("HW %d moved past the failed write", hw)
			}
			appendWait(t, mustPartition(t, e, "f", 1), batchOf(0, 1))
		})
	}
}

// A failed fsync (EINVAL: a pipe cannot be synced) is fatal for the
// partition.
func TestUringFsyncErrorFailsPartition(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Journal = false // the per-partition linked fsync; TestUringJournalFsyncErrorFailsRound for the journal
	e, q := openUring(t, cfg)
	defer e.Close()
	e.CreateTopic("f", 1, nil)
	p := mustPartition(t, e, "f", 0)
	appendWait(t, p, batchOf(0, 1))
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	q.syncFd = func(*segment) int { return fds[0] }
	w, err := p.Append(batchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "fdatasync") {
		t.Fatalf("waiter err %v, want ErrStorage from fdatasync", err)
	}
	if hw := p.Info().HighWatermark; hw != 1 {
		t.Fatalf("HW %d moved past the failed fsync", hw)
	}
}

// A failed journal fdatasync (EINVAL: a pipe cannot be synced) is fatal
// for every partition of the round, as a failed fdatasync of each would
// be, and the journal refuses later rounds.
func TestUringJournalFsyncErrorFailsRound(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.JournalBuffered = true // the fdatasync exists on the buffered path only
	e, q := openUring(t, cfg)
	defer e.Close()
	checkJournalRoundFails(t, e, func(fd int) { q.journalSyncFd = func() int { return fd } }, "fdatasync")
}

// On the O_DIRECT path the write is the barrier: a failed journal write
// (to a pipe's read end: EBADF) is fatal for every partition of the
// round, and the journal refuses later rounds.
func TestUringJournalDirectWriteErrorFailsRound(t *testing.T) {
	e, q := openUring(t, testConfig(t.TempDir()))
	defer e.Close()
	if !q.j.direct() {
		t.Skip("the test directory's file system refuses O_DIRECT")
	}
	checkJournalRoundFails(t, e, func(fd int) { q.journalWriteFd = func() int { return fd } }, "write")
}

// checkJournalRoundFails appends to two partitions after redirect points
// the journal's failing operation at a pipe's read end, and checks that
// both appends fail with ErrStorage naming op, that the high watermark
// stays, and that the journal refuses the next append.
func checkJournalRoundFails(t *testing.T, e *Engine, redirect func(fd int), op string) {
	t.Helper()
	e.CreateTopic("f", 2, nil)
	p0, p1 := mustPartition(t, e, "f", 0), mustPartition(t, e, "f", 1)
	appendWait(t, p0, batchOf(0, 1))
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	redirect(fds[0])
	w0, err := p0.Append(batchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	w1, err := p1.Append(batchOf(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []AppendWaiter{w0, w1} {
		if _, err := w.Result(); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), op) {
			t.Fatalf("waiter err %v, want ErrStorage from the journal's %s", err, op)
		}
	}
	if hw := p0.Info().HighWatermark; hw != 1 {
		t.Fatalf("HW %d moved past the failed journal %s", hw, op)
	}
	if _, err := p0.Append(batchOf(1, 1)); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after the journal failed: %v", err)
	}
}

// IOMode selection: uring fails Open with the probe's reason, auto falls
// back and says why, non-OS file systems always use sync.
func TestIOModeSelection(t *testing.T) {
	real := probeIO
	defer func() { probeIO = real }()
	probeIO = func() (iouring.Info, error) {
		err := &iouring.UnavailableError{Errno: syscall.EPERM, Reason: "kernel.io_uring_disabled=2"}
		return iouring.Info{Reason: "kernel.io_uring_disabled=2 (operation not permitted)", Err: err}, err
	}
	cfg := testConfig(t.TempDir())
	cfg.IOMode = "uring"
	if _, err := Open(cfg); !errors.Is(err, ErrIOUringUnusable) || !strings.Contains(err.Error(), "io_uring_disabled=2") {
		t.Fatalf("Open with IOMode uring and no io_uring: %v", err)
	}
	cfg.IOMode = "auto"
	e := mustOpen(t, cfg)
	if e.IOPath() != "sync" || !strings.Contains(e.IOReason(), "io_uring_disabled=2") {
		t.Fatalf("auto without io_uring: %q, %q", e.IOPath(), e.IOReason())
	}
	e.Close()
	probeIO = real

	mcfg := testConfig("/data")
	mcfg.FS = vfs.NewMem()
	mcfg.IOMode = "uring"
	e = mustOpen(t, mcfg)
	if e.IOPath() != "sync" || !strings.Contains(e.IOReason(), "no kernel descriptors") {
		t.Fatalf("mem FS: %q, %q", e.IOPath(), e.IOReason())
	}
	e.Close()
	if mem, err := vfs.NewMemFds(); err == nil {
		mcfg.FS = vfs.Wrap(mem) // its files have descriptors: the ring takes them
		if e = mustOpen(t, mcfg); e.IOPath() != "uring" {
			t.Fatalf("memfd FS: %q, %q", e.IOPath(), e.IOReason())
		}
		e.Close()
	}
	cfg.IOMode = "sync"
	e = mustOpen(t, cfg)
	if e.IOPath() != "sync" || !strings.Contains(e.IOReason(), "io mode sync") {
		t.Fatalf("sync: %q, %q", e.IOPath(), e.IOReason())
	}
	e.Close()
}

// The tracker, without a ring: completions in any order, the HW and the
// waiters advance only over the contiguous completed prefix.
func TestUringTrackerOutOfOrder(t *testing.T) {
	e := &Engine{cfg: Config{Fsync: FsyncAlways}, log: slog.New(slog.DiscardHandler)}
	e.disk = newDiskMonitor(Config{}, e.log, false)
	q := newUringState(e)
	p := &Partition{topic: &topicState{name: "t"}}
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/t-0", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenFile("/t-0/0.log", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	seg := &segment{dir: "/t-0", fs: mem, log: f}
	seg.refs.Store(100) // never closes
	send := func() *ioGroup {
		pio := q.parts[p]
		g := pio.groups[len(pio.groups)-1]
		g.sent, pio.unsent = true, 0
		pio.out++
		return g
	}
	var gen uint64
	add := func(pos, end int64) *ioGroup {
		seg.acquire()
		w := &waiter{done: make(chan struct{}), res: AppendResult{BaseOffset: end - 1, LastOffset: end - 1}}
		q.accept(ioReq{kind: reqAppend, p: p, seg: seg, data: make([]byte, 10), pos: pos, end: end, w: w, gen: gen})
		return send()
	}
	advanced := func() (int64, int) {
		defer func() { q.notes = q.notes[:0] }()
		if len(q.notes) == 0 {
			return -1, 0
		}
		n := q.notes[len(q.notes)-1]
		if n.kind != noteAdvance {
			t.Fatalf("note %+v", n)
		}
		return n.end, len(n.waiters)
	}
	a, b, c := add(0, 1), add(10, 2), add(20, 3)
	q.accept(ioReq{kind: reqBarrier, p: p, reply: make(chan error, 1)})
	// c completes first, then b's write and fsync: nothing may advance.
	q.completed(opRef{g: c}, 10)
	q.completed(opRef{g: c, sync: true}, 0)
	q.completed(opRef{g: b}, 10)
	q.completed(opRef{g: b, sync: true}, 0)
	q.settle()
	if end, _ := advanced(); end != -1 {
		t.Fatalf("advanced to %d with the first write in flight", end)
	}
	if q.waits != 1 {
		t.Fatal("barrier answered with a write in flight")
	}
	// a's write lands: the barrier is answered, but the HW waits for a's
	// fsync under FsyncAlways.
	q.completed(opRef{g: a}, 10)
	q.settle()
	if end, _ := advanced(); end != -1 || q.waits != 0 {
		t.Fatalf("advanced to %d before the fsync; waits %d", end, q.waits)
	}
	q.completed(opRef{g: a, sync: true}, 0)
	q.settle()
	if end, n := advanced(); end != 3 || n != 3 {
		t.Fatalf("advanced to %d with %d waiters, want 3 and 3", end, n)
	}
	if q.parts[p].busy.Load() {
		t.Fatal("partition still busy with nothing in the kernel")
	}

	// A short write (the disk filled up) rolls the partition back: its
	// waiters and a later group's fail with a retriable error, the
	// partition does not fail. Once neither write is in the kernel the
	// completer gets the rollback note: back to offset 3, at byte 30.
	if _, err := f.WriteAt(make([]byte, 50), 0); err != nil { // what the kernel wrote
		t.Fatal(err)
	}
	d, g := add(30, 4), add(40, 5)
	q.completed(opRef{g: d}, 4)
	q.completed(opRef{g: d, sync: true}, -int32(syscall.ECANCELED))
	q.settle()
	if len(q.notes) != 1 || q.notes[0].kind != noteReject || len(q.notes[0].waiters) != 2 ||
		!errors.Is(q.notes[0].err, ErrStorage) || !rollingBack(q.notes[0].err) {
		t.Fatalf("notes after short write: %+v", q.notes)
	}
	q.notes = q.notes[:0]
	q.accept(ioReq{kind: reqBarrier, p: p, reply: make(chan error, 1), gen: gen})
	q.checkWaits(p, q.parts[p])
	if q.waits != 0 {
		t.Fatal("a barrier behind the failed write waits instead of failing")
	}
	q.completed(opRef{g: g}, 10)
	q.completed(opRef{g: g, sync: true}, 0)
	q.settle()
	if len(q.notes) != 1 || q.notes[0].kind != noteUndo || q.notes[0].pos != 30 || q.notes[0].end != 3 || q.notes[0].seg != seg {
		t.Fatalf("notes once the failed writes settled: %+v", q.notes)
	}
	q.notes[0].seg.release() // the completer's
	q.notes = q.notes[:0]
	// Appends stamped before the rollback was applied are refused; one of
	// the next generation (the rollback bumped it) is taken.
	seg.acquire()
	q.accept(ioReq{kind: reqAppend, p: p, seg: seg, data: make([]byte, 10), pos: 50, end: 6, w: &waiter{}, gen: gen})
	if len(q.notes) != 1 || q.notes[0].kind != noteReject {
		t.Fatalf("append stamped before the rollback: %+v", q.notes)
	}
	q.notes = q.notes[:0]

	// Any other write error is fatal: the partition fails and, once its
	// writes left the kernel, the file is cut back where the failed one
	// started.
	gen++
	h := add(30, 4)
	q.completed(opRef{g: h}, -int32(syscall.EIO))
	q.completed(opRef{g: h, sync: true}, -int32(syscall.ECANCELED))
	q.settle()
	if len(q.notes) != 1 || q.notes[0].kind != noteFail || len(q.notes[0].waiters) != 1 || !errors.Is(q.notes[0].err, syscall.EIO) {
		t.Fatalf("notes after EIO: %+v", q.notes)
	}
	q.notes = q.notes[:0]
	if fi, _ := mem.Stat("/t-0/0.log"); fi.Size() != 30 {
		t.Fatalf("size %d after the failed write settled, want 30 (torn tail cut)", fi.Size())
	}

	// Appends reaching a failed partition fail at once.
	seg.acquire()
	q.accept(ioReq{kind: reqAppend, p: p, seg: seg, data: make([]byte, 10), pos: 50, end: 6, w: &waiter{}, gen: gen})
	if len(q.notes) != 1 || q.notes[0].kind != noteFail {
		t.Fatalf("append to failed partition: %+v", q.notes)
	}
	if got := seg.refs.Load(); got != 100 {
		t.Fatalf("segment refs %d, want 100: a group leaked or over-released one", got)
	}
}

// On the ring, a replicated partition's appends are readable by followers
// once their segment write is in the file, before the journal write that
// makes them durable completes (the leader's and followers' barriers
// overlap); the HW, and everything on an unreplicated partition, still
// waits for the barrier. The journal write is held in the kernel by
// pointing it at a full pipe.
func TestUringFollowersReadBeforeTheBarrier(t *testing.T) {
	e, q := openUring(t, testConfig(t.TempDir()))
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	if !q.j.direct() {
		t.Skip("the test directory's file system refuses O_DIRECT")
	}
	e.CreateTopic("r", 2, nil)
	repl, solo := mustPartition(t, e, "r", 0), mustPartition(t, e, "r", 1)
	repl.SetReplicated(true)
	appendWait(t, repl, batchOf(0, 1))
	repl.SetHighWatermark(1)
	appendWait(t, solo, batchOf(0, 1))

	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	// Closed once: the read end ends the drain below.
	closeRead := sync.OnceFunc(func() { syscall.Close(fds[0]) })
	defer closeRead()
	defer syscall.Close(fds[1])
	fill := make([]byte, 4096)
	for {
		if _, err := syscall.Write(fds[1], fill); err != nil {
			break // EAGAIN: full
		}
	}
	q.journalWriteFd = func() int { return fds[1] }

	wr, err := repl.Append(batchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := solo.Append(batchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(5*time.Second, func() bool {
		res, err := repl.ReadReplica(1, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		n := res.Data.Len()
		res.Data.Release()
		return n > 0
	}) {
		t.Fatal("the replicated append was not readable by followers while its journal write was held")
	}
	select {
	case <-wr.Done():
		t.Fatal("the append completed before its journal write")
	default:
	}
	if hw := repl.HighWatermark(); hw != 1 {
		t.Fatalf("HW %d moved before the barrier", hw)
	}
	if hw := solo.HighWatermark(); hw != 1 {
		t.Fatalf("unreplicated partition's HW %d moved before the barrier", hw)
	}
	// Release the journal write: drain the pipe (the hook stays: the
	// owner reads it without a lock) whenever it has bytes, until the
	// engine is closed and the stop pipe's write end with it.
	var stop [2]int
	if err := syscall.Pipe2(stop[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(stop[0])
	stopDrain := sync.OnceFunc(func() { syscall.Close(stop[1]) })
	defer stopDrain()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 1<<16)
		pfds := []unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLIN}, {Fd: int32(stop[0]), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(pfds, -1); err != nil && err != unix.EINTR {
				t.Errorf("polling the journal pipe: %v", err)
				return
			}
			if pfds[1].Revents != 0 {
				return
			}
			if pfds[0].Revents != 0 {
				if n, err := syscall.Read(fds[0], buf); err == syscall.EBADF || (err == nil && n == 0) {
					return
				}
			}
		}
	}()
	for _, w := range []AppendWaiter{wr, ws} {
		if _, err := w.Result(); err != nil {
			t.Fatalf("append after the barrier: %v", err)
		}
	}
	e.Close()
	closed = true
	stopDrain()
	<-drained
	closeRead()
}
