package core

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchBench compares the fetch paths side by side: consumer throughput
// and broker CPU seconds per GB for plaintext sendfile, plaintext
// --fetch-copy and TLS, with the data in page cache, against iperf3's
// loopback bandwidth. Each path is read by two consumers: a lean raw
// Fetch loop (rawConsume) that measures the broker, and franz-go as the
// real client. It is a measurement, not an assertion: it only runs
// with RINGLOG_FETCH_BENCH=1 and prints a markdown table.
//
//	RINGLOG_FETCH_BENCH=1 RINGLOG_TEST_BIN=$PWD/bin/ringlog \
//	  go test -run TestFetchBench -v -timeout 20m ./cmd/ringlog/
//
// RINGLOG_FETCH_BENCH_MB sets the data size (default 2048).
func TestFetchBench(t *testing.T) {
	harness.Processes(t) // a benchmark: the broker's own CPU time, restarted
	if os.Getenv("RINGLOG_FETCH_BENCH") != "1" {
		t.Skip("set RINGLOG_FETCH_BENCH=1 to run the fetch benchmark")
	}
	sizeMB := 2048
	if v := os.Getenv("RINGLOG_FETCH_BENCH_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("RINGLOG_FETCH_BENCH_MB=%q", v)
		}
		sizeMB = n
	}
	const (
		topic      = "fetchbench"
		partitions = 4
		valueSize  = 64 << 10 // large records keep client decode cost low
	)
	records := sizeMB << 20 / valueSize
	dataDir := t.TempDir()
	b, certs := harness.StartTLSBroker(t, dataDir, false, "--fsync", "never", "--log-level", "info")

	ctx := harness.Context(t, 15*time.Minute)
	adm := kadm.NewClient(b.Client(t))
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Uncompressed random values: fetched bytes on the wire = bytes on disk.
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedRecords(256))
	value := make([]byte, valueSize)
	rand.New(rand.NewSource(1)).Read(value)
	for i := 0; i < records; i++ {
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d MiB in %v", sizeMB, time.Since(start).Round(time.Millisecond))

	// The end offsets bound the raw consumer (the franz-go one counts
	// records).
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	endOffsets := make([]int64, partitions)
	ends.Each(func(o kadm.ListedOffset) { endOffsets[o.Partition] = o.Offset })

	type result struct {
		mode       string
		consumer   string
		bytes      int64 // record value bytes
		wall       time.Duration
		cpu        time.Duration // broker utime+stime
		clientCPU  time.Duration // this test process (the consumer)
		csw        int64         // broker context switches (all threads)
		zeroCopyMB float64
		copyMB     float64
	}
	var results []result
	run := func(mode, consumer, addr string, tlsCfg *tls.Config) {
		// One warm-up pass puts the segments in page cache (and warms the
		// client); the measured pass follows immediately.
		for pass := 0; pass < 2; pass++ {
			m0 := b.Metrics(t)
			cpu0, csw0 := procCPU(t, b.Pid()), procCtxSwitches(b.Pid())
			self0 := selfCPU()
			t0 := time.Now()
			var n int64
			if consumer == "franz-go" {
				var opts []kgo.Opt
				if tlsCfg != nil {
					opts = append(opts, kgo.DialTLSConfig(tlsCfg))
				}
				n = consumeBytes(ctx, t, addr, topic, partitions, records, opts...)
			} else {
				n = rawConsume(ctx, t, addr, tlsCfg, topic, endOffsets, valueSize)
			}
			wall := time.Since(t0)
			self := selfCPU() - self0
			cpu, csw := procCPU(t, b.Pid())-cpu0, procCtxSwitches(b.Pid())-csw0
			m1 := b.Metrics(t)
			if pass == 0 {
				continue
			}
			listener := "plaintext"
			if tlsCfg != nil {
				listener = "tls"
			}
			results = append(results, result{
				mode: mode, consumer: consumer, bytes: n, wall: wall, cpu: cpu, clientCPU: self, csw: csw,
				zeroCopyMB: (fetchBytes(m1, listener, "zero-copy") - fetchBytes(m0, listener, "zero-copy")) / (1 << 20),
				copyMB:     (fetchBytes(m1, listener, "copy") - fetchBytes(m0, listener, "copy")) / (1 << 20),
			})
		}
	}
	tlsCfg := certs.ClientConfig(t, false)
	for _, consumer := range []string{"raw", "franz-go"} {
		run("plaintext-sendfile", consumer, b.Addr, nil)
		run("tls", consumer, b.TLSAddr, tlsCfg)
	}
	// Same data dir, same page cache, broker restarted with --fetch-copy.
	b.Stop()
	b.Args = append(b.Args, "--fetch-copy")
	b.Restart()
	for _, consumer := range []string{"raw", "franz-go"} {
		run("plaintext-copy", consumer, b.Addr, nil)
	}

	iperf := iperf3Gbps(t)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| mode | consumer | MiB | s | MB/s | Gbit/s | %% of iperf3 | broker CPU s | broker CPU s/GB | client CPU s/GB | broker csw/GB | zero-copy MiB | copy MiB |\n")
	fmt.Fprintf(&sb, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	cpuPerGB := map[string]float64{}
	for _, r := range results {
		secs := r.wall.Seconds()
		gb := float64(r.bytes) / 1e9
		gbps := gb * 8 / secs
		cpuGB := r.cpu.Seconds() / gb
		cpuPerGB[r.mode+"/"+r.consumer] = cpuGB
		fmt.Fprintf(&sb, "| %s | %s | %d | %.2f | %.0f | %.2f | %.0f%% | %.2f | %.3f | %.3f | %.0f | %.0f | %.0f |\n",
			r.mode, r.consumer, r.bytes>>20, secs, gb*1e3/secs, gbps, 100*gbps/iperf,
			r.cpu.Seconds(), cpuGB, r.clientCPU.Seconds()/gb, float64(r.csw)/gb, r.zeroCopyMB, r.copyMB)
	}
	fmt.Fprintf(&sb, "\niperf3 -c 127.0.0.1 -t 10: %.2f Gbit/s\n", iperf)
	for _, consumer := range []string{"raw", "franz-go"} {
		if c, z := cpuPerGB["plaintext-copy/"+consumer], cpuPerGB["plaintext-sendfile/"+consumer]; c > 0 {
			fmt.Fprintf(&sb, "%s: sendfile broker CPU/GB = %.2f x copy (target <= 0.50)\n", consumer, z/c)
		}
	}
	t.Log(sb.String())
}

// rawConsume is a lean consumer: one connection, FetchRequest v12 with
// large limits, two requests in flight (each for half the partitions), and
// responses read into one reused buffer. Records are never decoded: each
// partition's next offset comes from its last batch header. It returns the
// value bytes consumed, counted as records * valueSize so the number is
// comparable with consumeBytes (the topic holds only valueSize records).
func rawConsume(ctx context.Context, t *testing.T, addr string, tlsCfg *tls.Config, topic string, ends []int64, valueSize int) int64 {
	t.Helper()
	var (
		nc  net.Conn
		err error
	)
	d := net.Dialer{Timeout: 5 * time.Second}
	if tlsCfg != nil {
		nc, err = tls.DialWithDialer(&d, "tcp", addr, tlsCfg)
	} else {
		nc, err = d.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}

	const depth = 2 // requests in flight, one per partition group
	next := make([]int64, len(ends))
	remaining := int64(0)
	for _, e := range ends {
		remaining += e
	}
	// group g fetches partitions p with p%depth == g.
	var (
		corr  int32
		out   []byte
		group = map[int32]int{} // correlation id -> group
	)
	send := func(g int) bool {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = -1
		req.MaxWaitMillis = 500
		req.MinBytes = 1
		req.MaxBytes = 64 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p := g; p < len(ends); p += depth {
			if next[p] >= ends[p] {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(p)
			rp.FetchOffset = next[p]
			rp.LogStartOffset = -1
			rp.CurrentLeaderEpoch = -1
			rp.LastFetchedEpoch = -1
			rp.PartitionMaxBytes = 16 << 20
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) == 0 {
			return false
		}
		req.Topics = append(req.Topics, rt)
		corr++
		// Request header v2: api key, version, correlation id, client id,
		// empty tagged fields.
		out = append(out[:0], 0, 0, 0, 0)
		out = binary.BigEndian.AppendUint16(out, uint16(req.Key()))
		out = binary.BigEndian.AppendUint16(out, uint16(req.Version))
		out = binary.BigEndian.AppendUint32(out, uint32(corr))
		out = binary.BigEndian.AppendUint16(out, 3)
		out = append(out, "raw"...)
		out = append(out, 0)
		out = req.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := nc.Write(out); err != nil {
			t.Fatalf("raw fetch write: %v", err)
		}
		group[corr] = g
		return true
	}
	for g := 0; g < depth; g++ {
		send(g)
	}
	var (
		buf     = make([]byte, 1<<20)
		size    [4]byte
		records int64
		resp    = kmsg.NewPtrFetchResponse()
	)
	resp.Version = 12
	for iter := 0; len(group) > 0; iter++ {
		if iter > 1<<22 {
			t.Fatalf("raw consumer: no end after %d responses", iter)
		}
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatalf("raw fetch read: %v", err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n > cap(buf) {
			buf = make([]byte, n)
		}
		frame := buf[:n]
		if _, err := io.ReadFull(nc, frame); err != nil {
			t.Fatalf("raw fetch read: %v", err)
		}
		// Response header v1: correlation id + tagged fields (none).
		c := int32(binary.BigEndian.Uint32(frame))
		g, ok := group[c]
		if !ok || len(frame) < 5 || frame[4] != 0 {
			t.Fatalf("raw fetch: unexpected response header % x", frame[:min(8, len(frame))])
		}
		delete(group, c)
		resp.Default()
		resp.Version = 12
		if err := resp.UnsafeReadFrom(frame[5:]); err != nil {
			t.Fatalf("raw fetch decode: %v", err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("raw fetch: error code %d", resp.ErrorCode)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("raw fetch %s/%d: error code %d", rt.Topic, rp.Partition, rp.ErrorCode)
				}
				last, nrec := lastBatchEnd(rp.RecordBatches)
				if nrec > 0 {
					next[rp.Partition] = last
					records += nrec
					remaining -= nrec
				}
			}
		}
		if remaining > 0 {
			send(g)
		}
		if ctx.Err() != nil {
			t.Fatalf("raw consumer: %d records left at timeout", remaining)
		}
	}
	if remaining != 0 {
		t.Fatalf("raw consumer: %d records unaccounted", remaining)
	}
	return records * int64(valueSize)
}

// lastBatchEnd walks the record batch headers of one partition's records
// (stopping at a trailing partial batch) and returns the offset after the
// last complete batch and the record count of the complete batches.
func lastBatchEnd(b []byte) (next, records int64) {
	// v2 batch header: baseOffset int64, batchLength int32,
	// partitionLeaderEpoch int32, magic int8, crc int32, attributes int16,
	// lastOffsetDelta int32 (at byte 23), ...
	for len(b) >= 27 {
		length := int(int32(binary.BigEndian.Uint32(b[8:])))
		if length < 15 || 12+length > len(b) {
			break
		}
		base := int64(binary.BigEndian.Uint64(b))
		delta := int64(int32(binary.BigEndian.Uint32(b[23:])))
		next = base + delta + 1
		records += delta + 1
		b = b[12+length:]
	}
	return next, records
}

// consumeBytes reads records records from every partition of topic and
// returns the record value bytes received.
func consumeBytes(ctx context.Context, t *testing.T, addr, topic string, partitions, records int, opts ...kgo.Opt) int64 {
	t.Helper()
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := int32(0); p < int32(partitions); p++ {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(offsets),
		kgo.FetchMaxBytes(8 << 20),
		kgo.FetchMaxPartitionBytes(2 << 20),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var n int64
	got := 0
	for got < records {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", got, records)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			n += int64(len(r.Value))
			got++
		})
	}
	return n
}

// procCPU is a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 (1-based) of the whole line.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

// iperf3Gbps measures loopback TCP bandwidth with iperf3 -t 10.
func iperf3Gbps(t *testing.T) float64 {
	t.Helper()
	port := strings.Split(harness.FreePort(t), ":")[1]
	pidFile := filepath.Join(t.TempDir(), "iperf3.pid")
	harness.RunCmd(t, "", 10*time.Second, "/usr/bin/iperf3", "-s", "-D", "-1", "-p", port, "-I", pidFile)
	defer func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(strings.Trim(string(b), "\x00"))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
	}()
	// The daemon needs a moment to listen. (No probe connection: with -1
	// it would serve that one and exit.)
	var out []byte
	harness.Eventually(t, 5*time.Second, "iperf3 client run", func() (bool, string) {
		var err error
		out, err = exec.Command("/usr/bin/iperf3", "-c", "127.0.0.1", "-p", port, "-t", "10", "-J").Output()
		return err == nil, fmt.Sprintf("%v\n%s", err, out)
	})
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3 JSON: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond / 1e9
}

// procCtxSwitches sums voluntary and involuntary context switches over a
// process's threads.
func procCtxSwitches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
