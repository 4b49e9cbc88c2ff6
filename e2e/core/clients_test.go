package core

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	t.Parallel()
	harness.NeedTool(t, "/usr/bin/kcat")
	b := harness.StartBroker(t, t.TempDir())
	cl := b.Client(t)
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
			harness.RunCmd(t, in.String(), 60*time.Second, "/usr/bin/kcat", "-b", b.Addr, "-t", topic, "-P", "-K:", "-z", codec,
				"-X", "acks=all", "-X", "linger.ms=5")
			out := harness.RunCmd(t, "", 60*time.Second, "/usr/bin/kcat", "-b", b.Addr, "-t", topic, "-C", "-e", "-q",
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
			checkCodec(t, codec, batchCodecs(harness.Context(t, 30*time.Second), t, cl, topic, 0))
		})
	}
	// Metadata as librdkafka sees it.
	out := harness.RunCmd(t, "", 30*time.Second, "/usr/bin/kcat", "-b", b.Addr, "-L", "-t", "kcat-none")
	if !strings.Contains(out, "1 brokers") || !strings.Contains(out, `topic "kcat-none" with 1 partitions`) {
		t.Fatalf("kcat -L output:\n%s", out)
	}
}

func TestConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	harness.NeedConfluentKafka(t)
	b := harness.StartBroker(t, t.TempDir())
	ctx := harness.Context(t, 60*time.Second)
	cl := b.Client(t)
	adm := kadm.NewClient(cl)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "py-" + codec
			if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			out := harness.RunCmd(t, "", 120*time.Second, "/usr/bin/python3", "testdata/confluent_roundtrip.py", b.Addr, topic, "2000", codec)
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
