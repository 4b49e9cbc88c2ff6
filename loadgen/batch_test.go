package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringlog/ringlog/loadgen/nullsink"
	"github.com/ringlog/ringlog/results"
)

func TestProduceFrameParses(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		var f produceFrame
		f.reset(7, -1, 5000, "topic-x", 3, codec)
		for i := 0; i < 50; i++ {
			f.appendRecord(1_700_000_000_000+int64(i), []byte("k"), []byte("head"), []byte("tail-bytes"), int64(i))
		}
		if err := f.finish(42); err != nil {
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

// ceilingWorkloads are the generator-ceiling workloads of BENCHMARKS.md
// section 3.
var ceilingWorkloads = []struct {
	rate float64
	size int
}{{1_000_000, 100}, {1_000_000, 1000}}

// ceilingConfig is one ceiling workload: acks=0, 8 partitions, 5 s after
// 1 s warmup (RINGLOG_LOADGEN_CEILING_DURATION overrides the 5 s, to check
// the test itself quickly).
func ceilingConfig(t *testing.T, addr string, rate float64, size int) Config {
	cfg := testConfig([]string{addr})
	cfg.Acks, cfg.Rate, cfg.MessageSize, cfg.Duration, cfg.Warmup = 0, rate, size, 5*time.Second, time.Second
	cfg.Partitions = 8
	if d := os.Getenv("RINGLOG_LOADGEN_CEILING_DURATION"); d != "" {
		var err error
		if cfg.Duration, err = time.ParseDuration(d); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// sustainedRate is acked messages over the time from the measured start to
// the last ack interval's end. AchievedRate divides by the planned window,
// which overstates a saturated generator that sent its backlog late.
func sustainedRate(run *results.Run) float64 {
	if len(run.Ack) == 0 {
		return 0
	}
	ms := run.Ack[len(run.Ack)-1].EndTimeMs() - run.Ack[0].StartTimeMs()
	if ms <= 0 {
		return 0
	}
	return float64(run.Result.MessagesAcked) / (float64(ms) / 1000)
}

// TestGeneratorCeiling measures the lean client against the in-process
// null sink (loadgen/nullsink: no broker, no storage; the data is read and
// discarded), so whatever limits the rate is the generator. Opt-in:
// RINGLOG_LOADGEN_CEILING=1 go test -run 'GeneratorCeiling$' -v ./loadgen
// It fails when the generator does not keep the target rate: below 99 % of
// it, or saturated (its own send delay over 5 ms at p99).
func TestGeneratorCeiling(t *testing.T) {
	if os.Getenv("RINGLOG_LOADGEN_CEILING") == "" {
		t.Skip("set RINGLOG_LOADGEN_CEILING=1 to measure the generator's ceiling")
	}
	for _, w := range ceilingWorkloads {
		t.Run(fmt.Sprintf("%dB", w.size), func(t *testing.T) {
			sink, err := nullsink.Listen("127.0.0.1:0", 8)
			if err != nil {
				t.Fatal(err)
			}
			cfg := ceilingConfig(t, sink.Addr(), w.rate, w.size)
			run, err := Run(context.Background(), cfg, progressOut(t))
			sink.Close()
			if err != nil {
				t.Fatal(err)
			}
			r := run.Result
			t.Logf("null sink, %d-byte messages at %.0f msg/s target: achieved %.0f msg/s = %.0f MB/s (sustained until the last ack %.0f msg/s), send delay p99 %.2f ms, saturated %v",
				w.size, w.rate, r.AchievedRate, r.ThroughputMBps, sustainedRate(run), r.SendDelayMs.P99, r.GeneratorSaturated)
			if r.AchievedRate < 0.99*w.rate || r.GeneratorSaturated || r.Errors != 0 {
				t.Errorf("generator below its ceiling target: achieved %.0f of %.0f msg/s, saturated %v (%s), errors %d",
					r.AchievedRate, w.rate, r.GeneratorSaturated, r.SaturationReason, r.Errors)
			}
		})
	}
}

// TestGeneratorCeilingBroker runs the ceiling workloads against a real
// ringlog broker (RINGLOG_TEST_BROKER_BIN, --fsync never) with acks=0 and
// reports what they reached. It asserts nothing about the rate: the broker
// and the generator share this machine's cores, so the figure is the
// pair's, not the generator's. Opt-in like TestGeneratorCeiling.
func TestGeneratorCeilingBroker(t *testing.T) {
	if os.Getenv("RINGLOG_LOADGEN_CEILING") == "" {
		t.Skip("set RINGLOG_LOADGEN_CEILING=1 and RINGLOG_TEST_BROKER_BIN to measure against a real broker")
	}
	bin := os.Getenv("RINGLOG_TEST_BROKER_BIN")
	if bin == "" {
		t.Skip("set RINGLOG_TEST_BROKER_BIN to the ringlog binary")
	}
	for _, w := range ceilingWorkloads {
		t.Run(fmt.Sprintf("%dB", w.size), func(t *testing.T) {
			var log bytes.Buffer
			b, err := launchLocalBroker(bin, t.TempDir(), &log, 0, "--fsync", "never")
			if err == nil {
				err = b.waitReady()
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			defer b.Stop()
			cfg := ceilingConfig(t, b.Addr, w.rate, w.size)
			cfg.Topic = fmt.Sprintf("ceiling-%d", w.size)
			run, err := Run(context.Background(), cfg, progressOut(t))
			if err != nil {
				t.Fatal(err)
			}
			r := run.Result
			// A saturated run's window stretches to its last send, so
			// achieved_rate already shows the shortfall; the sustained rate
			// (until the last ack) is logged beside it.
			t.Logf("ringlog broker (fsync never), %d-byte messages at %.0f msg/s target, acks=0: sustained %.0f msg/s (%.0f MB/s) until the last write, achieved %.0f msg/s, send delay p99 %.2f ms, saturated %v, errors %d",
				w.size, w.rate, sustainedRate(run), sustainedRate(run)*float64(w.size)/1e6, r.AchievedRate, r.SendDelayMs.P99, r.GeneratorSaturated, r.Errors)
		})
	}
}
