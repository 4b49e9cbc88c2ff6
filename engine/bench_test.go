package engine

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
)

// BenchmarkAppend measures Append-to-Done on both write paths side by side
// (io=uring and io=sync in one run). 64 goroutines per CPU append to the
// partitions round-robin, so group commit has something to group. Metrics:
// appends/s, MB/s (from SetBytes), p99 latency of Append-to-Done in µs,
// CPU seconds (user+sys, getrusage) per GB appended, fdatasyncs and, on
// io_uring, SQEs per io_uring_enter.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
			for _, parts := range []int32{1, 16, 256} {
				for _, io := range []string{"uring", "sync"} {
					name := fmt.Sprintf("batch=%dKB/fsync=%v/partitions=%d/io=%s", size>>10, policy, parts, io)
					b.Run(name, func(b *testing.B) { benchAppend(b, size, policy, parts, io) })
				}
			}
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchAppend(b *testing.B, size int, policy FsyncPolicy, parts int32, io string) {
	cfg := testConfig(b.TempDir())
	cfg.Fsync = policy
	cfg.IOMode = io
	e, err := Open(cfg)
	if err != nil {
		b.Skip(err) // io_uring unavailable here
	}
	defer e.Close()
	if e.IOPath() != io {
		b.Skipf("io=%s: engine chose %s (%s)", io, e.IOPath(), e.IOReason())
	}
	if _, err := e.CreateTopic("bench", parts, nil); err != nil {
		b.Fatal(err)
	}
	ps := make([]*Partition, parts)
	for i := range ps {
		ps[i], _ = e.Partition("bench", int32(i))
	}
	tmpl := batchtest.Sized(size/100, size)
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	before := e.Stats()
	b.SetBytes(int64(len(tmpl)))
	b.ReportAllocs()
	b.SetParallelism(64)
	runtime.GC()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := make([]time.Duration, 0, 1024)
		for pb.Next() {
			p := ps[next.Add(1)%int64(parts)]
			buf := append([]byte(nil), tmpl...)
			t0 := time.Now()
			w, err := p.Append(buf)
			if err == nil {
				_, err = w.Result()
			}
			mine = append(mine, time.Since(t0))
			if err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	elapsed := b.Elapsed()
	st := e.Stats()
	appends := st.Appends - before.Appends
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(appends)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(cpu.Seconds()/(float64(st.AppendedBytes-before.AppendedBytes)/1e9), "cpu-s/GB")
	b.ReportMetric(float64(appends)/float64(max(st.Fdatasyncs-before.Fdatasyncs, 1)), "appends/fdatasync")
	if io == "uring" {
		b.ReportMetric(float64(st.RingSQEs-before.RingSQEs)/float64(max(st.RingEnters-before.RingEnters, 1)), "sqes/enter")
	}
}

// BenchmarkRead measures Read of up to 1 MiB plus copying the range out.
func BenchmarkRead(b *testing.B) {
	cfg := testConfig(b.TempDir())
	cfg.Fsync = FsyncNever
	e, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	e.CreateTopic("r", 1, nil)
	p, _ := e.Partition("r", 0)
	tmpl := batchtest.Sized(100, 16<<10)
	for i := 0; i < 1024; i++ { // 16 MiB
		appendWait(b, p, append([]byte(nil), tmpl...))
	}
	end := p.Info().HighWatermark
	buf := make([]byte, 1<<20+len(tmpl))
	var off int64
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	for i := 0; i < b.N; i++ {
		res, err := p.Read(off, 1<<20, true)
		if err != nil {
			b.Fatal(err)
		}
		n := res.Data.Len()
		if _, err := res.Data.ReadAt(buf[:n], res.Data.Pos()); err != nil {
			b.Fatal(err)
		}
		res.Data.Release()
		total += int64(n)
		off += 64 * 100 // about one MiB of records further
		if off >= end {
			off = 0
		}
	}
	b.SetBytes(total / int64(b.N))
}
