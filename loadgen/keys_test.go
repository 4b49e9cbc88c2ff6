package loadgen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringlog/ringlog/results"
)

// TestKeyTable: key j is one Kafka's key hash (franz-go's default
// partitioner) sends to partition j % partitions, and no key repeats; a
// key count below the partition count uses that many partitions.
func TestKeyTable(t *testing.T) {
	for _, tc := range []struct{ keys, partitions int }{{8, 1}, {24, 3}, {64, 8}, {4, 8}, {100, 7}, {8 * 1024, 1024}} {
		keys := keyTable(tc.keys, int32(tc.partitions))
		if len(keys) != tc.keys {
			t.Fatalf("%d keys over %d partitions: table of %d", tc.keys, tc.partitions, len(keys))
		}
		seen := map[string]bool{}
		for j, k := range keys {
			if p := kafkaKeyHash.Partition(&kgo.Record{Key: k}, tc.partitions); p != j%tc.partitions {
				t.Fatalf("%d partitions: key %d %q hashes to partition %d, want %d", tc.partitions, j, k, p, j%tc.partitions)
			}
			if seen[string(k)] {
				t.Fatalf("key %q twice", k)
			}
			seen[string(k)] = true
		}
	}
	if keyTable(0, 8) != nil {
		t.Fatal("null keys got a key table")
	}
	if n := resolveKeys(KeysAuto, 64); n != 64*keysPerPartition {
		t.Fatalf("auto keys for 64 partitions: %d", n)
	}
	for s, want := range map[string]int{"auto": KeysAuto, "0": 0, "64": 64} {
		if n, err := ParseKeys(s); err != nil || n != want {
			t.Fatalf("ParseKeys(%q) = %d, %v", s, n, err)
		}
	}
	if _, err := ParseKeys("-3"); err == nil {
		t.Fatal("ParseKeys(-3) accepted")
	}
	if p, err := ParsePartitions("8, 64,256"); err != nil || len(p) != 3 || p[2] != 256 {
		t.Fatalf("ParsePartitions: %v %v", p, err)
	}
	for _, bad := range []string{"", "8,", "0", "8,x"} {
		if _, err := ParsePartitions(bad); err == nil {
			t.Fatalf("ParsePartitions(%q) accepted", bad)
		}
	}
}

// TestDefaultKeysSpreadOverAllPartitions: by default both clients send
// keyed messages and every partition gets an even share, which the result
// records and the report names; --keys 0 is labelled sticky (null keys).
func TestDefaultKeysSpreadOverAllPartitions(t *testing.T) {
	for _, client := range []string{"lean", "kgo"} {
		t.Run(client, func(t *testing.T) {
			out, _ := runExecute(t, func(c *Config) {
				c.Client, c.Partitions, c.Rate, c.Duration, c.Warmup, c.Quiet = client, 12, 2400, 500*time.Millisecond, 100*time.Millisecond, true
			})
			if !strings.Contains(out, "keyed over 12 partitions") || !strings.Contains(out, "12 of 12 partitions received data") {
				t.Fatalf("summary does not show keys over all 12 partitions:\n%s", out)
			}
		})
	}
	c := testConfigFor(t, 6)
	run, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := run.Result.Spread
	if sp == nil || sp.Mode != results.SpreadKeyed || sp.Keys != 6*keysPerPartition || sp.Written != 6 || sp.TopicPartitions != 6 {
		t.Fatalf("spread %+v", sp)
	}
	// Cycling keys visit the partitions round robin: shares differ by at
	// most the messages of one cycle at the window's edges.
	if even := 1.0 / 6; sp.MinShare < even*0.97 || sp.MaxShare > even*1.03 {
		t.Fatalf("shares min %.4f max %.4f, want about %.4f", sp.MinShare, sp.MaxShare, even)
	}
	if run.Result.Workload["key_distribution"] != "keyed over 6 partitions" || run.Result.Workload["keys"] != "48" {
		t.Fatalf("workload %v", run.Result.Workload)
	}

	c.Keys = 0
	c.Topic += "-sticky"
	run, err = Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sp := run.Result.Spread; sp == nil || sp.Mode != results.SpreadSticky || sp.Label() != "sticky (null keys)" {
		t.Fatalf("--keys 0 spread %+v", sp)
	}
	var sum bytes.Buffer
	results.WriteSummary(&sum, &run.Result)
	page, err := results.RenderHTML(run)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "sticky (null keys)") || !bytes.Contains(page, []byte("Workload: sticky (null keys)")) {
		t.Fatalf("sticky run not labelled:\n%s", sum.String())
	}
}

// testConfigFor is a short lean run on a fresh in-process kfake.
func testConfigFor(t *testing.T, partitions int32) Config {
	t.Helper()
	kc := newKfake(t)
	c := DefaultConfig()
	c.Bootstrap, c.Topic, c.Partitions, c.MessageSize = kc.ListenAddrs()[:1], "lg-spread", partitions, 100
	c.Rate, c.Duration, c.Warmup, c.Quiet = 2400, 500*time.Millisecond, 100*time.Millisecond, true
	return c
}

// TestBenchPartitionSweep: bench with a list of partition counts runs each
// on its own topic against the same broker (the fake one, or the real
// binary with RINGLOG_TEST_BROKER_BIN) and writes one row per count with
// the fields filled, broker CPU per GB from the broker process's /proc
// numbers, and a report page with the table and the charts.
func TestBenchPartitionSweep(t *testing.T) {
	bc := DefaultBenchConfig()
	bc.Brokers, bc.BrokerBin, bc.Out, bc.Sweep = 1, brokerBin(t), t.TempDir(), []int32{2, 5}
	w := &bc.Workload
	w.Rate, w.Duration, w.Warmup, w.Quiet, w.MessageSize, w.Consumers = 2000, 500*time.Millisecond, 100*time.Millisecond, true, 200, 0
	var out bytes.Buffer
	if err := Bench(context.Background(), bc, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	res, err := results.ReadJSON(bc.Out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sweep) != 2 {
		t.Fatalf("%d sweep rows, want 2:\n%s", len(res.Sweep), out.String())
	}
	for i, row := range res.Sweep {
		want := int(bc.Sweep[i])
		if row.Partitions != want || row.AckLatencyMs.Count == 0 || row.AckLatencyMs.P99 <= 0 || row.AchievedRate <= 0 ||
			row.Spread == nil || row.Spread.Written != want || row.Errors != 0 {
			t.Fatalf("row %d: %+v (spread %+v)", i, row, row.Spread)
		}
		sub, err := results.ReadJSON(filepath.Join(bc.Out, row.Dir))
		if err != nil {
			t.Fatal(err)
		}
		c := row.BrokerCPU
		if c == nil || c.Processes != 1 || c.WindowS < 0.4 || c.Seconds < 0 || c.MessagesAcked != sub.MessagesAcked ||
			c.CtxSwitches == nil || c.CtxSwitches.PerMsg <= 0 || row.GeneratorCPU == nil {
			t.Fatalf("row %d broker CPU %+v, generator %+v", i, c, row.GeneratorCPU)
		}
		gb := float64(sub.MessagesAcked*int64(sub.MessageSize)) / 1e9
		if c.Seconds > 0 && (c.PerGB < 0.99*c.Seconds/gb || c.PerGB > 1.01*c.Seconds/gb) {
			t.Fatalf("row %d: %.3f CPU-s/GB, but %.3f CPU-s over %.6f GB", i, c.PerGB, c.Seconds, gb)
		}
	}
	page, err := os.ReadFile(filepath.Join(bc.Out, results.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<table id="sweep"`, "Ack latency by partition count", "Broker CPU per GB by partition count", `href="p5/report.html"`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Fatalf("report.html lacks %q", want)
		}
	}
	var rep bytes.Buffer
	if err := results.Report(&rep, bc.Out, 5); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.String(), "partition sweep") || !strings.Contains(rep.String(), "5/5") {
		t.Fatalf("report of the sweep:\n%s", rep.String())
	}
}
