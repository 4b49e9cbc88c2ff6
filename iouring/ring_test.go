package iouring

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestProbe(t *testing.T) {
	info := needIOUring(t)
	if !info.Available || info.Err != nil {
		t.Fatalf("Probe without error but info = %+v", info)
	}
	if info.SetupFlags&^DefaultSetupFlags != 0 {
		t.Fatalf("accepted flags %s not a subset of requested %s",
			SetupFlagNames(info.SetupFlags), SetupFlagNames(DefaultSetupFlags))
	}
	if info.Features&FeatSingleMmap == 0 {
		t.Logf("kernel without SINGLE_MMAP: separate CQ mapping path in use")
	}
	t.Logf("setup flags %s, features %#x", SetupFlagNames(info.SetupFlags), info.Features)
}

func TestSetupErrorMapping(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.ENOSYS} {
		err := setupError(errno)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errno) {
			t.Errorf("setupError(%v) = %v: want ErrUnavailable wrapping the errno", errno, err)
		}
	}
	if err := setupError(syscall.EFAULT); errors.Is(err, ErrUnavailable) {
		t.Errorf("EFAULT must not read as unavailable: %v", err)
	}
	if err := enterError(syscall.EBUSY); !errors.Is(err, ErrCQOverflow) || !errors.Is(err, syscall.EBUSY) {
		t.Errorf("enterError(EBUSY) = %v", err)
	}
}

func TestNop(t *testing.T) {
	r := newTestRing(t, 8)
	for i := range 3 {
		sqe := r.GetSQE()
		PrepNop(sqe)
		sqe.SetUserData(uint64(100 + i))
	}
	n, err := r.SubmitAndWait(3)
	if err != nil || n != 3 {
		t.Fatalf("SubmitAndWait = %d, %v", n, err)
	}
	got := byUserData(reapN(t, r, 3))
	for i := range 3 {
		c, ok := got[uint64(100+i)]
		if !ok || c.Res != 0 {
			t.Fatalf("nop %d: %+v present=%v", i, c, ok)
		}
	}
	if _, ok := r.PeekCQE(); ok {
		t.Fatal("CQ should be empty after reaping")
	}
	if s := r.Stats(); s.SQEs != 3 || s.CQEs != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestGetSQEFull(t *testing.T) {
	r := newTestRing(t, 4)
	for i := uint32(0); i < r.SQEntries(); i++ {
		if r.GetSQE() == nil {
			t.Fatalf("GetSQE nil after %d of %d", i, r.SQEntries())
		}
	}
	if r.GetSQE() != nil {
		t.Fatal("GetSQE must return nil when the SQ is full")
	}
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	reapN(t, r, int(r.SQEntries())) // zeroed SQEs are NOPs
	if r.GetSQE() == nil {
		t.Fatal("GetSQE nil after submit")
	}
}

func TestWriteWritevReadBack(t *testing.T) {
	r := newTestRing(t, 16)
	f := tempFile(t)
	fd := int(f.Fd())
	a := []byte("AAAA")
	b1, b2 := []byte("bb"), []byte("BBBBBB")
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&a[0])
	pin.Pin(&b1[0])
	pin.Pin(&b2[0])
	iov := make([]unix.Iovec, 2)
	iov[0].Base, iov[1].Base = &b1[0], &b2[0]
	iov[0].SetLen(len(b1))
	iov[1].SetLen(len(b2))
	pin.Pin(&iov[0])

	s := r.GetSQE()
	PrepWrite(s, fd, a, 4096)
	s.SetUserData(1)
	s = r.GetSQE()
	PrepWritev(s, fd, iov, 10)
	s.SetUserData(2)
	if _, err := r.SubmitAndWait(2); err != nil {
		t.Fatal(err)
	}
	got := byUserData(reapN(t, r, 2))
	if got[1].Res != 4 || got[2].Res != 8 {
		t.Fatalf("write results %+v", got)
	}

	disk, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != 4100 || string(disk[10:18]) != "bbBBBBBB" || string(disk[4096:]) != "AAAA" {
		t.Fatalf("file content wrong: len %d, [10:18]=%q, tail=%q", len(disk), disk[10:18], disk[4096:])
	}

	rb := make([]byte, 12)
	pin.Pin(&rb[0])
	s = r.GetSQE()
	PrepRead(s, fd, rb, 8)
	s.SetUserData(3)
	if _, err := r.SubmitAndWait(1); err != nil {
		t.Fatal(err)
	}
	c := reapN(t, r, 1)[0]
	if c.UserData != 3 || c.Res != 12 || !bytes.Equal(rb, disk[8:20]) {
		t.Fatalf("read %+v got %q want %q", c, rb, disk[8:20])
	}
}

func TestLinkedWriteFsync(t *testing.T) {
	r := newTestRing(t, 8)
	f := tempFile(t)
	fd := int(f.Fd())
	w1, w2 := bytes.Repeat([]byte{1}, 4096), bytes.Repeat([]byte{2}, 4096)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&w1[0])
	pin.Pin(&w2[0])
	s := r.GetSQE()
	PrepWrite(s, fd, w1, 0)
	s.SetFlags(SQEIOLink)
	s.SetUserData(1)
	s = r.GetSQE()
	PrepWrite(s, fd, w2, 4096)
	s.SetFlags(SQEIOLink)
	s.SetUserData(2)
	s = r.GetSQE()
	PrepFsync(s, fd, true)
	s.SetUserData(3)
	if s.opFlags != FsyncDatasync {
		t.Fatalf("datasync flag not set: %#x", s.opFlags)
	}
	if n, err := r.SubmitAndWait(3); err != nil || n != 3 {
		t.Fatalf("SubmitAndWait = %d, %v", n, err)
	}
	cqes := reapN(t, r, 3)
	// A link chain completes in order.
	for i, c := range cqes {
		if c.UserData != uint64(i+1) {
			t.Fatalf("completion %d is user_data %d, want %d (chain order)", i, c.UserData, i+1)
		}
	}
	got := byUserData(cqes)
	if got[1].Res != 4096 || got[2].Res != 4096 || got[3].Res != 0 {
		t.Fatalf("results %+v", got)
	}
}

func TestLinkedFailureCancelsRest(t *testing.T) {
	r := newTestRing(t, 8)
	f := tempFile(t)
	buf := []byte("data")
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&buf[0])
	s := r.GetSQE()
	PrepWrite(s, -1, buf, 0) // EBADF
	s.SetFlags(SQEIOLink)
	s.SetUserData(1)
	s = r.GetSQE()
	PrepWrite(s, int(f.Fd()), buf, 0)
	s.SetFlags(SQEIOLink)
	s.SetUserData(2)
	s = r.GetSQE()
	PrepFsync(s, int(f.Fd()), false)
	s.SetUserData(3)
	if _, err := r.SubmitAndWait(3); err != nil {
		t.Fatal(err)
	}
	got := byUserData(reapN(t, r, 3))
	if err := resultError(OpWrite, got[1].Res); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("head: %v, want EBADF", err)
	}
	for _, u := range []uint64{2, 3} {
		if err := resultError(OpWrite, got[u].Res); !errors.Is(err, syscall.ECANCELED) {
			t.Fatalf("op %d: %v, want ECANCELED", u, err)
		}
	}
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Fatalf("cancelled write reached the file: size %d", st.Size())
	}
}

func TestCQOverflowNoDrop(t *testing.T) {
	r := newTestRing(t, 8, WithCQSize(8))
	if r.Features()&FeatNoDrop == 0 {
		t.Skip("kernel without IORING_FEAT_NODROP")
	}
	if r.CQEntries() != 8 {
		t.Fatalf("CQ entries %d, want 8", r.CQEntries())
	}
	const rounds = 5
	submitted := 0
	for round := range rounds {
		for i := range 8 {
			s := r.GetSQE()
			PrepNop(s)
			s.SetUserData(uint64(round*8 + i))
		}
		// Submit without reaping: from round 2 on the CQ is full and the
		// kernel must keep the rest on its overflow list.
		n, err := r.Submit()
		submitted += n
		if err != nil {
			if !errors.Is(err, ErrCQOverflow) {
				t.Fatal(err)
			}
			// EBUSY: the kernel wants the CQ reaped before it takes more.
			// The unsubmitted SQEs stay queued, so no further round fits.
			t.Logf("EBUSY at round %d after %d submitted; reaping is the caller's move", round, submitted)
			break
		}
	}
	if r.CQReady() != 8 {
		t.Fatalf("CQ ready %d, want full (8)", r.CQReady())
	}
	cqes := reapN(t, r, submitted)
	seen := byUserData(cqes)
	if len(seen) != submitted || submitted < 16 {
		t.Fatalf("reaped %d unique of %d submitted", len(seen), submitted)
	}
	if r.SQSpace() != r.SQEntries() {
		// Anything EBUSY left in the SQ is submitted now.
		if _, err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSubmitFromOtherThreadIsWrongThread(t *testing.T) {
	r := newTestRing(t, 4)
	if r.SetupFlags()&SetupSingleIssuer == 0 {
		t.Skip("no SINGLE_ISSUER on this kernel")
	}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // a thread that is surely not the creator
		defer runtime.UnlockOSThread()
		PrepNop(r.GetSQE())
		_, err := r.Submit()
		errc <- err
	}()
	if err := <-errc; !errors.Is(err, ErrWrongThread) {
		t.Fatalf("submit from another thread: %v, want ErrWrongThread", err)
	}
}

func countFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func countUringMaps(t *testing.T) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "io_uring")
}

func TestCloseReleasesEverything(t *testing.T) {
	needIOUring(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fds, maps := countFds(t), countUringMaps(t)
	for range 20 {
		r, err := New(64)
		if err != nil {
			t.Fatal(err)
		}
		if countUringMaps(t) == maps {
			t.Fatal("expected io_uring mappings while the ring is open")
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
	}
	if got := countFds(t); got != fds {
		t.Fatalf("fd leak: %d open before, %d after", fds, got)
	}
	if got := countUringMaps(t); got != maps {
		t.Fatalf("mapping leak: %d io_uring maps before, %d after", maps, got)
	}
}

// TestEnterRetriesEINTR blocks in io_uring_enter on a pipe read while another
// goroutine keeps signalling exactly that thread (SIGURG, Go's preemption
// signal, which the runtime ignores when unexpected).
func TestEnterRetriesEINTR(t *testing.T) {
	r := newTestRing(t, 4)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	buf := make([]byte, 1)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&buf[0])
	s := r.GetSQE()
	PrepRead(s, p[0], buf, 0)
	s.SetUserData(7)

	tid, pid := unix.Gettid(), unix.Getpid()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		deadline := time.After(200 * time.Millisecond)
		for {
			select {
			case <-deadline:
				unix.Write(p[1], []byte{'x'})
				<-stop
				return
			default:
				unix.Tgkill(pid, tid, unix.SIGURG)
				time.Sleep(time.Millisecond) // pacing: a signal a millisecond while the read blocks
			}
		}
	})
	n, err := r.SubmitAndWait(1)
	close(stop)
	wg.Wait()
	if err != nil || n != 1 {
		t.Fatalf("SubmitAndWait = %d, %v; want the signals retried away", n, err)
	}
	c := reapN(t, r, 1)[0]
	if c.UserData != 7 || c.Res != 1 || buf[0] != 'x' {
		t.Fatalf("cqe %+v buf %q", c, buf)
	}
	// Go installs its handlers with SA_RESTART, so recent kernels restart
	// the wait instead of returning EINTR; TestEnterEINTRInjected covers the
	// retry itself.
	t.Logf("EINTR retries seen: %d", r.Stats().Interrupts)
}

// TestEnterEINTRInjected makes io_uring_enter fail with EINTR before and
// after the kernel consumed the SQEs, and checks nothing is submitted twice
// or lost.
func TestEnterEINTRInjected(t *testing.T) {
	r := newTestRing(t, 8)
	calls := 0
	enter = func(fd int, toSubmit, minComplete, flags uint32) (int, error) {
		calls++
		switch calls {
		case 1:
			return 0, syscall.EINTR // signal before anything was consumed
		case 2:
			n, err := sysEnter(fd, toSubmit, 0, flags)
			if err != nil {
				return n, err
			}
			return 0, syscall.EINTR // consumed, then interrupted while waiting
		}
		return sysEnter(fd, toSubmit, minComplete, flags)
	}
	defer func() { enter = sysEnter }()
	for i := range 4 {
		s := r.GetSQE()
		PrepNop(s)
		s.SetUserData(uint64(i))
	}
	if _, err := r.SubmitAndWait(4); err != nil {
		t.Fatal(err)
	}
	if calls != 3 || r.Stats().Interrupts != 2 {
		t.Fatalf("enter calls %d, interrupts %d; want 3 and 2", calls, r.Stats().Interrupts)
	}
	if got := byUserData(reapN(t, r, 4)); len(got) != 4 {
		t.Fatalf("completions %v", got)
	}
	if r.CQReady() != 0 {
		t.Fatalf("%d extra completions: SQEs submitted twice", r.CQReady())
	}
}

// An older kernel answers EINVAL to flags it does not know: New drops them
// newest first, one per attempt, and reports what was accepted. Other
// errors are returned at once.
func TestSetupFlagFallback(t *testing.T) {
	needIOUring(t)
	real := setup
	t.Cleanup(func() { setup = real })
	var tried []uint32
	// A "5.19" kernel: no SINGLE_ISSUER (6.0), no DEFER_TASKRUN (6.1).
	setup = func(entries uint32, p *params) (int, error) {
		tried = append(tried, p.flags)
		if p.flags&(SetupSingleIssuer|SetupDeferTaskrun) != 0 {
			return -1, syscall.EINVAL
		}
		return real(entries, p)
	}
	runtime.LockOSThread() // SINGLE_ISSUER, should it be kept
	defer runtime.UnlockOSThread()
	r, err := New(8, WithSetupFlags(SetupSingleIssuer|SetupDeferTaskrun|SetupCoopTaskrun))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.SetupFlags(); got&(SetupSingleIssuer|SetupDeferTaskrun) != 0 || got&SetupCoopTaskrun == 0 {
		t.Fatalf("setup flags %#x: want COOP_TASKRUN kept, SINGLE_ISSUER and DEFER_TASKRUN dropped", got)
	}
	if len(tried) != 3 || tried[1]&SetupDeferTaskrun != 0 || tried[1]&SetupSingleIssuer == 0 {
		t.Fatalf("attempts %#x: want DEFER_TASKRUN dropped first, then SINGLE_ISSUER", tried)
	}
	// The ring works with what was accepted.
	s := r.GetSQE()
	PrepNop(s)
	s.SetUserData(7)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if c := reapN(t, r, 1); c[0].UserData != 7 || c[0].Res != 0 {
		t.Fatalf("nop completion %+v", c[0])
	}

	// EPERM (io_uring_disabled, seccomp) is not a flag problem.
	tried = nil
	setup = func(uint32, *params) (int, error) {
		tried = append(tried, 0)
		return -1, syscall.EPERM
	}
	if _, err := New(8); !errors.Is(err, ErrUnavailable) && !errors.Is(err, syscall.EPERM) {
		t.Fatalf("EPERM: got %v", err)
	}
	if len(tried) != 1 {
		t.Fatalf("EPERM retried %d times", len(tried))
	}
}

// SetIOWQMaxWorkers reports the previous caps and takes new ones.
func TestSetIOWQMaxWorkers(t *testing.T) {
	r := newTestRing(t, 8)
	prevB, _, err := r.SetIOWQMaxWorkers(64, 0)
	if errors.Is(err, syscall.EINVAL) {
		t.Skip("kernel before 5.15")
	}
	if err != nil || prevB == 0 {
		t.Fatalf("SetIOWQMaxWorkers: prev bounded %d, %v", prevB, err)
	}
	// Zero reads the caps back unchanged.
	b, u, err := r.SetIOWQMaxWorkers(0, 0)
	if err != nil || b != 64 || u == 0 {
		t.Fatalf("caps read back %d/%d, %v; want bounded 64", b, u, err)
	}
}

// A registered eventfd fires for completions the kernel posts while no
// one is inside io_uring_enter (an fsync finishing on an io-wq worker
// after a submit that did not wait), so an owner can wait for them in
// the Go netpoller. DEFER_TASKRUN would hold them back until the next
// enter; the ring is set up without it.
func TestRegisteredEventfdSignalsCompletions(t *testing.T) {
	r := newTestRing(t, 8, WithSetupFlags(SetupSubmitAll))
	if r.SetupFlags()&SetupDeferTaskrun != 0 {
		t.Fatal("DEFER_TASKRUN set although not asked for")
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := r.RegisterEventfd(efd); err != nil {
		t.Fatal(err)
	}
	f := tempFile(t)
	buf := bytes.Repeat([]byte("x"), 4096)
	w := r.GetSQE()
	PrepWrite(w, int(f.Fd()), buf, 0)
	w.SetFlags(SQEIOLink)
	w.SetUserData(1)
	s := r.GetSQE()
	PrepFsync(s, int(f.Fd()), true)
	s.SetUserData(2)
	if n, err := r.Submit(); err != nil || n != 2 {
		t.Fatalf("Submit = %d, %v", n, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	fired := false
	for r.CQReady() < 2 {
		// Wait on the eventfd only, never in io_uring_enter.
		fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 1000); err != nil && err != syscall.EINTR {
			t.Fatal(err)
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			var b [8]byte
			if _, err := unix.Read(efd, b[:]); err != nil {
				t.Fatal(err)
			}
			fired = true
		} else if time.Now().After(deadline) {
			t.Fatalf("eventfd never fired; %d completions posted", r.CQReady())
		}
	}
	var b [8]byte
	if _, err := unix.Read(efd, b[:]); !fired && err != nil {
		t.Fatalf("completions posted without signalling the eventfd: %v", err)
	}
	got := byUserData(reapN(t, r, 2))
	if got[1].Res != 4096 || got[2].Res != 0 {
		t.Fatalf("completions %+v", got)
	}
}
