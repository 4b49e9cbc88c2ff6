package core

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/loadgen"
	"github.com/ringlog/ringlog/results"
)

func obsLoadConfig(b *harness.BrokerProc, topic string) loadgen.Config {
	cfg := loadgen.DefaultConfig()
	cfg.Bootstrap = []string{b.Addr}
	cfg.Topic = topic
	cfg.Partitions = 2
	cfg.Rate = 2000
	cfg.MessageSize = 500
	cfg.Warmup = time.Second
	cfg.Duration = 3 * time.Second
	cfg.Consumers = 1
	cfg.DrainTimeout = 10 * time.Second
	cfg.Quiet = true
	return cfg
}

// TestMetricsMoveUnderLoad scrapes /metrics before, during and after a
// short produce+consume load run and checks that the key series exist and
// move: request latency per API, per-topic produce and fetch, bytes,
// fsyncs and their latency, the ring's batching counters, connections.
func TestMetricsMoveUnderLoad(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir())
	const topic = "obs-metrics"
	before := harness.Scrape(t, b.Admin)
	for _, name := range []string{"ringlog_io_path_info", "ringlog_fsyncs_total", "ringlog_offline_partitions",
		"ringlog_isr_shrinks_total", "ringlog_group_rebalances_total", "go_goroutines", "go_sched_latencies_seconds_count"} {
		if _, ok := harness.SumSeries(before, name); !ok {
			t.Errorf("series %s missing before the run", name)
		}
	}

	cfg := obsLoadConfig(b, topic)
	type outcome struct {
		run *results.Run
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		run, err := loadgen.Run(context.Background(), cfg, io.Discard)
		done <- outcome{run, err}
	}()

	// While the run is on, its producer and consumer connections are open.
	var during map[string]float64
	harness.EventuallyEvery(t, 100*time.Millisecond, cfg.Warmup+cfg.Duration, "an open connection during the run", func() (bool, string) {
		during = harness.Scrape(t, b.Admin)
		c, _ := harness.SumSeries(during, "ringlog_connections")
		return c > 0, fmt.Sprintf("ringlog_connections %v", c)
	})
	var res outcome
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("load run did not end within a minute")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.run.Result
	if r.MessagesAcked == 0 || r.Errors != 0 {
		t.Fatalf("load run: acked %d, errors %d (%s)", r.MessagesAcked, r.Errors, r.FirstError)
	}
	var after map[string]float64
	grew := func(name string, fragments ...string) float64 {
		t.Helper()
		a, ok := harness.SumSeries(after, name, fragments...)
		if !ok {
			t.Errorf("series %s%v missing after the run", name, fragments)
			return 0
		}
		bv, _ := harness.SumSeries(before, name, fragments...)
		if a <= bv {
			t.Errorf("series %s%v did not grow: %v -> %v", name, fragments, bv, a)
		}
		return a - bv
	}
	// Two refused frames, each closing its connection: an absurd length
	// prefix and an API key nobody serves.
	unknownAPI := []byte{0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	for _, frame := range [][]byte{{0x7f, 0xff, 0xff, 0xff}, unknownAPI} {
		nc, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write(frame)
		io.Copy(io.Discard, nc) // until the broker closes it
		nc.Close()
	}
	after = harness.Scrape(t, b.Admin)
	grew("ringlog_rejected_requests_total", `reason="frame_size"`)
	grew("ringlog_rejected_requests_total", `reason="unknown_api"`)

	grew("ringlog_request_duration_seconds_count", `api="Produce"`)
	grew("ringlog_request_duration_seconds_count", `api="Fetch"`)
	grew("ringlog_request_duration_seconds_bucket", `api="Produce"`, `le="+Inf"`)
	grew("ringlog_requests_total", `api="Produce"`)
	msgs := grew("ringlog_topic_messages_in_total", `topic="`+topic+`"`)
	if msgs < float64(r.MessagesAcked) {
		t.Errorf("topic messages in %v < %d acknowledged", msgs, r.MessagesAcked)
	}
	if in := grew("ringlog_topic_bytes_in_total", `topic="`+topic+`"`); in < float64(r.MessagesAcked)*float64(cfg.MessageSize) {
		t.Errorf("topic bytes in %v < %d messages of %d bytes", in, r.MessagesAcked, cfg.MessageSize)
	}
	grew("ringlog_topic_bytes_out_total", `topic="`+topic+`"`, `fetcher="consumer"`)
	grew("ringlog_topic_fetch_partitions_total", `topic="`+topic+`"`)
	grew("ringlog_bytes_in_total")
	grew("ringlog_bytes_out_total")
	grew("ringlog_fetch_bytes_total")
	grew("ringlog_appends_total")
	grew("ringlog_appended_bytes_total")
	if _, ok := harness.SumSeries(after, "ringlog_journal_writes_total"); ok {
		// Under the journal a round's barrier is one journal write;
		// segments are fdatasynced by checkpoints, not every round.
		grew("ringlog_journal_writes_total")
		grew("ringlog_journal_records_total")
	} else {
		grew("ringlog_fsyncs_total")
	}
	grew("ringlog_fsync_duration_seconds_count")
	if _, ok := harness.SumSeries(after, "ringlog_io_path_info", `path="uring"`); ok {
		grew("ringlog_ring_enters_total")
		grew("ringlog_ring_submissions_total")
		grew("ringlog_ring_completions_total")
		grew("ringlog_ring_submissions_per_enter_count")
	}
	if errs, _ := harness.SumSeries(after, "ringlog_produce_errors_total"); errs != 0 {
		t.Errorf("produce errors counted in an error-free run: %v", errs)
	}
	if t.Failed() {
		t.Logf("broker output:\n%s", b.Out.String())
	}
}

// TestPprofOffWithFlag: --pprof=false removes the profiling endpoints and
// keeps /metrics.
func TestPprofOffWithFlag(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir(), "--pprof=false")
	c := http.Client{Timeout: 5 * time.Second}
	for path, want := range map[string]int{"/debug/pprof/": http.StatusNotFound, "/debug/ringlog/profile?seconds=1": http.StatusNotFound, "/metrics": http.StatusOK} {
		resp, err := c.Get("http://" + b.Admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %s, want %d", path, resp.Status, want)
		}
	}
}

// TestReplicationMetrics checks the replication series on a 3-node
// cluster: the leader reports its partition and each follower's lag; a
// paused follower drops out of the ISR (shrink counted, partition under
// replicated) and is counted back in (expand) once it resumes. The
// per-partition series follow: log end, high watermark and log start on
// every replica, ISR size and the under-replicated flags on the leader,
// and the acks=all produce held while the paused follower is still in the
// ISR shows in ringlog_produce_oldest_wait_seconds until the ISR shrinks.
func TestReplicationMetrics(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // SIGSTOP
	c := harness.StartReplCluster(t, 3)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	const topic = "obs-repl"
	resp, err := adm.CreateTopic(harness.Context(t, 30*time.Second), 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	md := harness.WaitMetadata(t, adm, 20*time.Second, "leader and full ISR", func(m kadm.Metadata) bool {
		ps := m.Topics[topic].Partitions
		return len(ps) == 1 && ps[0].Leader >= 0 && len(ps[0].ISR) == 3
	})
	leaderID := md.Topics[topic].Partitions[0].Leader
	leader := c.Node(leaderID)
	// Log lines about a partition name topic, partition and leader epoch.
	harness.Eventually(t, 10*time.Second, "a 'leading partition' line with topic, partition and leader_epoch", func() (bool, string) {
		out := leader.Out.String()
		return hasLogLine(out, `msg="leading partition"`, "topic="+topic, "partition=0", "leader_epoch="), out
	})
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(time.Millisecond))
	produce := func(n int) {
		t.Helper()
		ctx := harness.Context(t, 30*time.Second)
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(20)

	// waitFor polls the leader's /metrics until ok accepts them.
	waitFor := func(what string, ok func(m map[string]float64) bool) map[string]float64 {
		t.Helper()
		var m map[string]float64
		harness.EventuallyEvery(t, 200*time.Millisecond, 30*time.Second, fmt.Sprintf("leader %d: %s", leaderID, what), func() (bool, string) {
			m = harness.Scrape(t, leader.Admin)
			return ok(m), "not in its /metrics"
		})
		return m
	}
	var followers []int32
	for id := int32(1); id <= 3; id++ {
		if id != leaderID {
			followers = append(followers, id)
		}
	}
	m := waitFor("both followers' lag", func(m map[string]float64) bool {
		for _, f := range followers {
			if _, ok := harness.SumSeries(m, "ringlog_follower_lag_offsets", `topic="`+topic+`"`, fmt.Sprintf(`follower="%d"`, f), `in_isr="true"`); !ok {
				return false
			}
		}
		return true
	})
	if led, _ := harness.SumSeries(m, "ringlog_replicated_partitions_led"); led < 1 {
		t.Fatalf("leader reports %v led partitions", led)
	}
	if under, ok := harness.SumSeries(m, "ringlog_under_replicated_partitions"); !ok || under != 0 {
		t.Fatalf("under-replicated %v with a full ISR", under)
	}
	shrinks0, _ := harness.SumSeries(m, "ringlog_isr_shrinks_total")
	expands0, _ := harness.SumSeries(m, "ringlog_isr_expands_total")
	part := []string{`topic="` + topic + `"`, `partition="0"`}
	// partSeries reads one per-partition series of topic-0, or a
	// per-broker one (-1: absent).
	partSeries := func(m map[string]float64, name string) float64 {
		fragments := part
		if name == "ringlog_produce_oldest_wait_seconds" {
			fragments = nil // per broker
		}
		v, ok := harness.SumSeries(m, name, fragments...)
		if !ok {
			return -1
		}
		return v
	}
	for _, want := range []struct {
		name string
		v    float64
	}{{"ringlog_partition_log_end_offset", 20}, {"ringlog_partition_high_watermark", 20}, {"ringlog_partition_log_start_offset", 0},
		{"ringlog_partition_isr_size", 3}, {"ringlog_partition_under_replicated", 0}, {"ringlog_partition_under_min_isr", 0},
		{"ringlog_produce_oldest_wait_seconds", 0}} {
		if got := partSeries(m, want.name); got != want.v {
			t.Errorf("leader: %s = %v, want %v", want.name, got, want.v)
		}
	}
	for _, f := range followers {
		fm := harness.Scrape(t, c.Node(f).Admin)
		if got := partSeries(fm, "ringlog_partition_log_end_offset"); got != 20 {
			t.Errorf("follower %d: log end offset %v, want 20", f, got)
		}
		if got := partSeries(fm, "ringlog_partition_isr_size"); got != -1 {
			t.Errorf("follower %d reports an ISR size (%v) for a partition it does not lead", f, got)
		}
	}

	// Pause a follower that is not the controller: only the ISR changes.
	ctrl := c.Controller(20 * time.Second)
	paused := followers[0]
	if paused == ctrl {
		paused = followers[1]
	}
	p := c.Node(paused)
	p.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { p.Signal(syscall.SIGCONT) })
	// The first acks=all produce waits for the paused ISR member until it
	// is dropped (replica lag 3 s): the oldest wait shows it meanwhile.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		ctx := harness.Context(t, 30*time.Second)
		for i := range 20 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("w%d", i))}).FirstErr(); err != nil {
				t.Errorf("produce with a paused follower: %v", err)
				return
			}
		}
	}()
	waitFor("a produce waiting on the paused follower", func(m map[string]float64) bool {
		return partSeries(m, "ringlog_produce_oldest_wait_seconds") >= 0.5
	})
	<-produced
	m = waitFor("an ISR shrink", func(m map[string]float64) bool {
		s, _ := harness.SumSeries(m, "ringlog_isr_shrinks_total")
		u, _ := harness.SumSeries(m, "ringlog_under_replicated_partitions")
		return s > shrinks0 && u >= 1
	})
	for _, want := range []struct {
		name string
		v    float64
	}{{"ringlog_partition_log_end_offset", 40}, {"ringlog_partition_high_watermark", 40},
		{"ringlog_partition_isr_size", 2}, {"ringlog_partition_under_replicated", 1}, {"ringlog_partition_under_min_isr", 0},
		{"ringlog_produce_oldest_wait_seconds", 0}} {
		if got := partSeries(m, want.name); got != want.v {
			t.Errorf("leader with a follower out of the ISR: %s = %v, want %v", want.name, got, want.v)
		}
	}
	p.Signal(syscall.SIGCONT)
	produce(5)
	waitFor("an ISR expand", func(m map[string]float64) bool {
		e, _ := harness.SumSeries(m, "ringlog_isr_expands_total")
		u, _ := harness.SumSeries(m, "ringlog_under_replicated_partitions")
		return e > expands0 && u == 0 && partSeries(m, "ringlog_partition_isr_size") == 3 &&
			partSeries(m, "ringlog_partition_under_replicated") == 0 && partSeries(m, "ringlog_partition_high_watermark") == 45
	})

	// A new topic is picked up by followers at once: those already
	// long-polling a leader of one of its partitions (every node leads
	// one of three, and all follow the rest) cancel the poll and send a
	// fetch carrying it, instead of waiting out the 500 ms poll.
	const fresh = "obs-repl-new"
	interrupts := func() float64 {
		sum := 0.0
		for _, b := range c.Nodes {
			v, _ := harness.SumSeries(harness.Scrape(t, b.Admin), "ringlog_replica_fetch_interrupts_total")
			sum += v
		}
		return sum
	}
	before := interrupts()
	harness.CreateRF3Topic(t, adm, fresh, 3)
	manual := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		start := time.Now()
		if err := manual.ProduceSync(harness.Context(t, 30*time.Second), &kgo.Record{Topic: fresh, Partition: p, Value: []byte("first")}).FirstErr(); err != nil {
			t.Fatalf("first acks=all produce to %s-%d: %v", fresh, p, err)
		}
		t.Logf("first acks=all produce to %s-%d acknowledged in %v", fresh, p, time.Since(start))
	}
	if after := interrupts(); after <= before {
		t.Errorf("replica fetch interrupts %v -> %v: no follower cut its long poll for the new partitions", before, after)
	}
}

// hasLogLine reports whether one line of a text log holds every part.
func hasLogLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
