package iouring

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Writes cycle over a 64 MiB region of a temp file so the page cache, not
// file growth, is what is measured.
const benchRegion = 64 << 20

func BenchmarkWrite(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, sync := range []bool{false, true} {
			name := fmt.Sprintf("%dK/sync=%v", size>>10, sync)
			b.Run("uring-pipelined/"+name, func(b *testing.B) { benchUringPipelined(b, size, sync) })
			b.Run("pwrite/"+name, func(b *testing.B) { benchPwrite(b, size, sync) })
		}
	}
}

func benchPwrite(b *testing.B, size int, sync bool) {
	fd := int(tempFile(b).Fd())
	slots := int64(benchRegion / size)
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := range int64(b.N) {
		off := (i % slots) * int64(size)
		if n, err := unix.Pwrite(fd, buf, off); err != nil || n != size {
			b.Fatalf("pwrite: %d %v", n, err)
		}
		if sync {
			if err := unix.Fdatasync(fd); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchUringPipelined is the engine's pattern on the raw ring, from one
// owner goroutine: up to window writes (each with a linked fdatasync when
// sync) in flight, one io_uring_enter per round that submits what is
// prepared and waits for one completion.
func benchUringPipelined(b *testing.B, size int, sync bool) {
	needIOUring(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := New(64)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	fd := int(tempFile(b).Fd())
	slots := uint64(benchRegion / size)
	const window = 8
	bufs := make([][]byte, window)
	var pin runtime.Pinner
	defer pin.Unpin()
	for i := range bufs {
		bufs[i] = make([]byte, size)
		pin.Pin(&bufs[i][0])
	}
	perOp := 1
	if sync {
		perOp = 2
	}
	before := r.Stats()
	b.SetBytes(int64(size))
	b.ResetTimer()
	sent, done, inflight := 0, 0, 0
	for done < b.N {
		for sent < b.N && inflight < window*perOp {
			off := (uint64(sent) % slots) * uint64(size)
			w := r.GetSQE()
			PrepWrite(w, fd, bufs[sent%window], off)
			w.SetUserData(uint64(OpWrite))
			if sync {
				w.SetFlags(SQEIOLink)
				s := r.GetSQE()
				PrepFsync(s, fd, true)
				s.SetUserData(uint64(OpFsync))
			}
			sent++
			inflight += perOp
		}
		if _, err := r.SubmitAndWait(1); err != nil && !errors.Is(err, ErrCQOverflow) {
			b.Fatal(err)
		}
		r.ForEachCQE(func(c CQE) {
			inflight--
			if c.Res < 0 || c.UserData == uint64(OpWrite) && c.Res != int32(size) {
				b.Errorf("%v: res %d", Opcode(c.UserData), c.Res)
			}
			if c.UserData == uint64(OpWrite) {
				done++
			}
		})
	}
	b.StopTimer()
	s := r.Stats()
	b.ReportMetric(float64(s.SQEs-before.SQEs)/float64(s.Enters-before.Enters), "sqes/enter")
}
