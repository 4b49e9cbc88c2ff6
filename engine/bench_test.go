package engine

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
)

// BenchmarkAppend measures Append+wait throughput. With FsyncAlways the
// 16 goroutines per CPU share flushes (group commit).
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
			for _, parts := range []int32{1, 16, 256} {
				name := fmt.Sprintf("batch=%dKB/fsync=%v/partitions=%d", size>>10, policy, parts)
				b.Run(name, func(b *testing.B) { benchAppend(b, size, policy, parts) })
			}
		}
	}
}

func benchAppend(b *testing.B, size int, policy FsyncPolicy, parts int32) {
	cfg := testConfig(b.TempDir())
	cfg.Fsync = policy
	e, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.CreateTopic("bench", parts, nil); err != nil {
		b.Fatal(err)
	}
	ps := make([]*Partition, parts)
	for i := range ps {
		ps[i], _ = e.Partition("bench", int32(i))
	}
	tmpl := batchtest.Sized(size/100, size)
	var next atomic.Int64
	b.SetBytes(int64(len(tmpl)))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := ps[next.Add(1)%int64(parts)]
			w, err := p.Append(append([]byte(nil), tmpl...))
			if err == nil {
				_, err = w.Result()
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := e.Stats()
	b.ReportMetric(float64(st.Appends)/float64(max(st.Fdatasyncs, 1)), "appends/fdatasync")
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
