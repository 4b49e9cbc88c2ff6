package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFetchBench compares the fetch paths side by side: consumer throughput
// and broker CPU seconds per GB for plaintext sendfile, plaintext
// --fetch-copy and TLS, with the data in page cache, against iperf3's
// loopback bandwidth. It is a measurement, not an assertion: it only runs
// with RINGLOG_FETCH_BENCH=1 and prints a markdown table.
//
//	RINGLOG_FETCH_BENCH=1 RINGLOG_TEST_BIN=$PWD/bin/ringlog \
//	  go test -run TestFetchBench -v -timeout 20m ./cmd/ringlog/
//
// RINGLOG_FETCH_BENCH_MB sets the data size (default 2048).
func TestFetchBench(t *testing.T) {
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
	b, certs := startTLSBroker(t, dataDir, false, "--fsync", "never", "--log-level", "info")

	ctx := testContext(t, 15*time.Minute)
	adm := kadm.NewClient(b.client(t))
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Uncompressed random values: fetched bytes on the wire = bytes on disk.
	prod := b.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20),
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

	type result struct {
		mode       string
		bytes      int64
		wall       time.Duration
		cpu        time.Duration
		sendfileMB float64
		copyMB     float64
	}
	var results []result
	run := func(mode, addr string, opts ...kgo.Opt) {
		// One warm-up pass puts the segments in page cache; the measured
		// pass follows immediately.
		for pass := 0; pass < 2; pass++ {
			m0 := b.metrics(t)
			cpu0 := procCPU(t, b.cmd.Process.Pid)
			t0 := time.Now()
			n := consumeBytes(ctx, t, addr, topic, partitions, records, opts...)
			wall := time.Since(t0)
			cpu := procCPU(t, b.cmd.Process.Pid) - cpu0
			m1 := b.metrics(t)
			if pass == 0 {
				continue
			}
			listener := "plaintext"
			if mode == "tls" {
				listener = "tls"
			}
			results = append(results, result{
				mode: mode, bytes: n, wall: wall, cpu: cpu,
				sendfileMB: (fetchBytes(m1, listener, "sendfile") - fetchBytes(m0, listener, "sendfile")) / (1 << 20),
				copyMB:     (fetchBytes(m1, listener, "copy") - fetchBytes(m0, listener, "copy")) / (1 << 20),
			})
		}
	}
	run("plaintext-sendfile", b.addr)
	run("tls", b.tlsAddr, kgo.DialTLSConfig(certs.clientConfig(t, false)))
	// Same data dir, same page cache, broker restarted with --fetch-copy.
	b.stop()
	b.args = append(b.args, "--fetch-copy")
	b.restart()
	run("plaintext-copy", b.addr)

	iperf := iperf3Gbps(t)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| mode | MiB consumed | seconds | consumer MB/s | Gbit/s | %% of iperf3 | broker CPU s | CPU s per GB | sendfile MiB | copy MiB |\n")
	fmt.Fprintf(&sb, "|---|---|---|---|---|---|---|---|---|---|\n")
	cpuPerGB := map[string]float64{}
	for _, r := range results {
		secs := r.wall.Seconds()
		mbps := float64(r.bytes) / 1e6 / secs
		gbps := float64(r.bytes) * 8 / 1e9 / secs
		cpuGB := r.cpu.Seconds() / (float64(r.bytes) / 1e9)
		cpuPerGB[r.mode] = cpuGB
		fmt.Fprintf(&sb, "| %s | %d | %.2f | %.0f | %.2f | %.0f%% | %.2f | %.3f | %.0f | %.0f |\n",
			r.mode, r.bytes>>20, secs, mbps, gbps, 100*gbps/iperf, r.cpu.Seconds(), cpuGB, r.sendfileMB, r.copyMB)
	}
	fmt.Fprintf(&sb, "\niperf3 -c 127.0.0.1 -t 10: %.2f Gbit/s\n", iperf)
	if c, z := cpuPerGB["plaintext-copy"], cpuPerGB["plaintext-sendfile"]; c > 0 {
		fmt.Fprintf(&sb, "sendfile CPU/GB = %.2f x copy CPU/GB (target <= 0.50)\n", z/c)
	}
	t.Log(sb.String())
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
	port := strings.Split(freePort(t), ":")[1]
	pidFile := filepath.Join(t.TempDir(), "iperf3.pid")
	runCmd(t, "", 10*time.Second, "/usr/bin/iperf3", "-s", "-D", "-1", "-p", port, "-I", pidFile)
	defer func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(strings.Trim(string(b), "\x00"))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
	}()
	var out []byte
	var err error
	for i := 0; i < 20; i++ { // the daemon needs a moment to listen
		out, err = exec.Command("/usr/bin/iperf3", "-c", "127.0.0.1", "-p", port, "-t", "10", "-J").Output()
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 client: %v\n%s", err, out)
	}
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
