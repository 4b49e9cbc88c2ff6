package loadgen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringlog/ringlog/loadgen/nullsink"
	"github.com/ringlog/ringlog/results"
)

// retryTestConfig: one partition, batches closed by a 100 ms linger (about
// 25 batches over the 2.5 s run), and a backoff of 100 ms doubling to
// 400 ms within a 1.5 s delivery timeout. A refusing broker then sees one
// probe of the failing partition per backoff: after about 0.1, 0.3, 0.7 s,
// then every 320-400 ms until the last batch expires, about a dozen
// attempts in all. Re-sending every batch every 100 ms (the generator
// before backoff) made about 350.
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

// startSink starts a one-partition null sink for the test.
func startSink(t *testing.T) *nullsink.Server {
	t.Helper()
	sink, err := nullsink.Listen("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return sink
}

// TestRetryBackoffAccounting answers every produce with
// KAFKA_STORAGE_ERROR (the full-disk error) and checks both clients back
// off: the retries per batch stay within the schedule, every failed
// attempt is in the error mix, and every message ends as an error once
// its delivery timeout is spent (none acked, none lost).
func TestRetryBackoffAccounting(t *testing.T) {
	for _, client := range []string{"lean", "kgo"} {
		t.Run(client, func(t *testing.T) {
			sink := startSink(t)
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
			// One attempt per backoff for the whole partition, not one per
			// batch: kgo re-tries a failing partition after a metadata
			// refresh, at most every --retry-backoff-max.
			if attempts < 4 || attempts > 20 || r.Retries == 0 || r.Retries > attempts || r.MessagesRetried == 0 {
				t.Fatalf("%d attempts, %d retries (%d messages): want about a dozen attempts", attempts, r.Retries, r.MessagesRetried)
			}
			if client == "kgo" {
				if !strings.Contains(r.FirstError, "timed out") {
					t.Fatalf("first error %q: want kgo's record timeout", r.FirstError)
				}
				return
			}
			// A batch is re-sent at most 5 times in 1.5 s (waits of at
			// least 80, 160, 320, 320, 320 ms), so no message more often.
			if r.MessagesRetried > 5*r.Errors {
				t.Fatalf("%d messages re-sent for %d messages", r.MessagesRetried, r.Errors)
			}
			if !strings.Contains(r.FirstError, "delivery timeout") || !strings.Contains(r.FirstError, "KAFKA_STORAGE_ERROR") {
				t.Fatalf("first error %q: want the give-up and its last cause", r.FirstError)
			}
		})
	}
}

// TestFailingPartitionHeld: one partition of four refuses every produce.
// Its batches wait behind one probe per backoff and end as errors at the
// delivery timeout; the other partitions are acknowledged as if nothing
// happened. Nothing is lost or counted twice.
func TestFailingPartitionHeld(t *testing.T) {
	sink, err := nullsink.Listen("127.0.0.1:0", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.FailPartition(2, kerr.NotEnoughReplicas.Code)
	cfg := retryTestConfig(sink.Addr(), "lean")
	cfg.Partitions, cfg.Keys, cfg.Rate = 4, 4, 800 // keys cycle over the partitions
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	total := int64(cfg.Rate * (cfg.Warmup + cfg.Duration).Seconds())
	measured := int64(cfg.Rate * cfg.Duration.Seconds())
	attempts := r.ErrorMix["NOT_ENOUGH_REPLICAS"]
	if r.Errors != total/4 || r.MessagesAcked != measured*3/4 {
		t.Fatalf("errors %d (want %d), measured acked %d (want %d): %s", r.Errors, total/4, r.MessagesAcked, measured*3/4, r.FirstError)
	}
	if len(r.ErrorMix) != 1 || attempts < 4 || attempts > 20 || r.Retries == 0 {
		t.Fatalf("error mix %v, retries %d: want about a dozen probes of partition 2", r.ErrorMix, r.Retries)
	}
	// The healthy partitions' acks are not held up by the failing one.
	if r.AckLatencyMs.P50 > 200 {
		t.Fatalf("ack p50 %.1f ms: healthy partitions waited", r.AckLatencyMs.P50)
	}
}

// TestRetryLimit: with --retries 2 a batch is sent at most three times,
// then its messages fail; the batches held behind it fail at the end.
func TestRetryLimit(t *testing.T) {
	sink := startSink(t)
	sink.FailProduce(kerr.NotEnoughReplicas.Code)
	cfg := retryTestConfig(sink.Addr(), "lean")
	cfg.Retries = 2
	cfg.DeliveryTimeout = 30 * time.Second
	cfg.DrainTimeout = time.Second
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	if r.MessagesAcked != 0 || r.Errors != 500 || r.Retries == 0 || r.MessagesRetried > 2*r.Errors {
		t.Fatalf("errors %d, retries %d, messages retried %d: want all failed, none re-sent more than twice",
			r.Errors, r.Retries, r.MessagesRetried)
	}
	if !strings.Contains(r.FirstError, "gave up after 2 retries: NOT_ENOUGH_REPLICAS") {
		t.Fatalf("first error %q", r.FirstError)
	}
}

// TestRetryRecovers: a broker that fails for a while and then accepts
// loses nothing; the messages that waited show it in their latency.
func TestRetryRecovers(t *testing.T) {
	sink := startSink(t)
	cfg := retryTestConfig(sink.Addr(), "lean")
	cfg.DeliveryTimeout = 10 * time.Second
	cfg.StartAt = time.Now().Add(300 * time.Millisecond)
	cfg.Quiet = false
	var progress bytes.Buffer
	go func() {
		// Wall-clock schedule: half a second into the measured window
		// the sink fails every produce for 600 ms.
		time.Sleep(time.Until(cfg.StartAt.Add(cfg.Warmup + 500*time.Millisecond)))
		sink.FailProduce(kerr.NotLeaderForPartition.Code)
		time.Sleep(600 * time.Millisecond)
		sink.FailProduce(0)
	}()
	run, err := Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	// The progress line shows retries and the mix once there are any.
	if !regexp.MustCompile(`errors 0  retries \d+ \(NOT_LEADER_OR_FOLLOWER: \d+\)\n`).Match(progress.Bytes()) {
		t.Errorf("progress lines lack the retries:\n%s", progress.String())
	}
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

// TestRetryOptions: the retry settings reach the run (its workload
// records them) and are validated before any connection; the null sink
// refuses every produce with NullSinkError (cmd/ringlog tests the flags).
func TestRetryOptions(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	run := func(mod func(o *Options)) error {
		o := DefaultOptions()
		o.NullSink, o.Out = true, out
		o.Config.Rate, o.Config.Duration, o.Config.Warmup, o.Config.Quiet = 1000, 500*time.Millisecond, 0, true
		mod(&o)
		return Execute(context.Background(), o, &bytes.Buffer{}, &bytes.Buffer{})
	}
	var ue *UsageError
	if err := run(func(o *Options) {
		o.Config.RetryBackoff, o.Config.RetryBackoffMax = 20*time.Millisecond, 10*time.Millisecond
	}); !errors.As(err, &ue) ||
		!strings.Contains(err.Error(), "retry-backoff-max 10ms must be at least retry-backoff 20ms") {
		t.Fatalf("bad backoff accepted: %v", err)
	}
	if err := run(func(o *Options) {
		o.Config.RetryBackoff, o.Config.RetryBackoffMax = 20*time.Millisecond, 300*time.Millisecond
		o.Config.Retries, o.Config.DeliveryTimeout = 7, 4*time.Second
	}); err != nil {
		t.Fatal(err)
	}
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	w := res.Workload
	if w["retry_backoff"] != "20ms" || w["retry_backoff_max"] != "300ms" || w["retries"] != "7" || w["delivery_timeout"] != "4s" {
		t.Fatalf("workload %v lacks the retry settings", w)
	}
	if res.Retries != 0 || res.ErrorMix != nil || res.Errors != 0 {
		t.Fatalf("a healthy run reports retries %d, mix %v, errors %d", res.Retries, res.ErrorMix, res.Errors)
	}
	// NullSinkError makes the sink refuse every produce.
	if err := run(func(o *Options) {
		o.NullSinkError, o.Config.DeliveryTimeout = "KAFKA_STORAGE_ERROR", 300*time.Millisecond
	}); err != nil {
		t.Fatal(err)
	}
	if res, err = results.ReadJSON(out); err != nil {
		t.Fatal(err)
	}
	if res.MessagesAcked != 0 || res.Errors != 500 || res.Retries == 0 || res.ErrorMix["KAFKA_STORAGE_ERROR"] <= res.Retries {
		t.Fatalf("refusing sink: acked %d errors %d retries %d mix %v", res.MessagesAcked, res.Errors, res.Retries, res.ErrorMix)
	}
	if err := run(func(o *Options) { o.NullSink, o.NullSinkError = false, "56" }); !errors.As(err, &ue) || !strings.Contains(err.Error(), "needs --null-sink") {
		t.Fatalf("NullSinkError without NullSink: %v", err)
	}
	if err := run(func(o *Options) { o.NullSinkError = "NO_SUCH_ERROR" }); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--null-sink-error") {
		t.Fatalf("unknown NullSinkError: %v", err)
	}
}

// TestRetryBackoffRealBroker drives the real broker into a retriable
// error: an RF=3 topic with min.insync.replicas=3 on three brokers, one
// follower killed and out of the ISR, so every acks=all produce is
// refused with NOT_ENOUGH_REPLICAS. The loadgen command then backs off,
// every message ends as an error, and the error mix is in result.json,
// the summary and report.html.
func TestRetryBackoffRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-broker cluster")
	}
	bin := realBrokerBin(t)
	t.Setenv("RINGLOG_REPLICA_LAG_TIME_MAX", "1s") // the killed follower leaves the ISR quickly
	if io := os.Getenv("RINGLOG_TEST_IO"); io != "" {
		t.Setenv("RINGLOG_IO", io)
	}
	// A file, not a buffer: the three processes write it at once.
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "brokers.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	brokerLog := func() string { b, _ := os.ReadFile(log.Name()); return string(b) }
	bs, err := StartLocalCluster(bin, dir, 3, 0, log)
	if err != nil {
		t.Fatalf("%v\n%s", err, brokerLog())
	}
	t.Cleanup(func() {
		for _, b := range bs {
			b.Stop()
		}
		if t.Failed() {
			t.Logf("broker log:\n%s", brokerLog())
		}
	})
	const topic = "retry"
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.Addr)
	}
	cfg := DefaultConfig()
	cfg.Bootstrap, cfg.Topic, cfg.Partitions, cfg.ReplicationFactor = addrs, topic, 1, 3
	cfg.TopicConfigs = map[string]string{"min.insync.replicas": "3"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitForReplicas(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareTopic(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	isr := func() (leader int32, n int) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return -1, 0
		}
		p := md.Topics[topic].Partitions[0]
		return p.Leader, len(p.ISR)
	}
	waitISR := func(want int) int32 {
		for {
			if l, n := isr(); l >= 0 && n == want {
				return l
			}
			select {
			case <-ctx.Done():
				l, n := isr()
				t.Fatalf("ISR of %d (leader %d), want %d", n, l, want)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	leader := waitISR(3)
	// Kill a follower (node ids are 1..3 in start order) and wait until
	// the ISR is below min.insync.replicas.
	var live []string
	killed := false
	for i, b := range bs {
		if int32(i+1) != leader && !killed {
			syscall.Kill(b.Pid(), syscall.SIGKILL)
			killed = true
			continue
		}
		live = append(live, b.Addr)
	}
	waitISR(2)

	out := filepath.Join(t.TempDir(), "run")
	var stdout bytes.Buffer
	o := DefaultOptions()
	o.Out = out
	o.Config.Bootstrap, o.Config.Topic, o.Config.Rate, o.Config.MessageSize = live, topic, 200, 200
	o.Config.Linger, o.Config.Duration, o.Config.Warmup, o.Config.Quiet = 100*time.Millisecond, 3*time.Second, 500*time.Millisecond, true
	o.Config.RetryBackoff, o.Config.RetryBackoffMax, o.Config.DeliveryTimeout = 100*time.Millisecond, time.Second, 2*time.Second
	start := time.Now()
	err = Execute(context.Background(), o, &stdout, os.Stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	t.Logf("run took %v\n%s", time.Since(start), stdout.String())
	res, err := results.ReadJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	var attempts int64
	for name, n := range res.ErrorMix {
		// Before the refusals the ISR may just have shrunk under a request.
		if name != "NOT_ENOUGH_REPLICAS" && name != "NOT_ENOUGH_REPLICAS_AFTER_APPEND" && name != "REQUEST_TIMED_OUT" {
			t.Errorf("error mix %v: unexpected %s", res.ErrorMix, name)
		}
		attempts += n
	}
	if res.ErrorMix["NOT_ENOUGH_REPLICAS"] == 0 || res.Retries == 0 {
		t.Fatalf("error mix %v, retries %d: want NOT_ENOUGH_REPLICAS retried", res.ErrorMix, res.Retries)
	}
	if res.MessagesAcked != 0 || res.Errors != 700 {
		t.Fatalf("acked %d, errors %d: want all 700 messages failed (%s)", res.MessagesAcked, res.Errors, res.FirstError)
	}
	// One probe per backoff (100, 200, 400, 800 ms, then 1 s) from the
	// first refusal until the last batch expires, 5.5 s later: about 10
	// attempts for the 35 batches (each re-sent every 100 ms before the
	// backoff: about 700). No batch is re-sent more than 5 times in 2 s.
	if attempts > 20 || res.MessagesRetried > 5*res.Errors {
		t.Fatalf("%d attempts, %d retries, %d messages re-sent: want about 10 attempts", attempts, res.Retries, res.MessagesRetried)
	}
	// Backing off (and looking leaders up) must not hold up the schedule:
	// new batches still go out at their intended times.
	if res.SendDelayMs.P99 > 50 {
		t.Fatalf("send delay p99 %.1f ms: the generator fell behind while retrying", res.SendDelayMs.P99)
	}
	if !regexp.MustCompile(`error mix\s+NOT_ENOUGH_REPLICAS: \d+`).MatchString(stdout.String()) {
		t.Fatalf("summary lacks the error mix:\n%s", stdout.String())
	}
	page, err := os.ReadFile(filepath.Join(out, results.HTMLFile))
	if err != nil || !bytes.Contains(page, []byte("<tr><td>NOT_ENOUGH_REPLICAS</td>")) {
		t.Fatalf("report.html lacks the error mix table (%v)", err)
	}
}

// TestRetryLeaderMoveSkipsBackoff: when a lookup after
// NOT_LEADER_OR_FOLLOWER names another broker, the lean client re-sends
// there at once instead of waiting out its backoff (1 s here). Sink A
// leads until it starts refusing and naming sink B; every message must
// then be acknowledged by B well within the backoff.
func TestRetryLeaderMoveSkipsBackoff(t *testing.T) {
	a, b := startSink(t), startSink(t)
	b.SetNodeID(1)
	b.SetLeader(1, b.Addr())
	cfg := retryTestConfig(a.Addr(), "lean")
	cfg.Linger = 20 * time.Millisecond
	cfg.RetryBackoff, cfg.RetryBackoffMax = time.Second, time.Second
	cfg.DeliveryTimeout = 10 * time.Second
	cfg.StartAt = time.Now().Add(300 * time.Millisecond)
	go func() {
		// Wall-clock schedule: the leader moves half a second into the
		// measured window.
		time.Sleep(time.Until(cfg.StartAt.Add(cfg.Warmup + 500*time.Millisecond)))
		a.SetLeader(1, b.Addr())
		a.FailProduce(kerr.NotLeaderForPartition.Code)
	}()
	run, err := Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	want := int64(cfg.Rate * cfg.Duration.Seconds())
	if r.Errors != 0 || r.MessagesAcked < want-2 || r.MessagesAcked > want {
		t.Fatalf("acked %d (want %d), errors %d (%s)", r.MessagesAcked, want, r.Errors, r.FirstError)
	}
	if r.ErrorMix["NOT_LEADER_OR_FOLLOWER"] == 0 || b.Requests.Load() == 0 {
		t.Fatalf("the leader never moved: mix %v, requests to the new leader %d", r.ErrorMix, b.Requests.Load())
	}
	// Waiting out the backoff would put the moved batches at >= 1 s.
	if r.AckLatencyMs.Max >= 500 {
		t.Fatalf("ack max %.1f ms: the re-send waited for the backoff instead of going to the new leader", r.AckLatencyMs.Max)
	}
}
