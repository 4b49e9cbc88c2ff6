package iouring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newTestExecutor(t testing.TB, cfg ExecutorConfig) *Executor {
	t.Helper()
	needIOUring(t)
	e, err := NewExecutor(cfg)
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func mustOK(t *testing.T, res []Result, want ...int32) {
	t.Helper()
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i, r := range res {
		if r.Err != nil || r.Res != want[i] {
			t.Fatalf("op %d: res %d err %v, want %d", i, r.Res, r.Err, want[i])
		}
	}
}

func TestExecutorGroupsOfChains(t *testing.T) {
	e := newTestExecutor(t, DefaultExecutorConfig())
	fa, fb := tempFile(t), tempFile(t)
	a, b := int(fa.Fd()), int(fb.Fd())
	ops := append(
		Chain(Write(a, []byte("A1"), 0), Write(a, []byte("A2"), 2), Fsync(a, true)),
		Chain(Writev(b, [][]byte{[]byte("B1"), []byte("-v")}, 0), Fsync(b, false))...)
	res, err := e.Do(ops)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res, 2, 2, 0, 4, 0)
	rb := make([]byte, 4)
	res, err = e.Do([]Op{Read(a, rb, 0)})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res, 4)
	if string(rb) != "A1A2" {
		t.Fatalf("read back %q", rb)
	}
	if got, _ := os.ReadFile(fb.Name()); string(got) != "B1-v" {
		t.Fatalf("file B %q", got)
	}
}

func TestExecutorFailedChainCancelsOnlyItsRest(t *testing.T) {
	e := newTestExecutor(t, DefaultExecutorConfig())
	f := tempFile(t)
	fd := int(f.Fd())
	ops := append(
		Chain(Write(-1, []byte("x"), 0), Write(fd, []byte("lost"), 0), Fsync(fd, true)),
		Chain(Write(fd, []byte("kept"), 100), Fsync(fd, true))...)
	res, err := e.Do(ops)
	if err != nil {
		t.Fatal(err)
	}
	var oe *OpError
	if !errors.As(res[0].Err, &oe) || oe.Errno != syscall.EBADF || oe.Op != OpWrite {
		t.Fatalf("head: %v, want write EBADF", res[0].Err)
	}
	for i := 1; i < 3; i++ {
		if !errors.Is(res[i].Err, syscall.ECANCELED) {
			t.Fatalf("op %d: %v, want ECANCELED", i, res[i].Err)
		}
	}
	mustOK(t, res[3:], 4, 0)
	got, _ := os.ReadFile(f.Name())
	if len(got) != 104 || string(got[100:]) != "kept" || bytes.Contains(got, []byte("lost")) {
		t.Fatalf("file content %q", got)
	}
}

func TestExecutorRejects(t *testing.T) {
	e := newTestExecutor(t, ExecutorConfig{Entries: 8, MaxQueuedOps: 64})
	nops := func() []Op {
		ops := make([]Op, 9)
		for i := range ops {
			ops[i] = Nop()
		}
		return ops
	}
	if _, err := e.Submit(Chain(nops()...)); !errors.Is(err, ErrChainTooLong) {
		t.Fatalf("9-op chain on an 8-entry ring: %v", err)
	}
	// The same ops unlinked are fine: they are independent.
	if res, err := e.Do(nops()); err != nil || len(res) != 9 {
		t.Fatalf("unlinked: %v %v", res, err)
	}
	if _, err := e.Submit([]Op{{Code: Opcode(200)}}); !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("bad opcode: %v", err)
	}
	b, err := e.Submit(nil)
	if err != nil || len(b.Wait()) != 0 {
		t.Fatalf("empty batch: %v", err)
	}
}

// TestExecutorSQFullFIFO pushes 10k ops through a 64-entry ring: most of
// them wait in the FIFO, chains of three must never be split.
func TestExecutorSQFullFIFO(t *testing.T) {
	e := newTestExecutor(t, ExecutorConfig{Entries: 64, CQEntries: 64, MaxQueuedOps: 1 << 20})
	f := tempFile(t)
	fd := int(f.Fd())
	const chains = 3334 // 10002 ops
	var ops []Op
	for i := range chains {
		var rec [8]byte
		binary.LittleEndian.PutUint64(rec[:], uint64(i))
		ops = append(ops, Chain(Write(fd, rec[:4], uint64(i*8)), Write(fd, rec[4:], uint64(i*8+4)), Nop())...)
	}
	res, err := e.Do(ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := int32(4)
		if i%3 == 2 {
			want = 0
		}
		if r.Err != nil || r.Res != want {
			t.Fatalf("op %d: %+v", i, r)
		}
	}
	got, _ := os.ReadFile(f.Name())
	for i := range chains {
		if v := binary.LittleEndian.Uint64(got[i*8:]); v != uint64(i) {
			t.Fatalf("record %d = %d", i, v)
		}
	}
	s := e.Stats()
	if s.Enters == 0 || s.BatchingFactor() < 2 {
		t.Fatalf("expected batching, stats %+v", s)
	}
	t.Logf("stats %+v, batching %.1f SQEs/enter", s, s.BatchingFactor())
}

// TestExecutorConcurrentSubmitters runs many goroutines with interleaved
// group commits against one file; run under -race.
func TestExecutorConcurrentSubmitters(t *testing.T) {
	e := newTestExecutor(t, ExecutorConfig{Entries: 32, CQEntries: 128, MaxQueuedOps: 256, ChannelDepth: 4})
	f := tempFile(t)
	fd := int(f.Fd())
	const workers, rounds, size = 16, 100, 64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			var pending []*Batch
			for r := range rounds {
				off := uint64((w*rounds + r) * size)
				buf := bytes.Repeat([]byte{byte(w*rounds + r)}, size)
				b, err := e.Submit(Chain(Write(fd, buf[:size/2], off), Write(fd, buf[size/2:], off+size/2), Fsync(fd, true)))
				if err != nil {
					errc <- err
					return
				}
				pending = append(pending, b) // several groups in flight per worker
				if len(pending) == 4 {
					for _, p := range pending {
						for _, res := range p.Wait() {
							if res.Err != nil {
								errc <- res.Err
								return
							}
						}
					}
					pending = pending[:0]
				}
			}
			for _, p := range pending {
				p.Wait()
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if len(got) != workers*rounds*size {
		t.Fatalf("file size %d", len(got))
	}
	for i := range workers * rounds {
		if !bytes.Equal(got[i*size:(i+1)*size], bytes.Repeat([]byte{byte(i)}, size)) {
			t.Fatalf("block %d corrupt", i)
		}
	}
	t.Logf("stats %+v", e.Stats())
}

// TestExecutorPipelining keeps one op blocked in the kernel (a pipe read) and
// checks that later batches are accepted, submitted and completed meanwhile:
// the owner must be woken from io_uring_enter by new work.
func TestExecutorPipelining(t *testing.T) {
	e := newTestExecutor(t, DefaultExecutorConfig())
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	buf := make([]byte, 1)
	blocked, err := e.Submit([]Op{Read(p[0], buf, 0)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let the owner park in io_uring_enter
	for range 50 {
		done := make(chan []Result, 1)
		go func() {
			res, _ := e.Do([]Op{Nop()})
			done <- res
		}()
		select {
		case res := <-done:
			mustOK(t, res, 0)
		case <-time.After(5 * time.Second):
			t.Fatal("a NOP did not complete while another op was in flight: owner not woken")
		}
	}
	select {
	case <-blocked.Done():
		t.Fatal("pipe read completed without data")
	default:
	}
	unix.Write(p[1], []byte{'z'})
	if res := blocked.Wait(); res[0].Res != 1 || buf[0] != 'z' {
		t.Fatalf("pipe read %+v %q", res, buf)
	}
}

func TestExecutorWakesFromIdle(t *testing.T) {
	e := newTestExecutor(t, DefaultExecutorConfig())
	for range 5 {
		time.Sleep(10 * time.Millisecond)
		done := make(chan struct{})
		go func() {
			e.Do([]Op{Nop()})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("idle executor did not pick up work")
		}
	}
}

func TestExecutorCloseDrains(t *testing.T) {
	needIOUring(t)
	e, err := NewExecutor(ExecutorConfig{Entries: 16, MaxQueuedOps: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	f := tempFile(t)
	var batches []*Batch
	for i := range 500 {
		b, err := e.Submit(Chain(Write(int(f.Fd()), []byte("12345678"), uint64(i*8)), Fsync(int(f.Fd()), true)))
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		select {
		case <-b.Done():
		default:
			t.Fatalf("batch %d not done after Close", i)
		}
		mustOK(t, b.Wait(), 8, 0)
	}
	if _, err := e.Submit([]Op{Nop()}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestExecutorUnderSignals signals the owner's thread continuously (as Go's
// preemption does) while a CPU-bound goroutine also forces async
// preemption, and checks every op still completes exactly once.
func TestExecutorUnderSignals(t *testing.T) {
	e := newTestExecutor(t, ExecutorConfig{Entries: 32, MaxQueuedOps: 4096})
	f := tempFile(t)
	fd := int(f.Fd())
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		pid := unix.Getpid()
		for {
			select {
			case <-stop:
				return
			default:
				unix.Tgkill(pid, e.tid, unix.SIGURG)
				time.Sleep(50 * time.Microsecond)
			}
		}
	})
	bg.Go(func() {
		x := 0
		for {
			select {
			case <-stop:
				_ = x
				return
			default:
			}
			for i := range 1 << 20 {
				x += i
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 250 {
				off := uint64((w*250 + i) * 4)
				res, err := e.Do(Chain(Write(fd, []byte{byte(w), 1, 2, 3}, off), Fsync(fd, true)))
				if err != nil || res[0].Res != 4 || res[1].Err != nil {
					t.Errorf("worker %d op %d: %+v %v", w, i, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if st, _ := f.Stat(); st.Size() != 4*250*4 {
		t.Fatalf("size %d", st.Size())
	}
	t.Logf("stats %+v", e.Stats())
}
