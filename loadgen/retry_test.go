package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ringlog/ringlog/loadgen/nullsink"
)

// retryTestConfig: one partition, batches closed by a 100 ms linger (so
// about 10 batches a second), and a backoff of 100 ms doubling to 400 ms
// within a 1.5 s delivery timeout: retries at about 0.1, 0.3, 0.7, 1.1 s
// after the first failure, at most 5 with jitter taking up to 20% off
// each wait. A fixed 100 ms retry (the generator before backoff) would
// re-send each batch about 14 times.
func retryTestConfig(addr, client string) Config {
	cfg := testConfig([]string{addr})
	cfg.Client = client
	cfg.Partitions = 1
	cfg.Rate = 200
	cfg.Linger = 100 * time.Millisecond
	cfg.RetryBackoff = 100 * time.Millisecond
	cfg.RetryBackoffMax = 400 * time.Millisecond
	cfg.DeliveryTimeout = 1500 * time.Millisecond
	return cfg
}

// TestRetryBackoffAccounting answers every produce with
// KAFKA_STORAGE_ERROR (the full-disk error) and checks both clients back
// off: the retries per batch stay within the schedule, every failed
// attempt is in the error mix, and every message ends as an error once
// its delivery timeout is spent (none acked, none lost).
func TestRetryBackoffAccounting(t *testing.T) {
	for _, client := range []string{"lean", "kgo"} {
		t.Run(client, func(t *testing.T) {
			sink, err := nullsink.Listen("127.0.0.1:0", 1)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			sink.FailProduce(kerr.KafkaStorageError.Code)
			cfg := retryTestConfig(sink.Addr(), client)
			run, err := Run(context.Background(), cfg, progressOut(t))
			if err != nil {
				t.Fatal(err)
			}
			r := run.Result
			total := int64(cfg.Rate * (cfg.Warmup + cfg.Duration).Seconds())
			attempts := r.ErrorMix["KAFKA_STORAGE_ERROR"]
			t.Logf("errors %d retries %d messages retried %d mix %v requests %d first error %q",
				r.Errors, r.Retries, r.MessagesRetried, r.ErrorMix, sink.Requests.Load(), r.FirstError)
			if r.MessagesAcked != 0 || r.Errors < total-2 || r.Errors > total {
				t.Fatalf("acked %d errors %d: want every one of ~%d messages failed", r.MessagesAcked, r.Errors, total)
			}
			if len(r.ErrorMix) != 1 || attempts == 0 {
				t.Fatalf("error mix %v: want only KAFKA_STORAGE_ERROR", r.ErrorMix)
			}
			// The broker saw each attempt once and answered it with the error.
			if got := sink.Requests.Load(); got != attempts {
				t.Fatalf("sink answered %d produce requests, error mix counts %d", got, attempts)
			}
			if client == "kgo" {
				// kgo re-tries a failing partition after a metadata
				// refresh, at most every --retry-backoff-max (400 ms) and
				// one batch per request: over the 2.5 s run and 1.5 s of
				// delivery timeout about 10 attempts, not thousands.
				if r.Retries == 0 || r.Retries > attempts || attempts > 20 || r.MessagesRetried == 0 {
					t.Fatalf("kgo: %d retries (%d messages) of %d attempts", r.Retries, r.MessagesRetried, attempts)
				}
				if !strings.Contains(r.FirstError, "timed out") {
					t.Fatalf("first error %q: want kgo's record timeout", r.FirstError)
				}
				return
			}
			// Every attempt failed, so attempts = batches + retries.
			batches := attempts - r.Retries
			want := (cfg.Warmup + cfg.Duration) / cfg.Linger
			if batches < int64(want)*8/10 || batches > int64(want)*12/10+2 {
				t.Fatalf("%d batches (%d attempts - %d retries), want about %d", batches, attempts, r.Retries, want)
			}
			if perBatch := float64(r.Retries) / float64(batches); perBatch < 3 || perBatch > 5 {
				t.Fatalf("%.1f retries per batch (%d for %d batches): want 3-5 with this backoff", perBatch, r.Retries, batches)
			}
			// Each message is re-sent as often as its batch.
			if r.MessagesRetried < 3*r.Errors || r.MessagesRetried > 5*r.Errors {
				t.Fatalf("%d messages re-sent for %d messages", r.MessagesRetried, r.Errors)
			}
			if !strings.Contains(r.FirstError, "delivery timeout") || !strings.Contains(r.FirstError, "KAFKA_STORAGE_ERROR") {
				t.Fatalf("first error %q: want the give-up and its last cause", r.FirstError)
			}
		})
	}
}

// TestRetryLimit: with --retries 2 a batch is sent three times, then its
// messages fail, long before the delivery timeout.
func TestRetryLimit(t *testing.T) {
	sink, err := nullsink.Listen("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.FailProduce(kerr.NotEnoughReplicas.Code)
	cfg := retryTestConfig(sink.Addr(), "lean")
	cfg.Retries = 2
	cfg.DeliveryTimeout = 30 * time.Second
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	attempts := r.ErrorMix["NOT_ENOUGH_REPLICAS"]
	if r.MessagesAcked != 0 || r.Errors == 0 || attempts != 3*(attempts-r.Retries) || r.MessagesRetried != 2*r.Errors {
		t.Fatalf("errors %d, retries %d, attempts %d, messages retried %d: want 2 retries per batch",
			r.Errors, r.Retries, attempts, r.MessagesRetried)
	}
	if !strings.Contains(r.FirstError, "gave up after 2 retries") {
		t.Fatalf("first error %q", r.FirstError)
	}
}

// TestRetryRecovers: a broker that fails for a while and then accepts
// loses nothing; the messages that waited show it in their latency.
func TestRetryRecovers(t *testing.T) {
	sink, err := nullsink.Listen("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	cfg := retryTestConfig(sink.Addr(), "lean")
	cfg.DeliveryTimeout = 10 * time.Second
	cfg.StartAt = time.Now().Add(300 * time.Millisecond)
	go func() {
		time.Sleep(time.Until(cfg.StartAt.Add(cfg.Warmup + 500*time.Millisecond)))
		sink.FailProduce(kerr.NotLeaderForPartition.Code)
		time.Sleep(600 * time.Millisecond)
		sink.FailProduce(0)
	}()
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	want := int64(cfg.Rate * cfg.Duration.Seconds())
	if r.Errors != 0 || r.MessagesAcked < want-2 || r.MessagesAcked > want {
		t.Fatalf("acked %d (want %d), errors %d (%s)", r.MessagesAcked, want, r.Errors, r.FirstError)
	}
	if r.Retries == 0 || r.ErrorMix["NOT_LEADER_OR_FOLLOWER"] == 0 {
		t.Fatalf("retries %d, mix %v", r.Retries, r.ErrorMix)
	}
	// Messages scheduled early in the 600 ms fault waited for it to end.
	if r.AckLatencyMs.Max < 400 {
		t.Fatalf("ack max %.1f ms: the fault is missing from the latency", r.AckLatencyMs.Max)
	}
}
