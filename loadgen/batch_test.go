package loadgen

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringlog/ringlog/loadgen/nullsink"
)

func TestProduceFrameParses(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		var f produceFrame
		var comp compressors
		f.reset(7, -1, 5000, "topic-x", 3, codec)
		for i := 0; i < 50; i++ {
			f.appendRecord(1_700_000_000_000+int64(i), []byte("k"), []byte("head"), []byte("tail-bytes"), int64(i))
		}
		if err := f.finish(42, &comp); err != nil {
			t.Fatal(err)
		}
		if got := int(binary.BigEndian.Uint32(f.buf)); got != len(f.buf)-4 {
			t.Fatalf("%v: size prefix %d, frame %d", codec, got, len(f.buf)-4)
		}
		var req kmsg.ProduceRequest
		req.SetVersion(7)
		// Skip size, key, version, correlation id and client id.
		body := f.buf[4+8+2+len(clientID):]
		if err := req.ReadFrom(body); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		if req.Acks != -1 || req.TimeoutMillis != 5000 || req.Topics[0].Topic != "topic-x" || req.Topics[0].Partitions[0].Partition != 3 {
			t.Fatalf("%v: request fields %+v", codec, req)
		}
		raw := req.Topics[0].Partitions[0].Records
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if want := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != want {
			t.Fatalf("%v: crc %x, want %x", codec, uint32(rb.CRC), want)
		}
		if rb.NumRecords != 50 || rb.LastOffsetDelta != 49 || rb.Attributes&7 != int16(codec) || rb.MaxTimestamp != rb.FirstTimestamp+49 {
			t.Fatalf("%v: batch header %+v", codec, rb)
		}
		if codec == CodecNone {
			recs := rb.Records
			for i := 0; i < 50; i++ {
				var r kmsg.Record
				n, _ := binary.Varint(recs)
				if err := r.ReadFrom(recs); err != nil {
					t.Fatal(err)
				}
				if string(r.Value) != "headtail-bytes" || string(r.Key) != "k" || r.OffsetDelta != int32(i) {
					t.Fatalf("record %d: %+v", i, r)
				}
				recs = recs[binary.PutVarint(make([]byte, 10), n)+int(n):]
			}
		}
	}
}

// TestGeneratorCeiling measures the lean client against the null sink.
// Opt-in: RINGLOG_LOADGEN_CEILING=1 go test -run Ceiling -v ./loadgen
func TestGeneratorCeiling(t *testing.T) {
	if os.Getenv("RINGLOG_LOADGEN_CEILING") == "" {
		t.Skip("set RINGLOG_LOADGEN_CEILING=1 to measure the generator's ceiling")
	}
	for _, w := range []struct {
		rate float64
		size int
	}{{1_000_000, 100}, {1_000_000, 1000}} {
		sink, err := nullsink.Listen("127.0.0.1:0", 8)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig([]string{sink.Addr()})
		cfg.Acks, cfg.Rate, cfg.MessageSize, cfg.Duration, cfg.Warmup = 0, w.rate, w.size, 5*time.Second, time.Second
		cfg.Partitions = 8
		run, err := Run(context.Background(), cfg, progressOut(t))
		sink.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := run.Result
		t.Logf("%d-byte messages at %.0f msg/s target: achieved %.0f msg/s = %.0f MB/s, send delay p99 %.2f ms, saturated %v",
			w.size, w.rate, r.AchievedRate, r.ThroughputMBps, r.SendDelayMs.P99, r.GeneratorSaturated)
	}
}
