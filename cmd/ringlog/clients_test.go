package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests need kcat and python3-confluent-kafka from Debian (.ci/run
// installs them). Missing tools fail the test rather than skip it, so a CI
// without them cannot pass silently; set RINGLOG_SKIP_EXTERNAL_CLIENTS=1 to
// opt out locally.

func needTool(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skipf("%s missing and RINGLOG_SKIP_EXTERNAL_CLIENTS=1", path)
		}
		t.Fatalf("%s not installed (apt-get install kcat python3-confluent-kafka)", path)
	}
}

// needConfluentKafka skips or fails t, as needTool does, unless python3
// can import confluent_kafka.
func needConfluentKafka(t *testing.T) {
	t.Helper()
	needTool(t, "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
			t.Skip("confluent_kafka missing")
		}
		t.Fatal("python3-confluent-kafka not installed")
	}
}

func runCmd(t *testing.T, stdin string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx := testContext(t, timeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, out.String(), errb.String())
	}
	return out.String()
}

// codecNames are the record batch attribute codec values (low 3 bits).
var codecNames = map[string]int8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// batchCodecs reads a partition's whole log with raw Fetch requests and
// counts the records stored under each codec, as the broker serves the
// batches byte for byte.
func batchCodecs(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32) map[int8]int {
	t.Helper()
	counts := map[int8]int{}
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 16 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 4<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetch %s/%d at %d: %v", topic, partition, offset, err)
		}
		if offset >= p.HighWatermark {
			return counts
		}
		if len(p.RecordBatches) == 0 {
			t.Fatalf("fetch %s/%d at %d: no data below the high watermark %d", topic, partition, offset, p.HighWatermark)
		}
		for b := p.RecordBatches; len(b) > 0; {
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(b); err != nil {
				t.Fatalf("%s/%d: batch at %d: %v", topic, partition, offset, err)
			}
			size := 12 + int(batch.Length)
			if size > len(b) {
				t.Fatalf("%s/%d: batch at %d torn", topic, partition, offset)
			}
			counts[int8(batch.Attributes&0x07)] += int(batch.NumRecords)
			offset = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
			b = b[size:]
		}
	}
}

// checkCodec asserts that librdkafka compressed with codec what it was
// asked to: librdkafka sends a batch uncompressed when compressing would
// make it larger, so uncompressed batches are allowed beside the codec, but
// most records must be in batches of the requested codec.
func checkCodec(t *testing.T, codec string, counts map[int8]int) {
	t.Helper()
	t.Logf("records per codec: %v", counts)
	want, total := codecNames[codec], 0
	for c, n := range counts {
		total += n
		if c != want && c != 0 {
			t.Errorf("%d records stored with codec %d, want %s (%d)", n, c, codec, want)
		}
	}
	if total == 0 || counts[want]*2 < total {
		t.Errorf("%d of %d records stored with codec %s (%d): %v", counts[want], total, codec, want, counts)
	}
}

func TestKcatProduceConsume(t *testing.T) {
	needTool(t, "/usr/bin/kcat")
	b := startBroker(t, t.TempDir())
	cl := b.client(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			// The topic does not exist: librdkafka's producer relies on
			// auto-creation through Metadata.
			topic := "kcat-" + codec
			var in strings.Builder
			const n = 300
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "k%d:message %d %s\n", i%5, i, strings.Repeat("x", i%50))
			}
			runCmd(t, in.String(), 60*time.Second, "/usr/bin/kcat", "-b", b.addr, "-t", topic, "-P", "-K:", "-z", codec,
				"-X", "acks=all", "-X", "linger.ms=5")
			out := runCmd(t, "", 60*time.Second, "/usr/bin/kcat", "-b", b.addr, "-t", topic, "-C", "-e", "-q",
				"-o", "beginning", "-f", "%k:%s|%o\n")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != n {
				t.Fatalf("kcat read %d lines, want %d:\n%s", len(lines), n, out)
			}
			for i, l := range lines {
				want := fmt.Sprintf("k%d:message %d %s|%d", i%5, i, strings.Repeat("x", i%50), i)
				if l != want {
					t.Fatalf("line %d: %q, want %q", i, l, want)
				}
			}
			// The round trip would pass with compression silently off.
			checkCodec(t, codec, batchCodecs(testContext(t, 30*time.Second), t, cl, topic, 0))
		})
	}
	// Metadata as librdkafka sees it.
	out := runCmd(t, "", 30*time.Second, "/usr/bin/kcat", "-b", b.addr, "-L", "-t", "kcat-none")
	if !strings.Contains(out, "1 brokers") || !strings.Contains(out, `topic "kcat-none" with 1 partitions`) {
		t.Fatalf("kcat -L output:\n%s", out)
	}
}

func TestConfluentKafkaPython(t *testing.T) {
	needConfluentKafka(t)
	b := startBroker(t, t.TempDir())
	ctx := testContext(t, 60*time.Second)
	cl := b.client(t)
	adm := kadm.NewClient(cl)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "py-" + codec
			if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			out := runCmd(t, "", 120*time.Second, "/usr/bin/python3", "testdata/confluent_roundtrip.py", b.addr, topic, "2000", codec)
			if !strings.Contains(out, "OK 2000") {
				t.Fatalf("python output: %s", out)
			}
			counts := map[int8]int{}
			for p := int32(0); p < 3; p++ {
				for c, n := range batchCodecs(ctx, t, cl, topic, p) {
					counts[c] += n
				}
			}
			checkCodec(t, codec, counts)
		})
	}
}
