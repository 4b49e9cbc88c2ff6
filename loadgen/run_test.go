package loadgen

import (
	"context"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/results"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testConfig(addrs []string) Config {
	cfg := DefaultConfig()
	cfg.Bootstrap = addrs
	cfg.Topic = "lg-test"
	cfg.Partitions = 4
	cfg.Rate = 2000
	cfg.MessageSize = 200
	cfg.Duration = 2 * time.Second
	cfg.Warmup = 500 * time.Millisecond
	cfg.DrainTimeout = 5 * time.Second
	cfg.Quiet = true
	return cfg
}

func progressOut(t *testing.T) io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

func TestRunAgainstKfake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client string
		codec  Codec
		keys   int
		acks   int16
	}{
		{"lean-none", "lean", CodecNone, 0, -1},
		{"lean-zstd-keys", "lean", CodecZstd, 100, -1},
		{"lean-lz4-acks1", "lean", CodecLZ4, 0, 1},
		{"lean-gzip", "lean", CodecGzip, 0, -1},
		{"lean-snappy", "lean", CodecSnappy, 7, -1},
		{"kgo", "kgo", CodecNone, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cfg := testConfig(c.ListenAddrs())
			cfg.Client, cfg.Compression, cfg.Keys, cfg.Acks = tc.client, tc.codec, tc.keys, tc.acks
			cfg.Consumers = 1
			cfg.Quiet = !testing.Verbose()
			run, err := Run(context.Background(), cfg, progressOut(t))
			if err != nil {
				t.Fatal(err)
			}
			r := run.Result
			want := int64(cfg.Rate * cfg.Duration.Seconds())
			if r.Errors != 0 || r.MessagesAcked < want-2 || r.MessagesAcked > want+2 {
				t.Fatalf("acked %d (want %d), errors %d (%s)", r.MessagesAcked, want, r.Errors, r.FirstError)
			}
			// Every measured message must come back to the consumer intact
			// (kgo validates and decompresses our batches).
			if r.MessagesConsumed != r.MessagesAcked {
				t.Fatalf("consumed %d of %d acked messages", r.MessagesConsumed, r.MessagesAcked)
			}
			if r.AckLatencyMs.Count != r.MessagesAcked || r.E2ELatencyMs == nil || r.E2ELatencyMs.Count != r.MessagesAcked {
				t.Fatalf("histogram counts: ack %d e2e %+v, acked %d", r.AckLatencyMs.Count, r.E2ELatencyMs, r.MessagesAcked)
			}
			if r.SendDelayMs.Count != r.MessagesSent || r.MessagesSent != r.MessagesAcked {
				t.Fatalf("send delay count %d, sent %d", r.SendDelayMs.Count, r.MessagesSent)
			}
			if r.AckLatencyMs.P50 <= 0 || r.AckLatencyMs.Max < r.AckLatencyMs.P99 {
				t.Fatalf("implausible latencies %+v", r.AckLatencyMs)
			}
			if n := len(run.Ack); n < 2 || n > 4 {
				t.Fatalf("%d ack intervals for a 2 s run", n)
			}
		})
	}
}

// TestLeanClientFollowsLeaderMoves moves every partition's leader to
// another broker mid-run: the lean client must get NOT_LEADER_OR_FOLLOWER,
// re-read the leaders and re-send, so nothing is lost and the re-sends are
// counted; their latency runs from the original intended time.
func TestLeanClientFollowsLeaderMoves(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := testConfig(c.ListenAddrs())
	cfg.Duration = 3 * time.Second
	cfg.Quiet = !testing.Verbose()
	moved := make(chan error, 1)
	go func() {
		// Wall-clock schedule: halfway through the measured window,
		// move leaders one broker on.
		time.Sleep(cfg.Warmup + cfg.Duration/2)
		var firstErr error
		for p := int32(0); p < cfg.Partitions; p++ {
			if err := c.MoveTopicPartition(cfg.Topic, p, (p+1)%3); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		moved <- firstErr
	}()
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-moved; err != nil {
		t.Fatalf("moving partitions: %v", err)
	}
	r := run.Result
	want := int64(cfg.Rate * cfg.Duration.Seconds())
	if r.Errors != 0 || r.MessagesAcked < want-2 || r.MessagesAcked > want+2 {
		t.Fatalf("acked %d (want %d), errors %d (%s)", r.MessagesAcked, want, r.Errors, r.FirstError)
	}
	if r.MessagesRetried == 0 {
		t.Fatal("no message was re-sent although every leader moved mid-run")
	}
}

// TestLookupLeadersSeesSuccessiveMoves: a leader lookup right after
// another (within kgo's 5 s MetadataMinAge) reports a move made between
// them. A reassignment completes partition by partition; the lean client
// looked up after the first wave of NOT_LEADER_OR_FOLLOWER answers, then
// again after the second, and got the first answer back from kgo's topic
// cache: it re-sent the second wave's batches to their old leaders for
// about 5 s (the issue-18 decommission stall).
func TestLookupLeadersSeesSuccessiveMoves(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(2, "moves"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs := c.ListenAddrs() // by node id
	for move := range 3 {
		p := int32(move % 2)
		to := 1 - c.LeaderFor("moves", p)
		if err := c.MoveTopicPartition("moves", p, to); err != nil {
			t.Fatal(err)
		}
		leaders, _, _, err := lookupLeaders(ctx, cl, "moves")
		if err != nil {
			t.Fatal(err)
		}
		if want := addrs[to]; leaders[p] != want {
			t.Fatalf("move %d: partition %d led by %s after its move to node %d (%s): a cached answer", move, p, leaders[p], to, want)
		}
	}
}

// TestLeanClientRetriesWithPoolExhausted fails every produce with
// NOT_LEADER_OR_FOLLOWER for a while, long enough that every request frame
// of the producer is out waiting for a retry. The producer goroutine is
// the one that re-sends them, so it must keep doing that while it waits
// for a free frame; blocking on the pool alone would hang the run.
func TestLeanClientRetriesWithPoolExhausted(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := testConfig(c.ListenAddrs())
	cfg.Duration = 3 * time.Second
	cfg.Quiet = !testing.Verbose()
	cfg.BatchBytes = 4096
	cfg.MaxBufferedBytes = 2 * cfg.BatchBytes // the smallest pool the generator allows
	var failUntil atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if time.Now().UnixNano() > failUntil.Load() {
			return nil, nil, false
		}
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	go func() {
		// Wall-clock schedule: a second into the measured window the
		// broker refuses produces for a second.
		time.Sleep(cfg.Warmup + time.Second)
		failUntil.Store(time.Now().Add(time.Second).UnixNano())
	}()
	done := make(chan struct{})
	var run *results.Run
	go func() {
		defer close(done)
		run, err = Run(context.Background(), cfg, progressOut(t))
	}()
	select {
	case <-done:
	case <-time.After(cfg.Warmup + cfg.Duration + cfg.DrainTimeout + 10*time.Second):
		t.Fatal("run hung while its frames waited for a leader")
	}
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	want := int64(cfg.Rate * cfg.Duration.Seconds())
	if r.Errors != 0 || r.MessagesAcked < want-2 {
		t.Fatalf("acked %d (want %d), errors %d (%s)", r.MessagesAcked, want, r.Errors, r.FirstError)
	}
	if r.MessagesRetried == 0 {
		t.Fatal("nothing was retried")
	}
}
