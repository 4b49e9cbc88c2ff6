package iouring

import (
	"fmt"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Writes cycle over a 64 MiB region of a temp file so the page cache, not
// file growth, is what is measured. Parallelism 4 gives 4*GOMAXPROCS
// submitting goroutines.
const benchRegion = 64 << 20

func BenchmarkWrite(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, sync := range []bool{false, true} {
			name := fmt.Sprintf("%dK/sync=%v", size>>10, sync)
			b.Run("uring/"+name, func(b *testing.B) { benchUring(b, size, sync) })
			b.Run("uring-pipelined/"+name, func(b *testing.B) { benchUringPipelined(b, size, sync) })
			b.Run("pwrite/"+name, func(b *testing.B) { benchPwrite(b, size, sync) })
		}
	}
}

func benchUring(b *testing.B, size int, sync bool) {
	e := newTestExecutor(b, DefaultExecutorConfig())
	fd := int(tempFile(b).Fd())
	slots := uint64(benchRegion / size)
	var next atomic.Uint64
	before := e.Stats()
	b.SetBytes(int64(size))
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, size)
		for pb.Next() {
			off := (next.Add(1) % slots) * uint64(size)
			ops := []Op{Write(fd, buf, off)}
			if sync {
				ops = Chain(ops[0], Fsync(fd, true))
			}
			res, err := e.Do(ops)
			if err != nil || res[0].Res != int32(size) {
				b.Errorf("write: %+v %v", res, err)
				return
			}
		}
	})
	b.StopTimer()
	s := e.Stats()
	b.ReportMetric(float64(s.SQEs-before.SQEs)/float64(s.Enters-before.Enters), "sqes/enter")
}

func benchPwrite(b *testing.B, size int, sync bool) {
	fd := int(tempFile(b).Fd())
	slots := uint64(benchRegion / size)
	var next atomic.Uint64
	b.SetBytes(int64(size))
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, size)
		for pb.Next() {
			off := (next.Add(1) % slots) * uint64(size)
			if n, err := unix.Pwrite(fd, buf, int64(off)); err != nil || n != size {
				b.Errorf("pwrite: %d %v", n, err)
				return
			}
			if sync {
				if err := unix.Fdatasync(fd); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}

// benchUringPipelined is the engine's pattern: each goroutine keeps up to 8
// batches in flight instead of waiting for each one.
func benchUringPipelined(b *testing.B, size int, sync bool) {
	e := newTestExecutor(b, DefaultExecutorConfig())
	fd := int(tempFile(b).Fd())
	slots := uint64(benchRegion / size)
	var next atomic.Uint64
	before := e.Stats()
	b.SetBytes(int64(size))
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		const window = 8
		bufs := make([][]byte, window)
		for i := range bufs {
			bufs[i] = make([]byte, size)
		}
		var inflight []*Batch
		i := 0
		for pb.Next() {
			if len(inflight) == window {
				if res := inflight[0].Wait(); res[0].Res != int32(size) {
					b.Errorf("write: %+v", res)
					return
				}
				inflight = inflight[1:]
			}
			off := (next.Add(1) % slots) * uint64(size)
			ops := []Op{Write(fd, bufs[i%window], off)}
			if sync {
				ops = Chain(ops[0], Fsync(fd, true))
			}
			batch, err := e.Submit(ops)
			if err != nil {
				b.Error(err)
				return
			}
			inflight = append(inflight, batch)
			i++
		}
		for _, p := range inflight {
			p.Wait()
		}
	})
	b.StopTimer()
	s := e.Stats()
	b.ReportMetric(float64(s.SQEs-before.SQEs)/float64(s.Enters-before.Enters), "sqes/enter")
}
