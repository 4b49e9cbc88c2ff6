package loadgen

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBacklogWatch drives the counters by hand: producers ack steadily,
// the consumers read only after the watch starts them, faster than the
// producers, and the watch reports the backlog built and its drain.
func TestBacklogWatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MessageSize, cfg.Rate, cfg.Consumers, cfg.ConsumerGroups = 1000, 10_000, 1, 2
	cfg.BacklogBytes = 2_000_000 // 2000 unread messages over the two groups
	st := newRunState(cfg)
	st.start(time.Now())
	var started atomic.Bool
	var out bytes.Buffer
	b := newBacklogWatch(st, func() { started.Store(true) }, &out)
	producersDone := make(chan struct{})
	go b.run(producersDone)
	stop := time.After(3 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-b.done:
			break loop
		case <-stop:
			close(producersDone)
			<-b.done
			break loop
		case <-tick.C:
			st.c.acked.Add(10) // ~10k msg/s
			if started.Load() {
				st.c.consumed.Add(60) // both groups, 3x the production
			}
		}
	}
	r := b.res
	if !started.Load() || !r.Drained {
		t.Fatalf("started %v, result %+v, warning %q", started.Load(), r, b.warn)
	}
	if r.BacklogMessages < 2000 || r.BacklogBytes != r.BacklogMessages*1000 || r.TargetBytes != 2_000_000 {
		t.Errorf("backlog %+v, want >= 2000 messages of 1000 bytes", r)
	}
	if r.DrainSeconds <= 0 || r.DrainRate <= 0 || r.FillSeconds <= 0 {
		t.Errorf("drain %+v: want positive times and rate", r)
	}
	// 2000 unread down to 200, closing at 40 net per ms: about 45 ms
	// (ticks are late under -race, never early).
	if !strings.Contains(out.String(), "consumers resumed") || !strings.Contains(out.String(), "backlog: drained in") {
		t.Errorf("progress lines %q", out.String())
	}
	if r.DrainSeconds < 0.03 {
		t.Errorf("drained in %.3f s: faster than the counters allow", r.DrainSeconds)
	}
}

// TestBacklogWatchNotBuilt: producers that stop before the backlog is
// reached start the consumers anyway and say so.
func TestBacklogWatchNotBuilt(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Consumers, cfg.BacklogBytes = 1, 1<<30
	st := newRunState(cfg)
	st.start(time.Now())
	var started atomic.Bool
	b := newBacklogWatch(st, func() { started.Store(true) }, nil)
	done := make(chan struct{})
	st.c.acked.Add(100)
	close(done)
	b.run(done)
	if !started.Load() || b.res.Drained || b.warn == "" || b.res.BacklogMessages != 100 {
		t.Errorf("started %v result %+v warning %q", started.Load(), b.res, b.warn)
	}
	if what, detail := b.res.Summary(); what == "" || detail == "" {
		t.Error("empty summary")
	}
}

// TestRunGroupsAndBacklogAgainstKfake runs the real consumer path in
// process (under -race in make test): two groups of two members each
// read every message once per group, and a backlog builds while they are
// paused and drains once they resume.
func TestRunGroupsAndBacklogAgainstKfake(t *testing.T) {
	kc := newKfake(t)
	cfg := testConfig(kc.ListenAddrs())
	// A low rate: under -race on a busy machine the in-process broker
	// and consumers must still read faster than it is produced.
	cfg.Topic, cfg.MessageSize, cfg.Rate = "lg-groups", 100, 800
	cfg.Duration, cfg.Warmup = 1200*time.Millisecond, 0
	cfg.Consumers, cfg.ConsumerGroups = 2, 2
	cfg.BacklogBytes = 2 * 160 * 100 // 0.2 s of production, read by two groups
	run, err := Run(context.Background(), cfg, progressOut(t))
	if err != nil {
		t.Fatal(err)
	}
	r := run.Result
	if r.Errors != 0 || r.MessagesAcked == 0 {
		t.Fatalf("acked %d errors %d (%s)", r.MessagesAcked, r.Errors, r.FirstError)
	}
	if r.MessagesConsumed != 2*r.MessagesAcked || r.E2ELatencyMs == nil || r.E2ELatencyMs.Count != 2*r.MessagesAcked {
		t.Fatalf("consumed %d, e2e %+v: want every one of %d acked messages once per group", r.MessagesConsumed, r.E2ELatencyMs, r.MessagesAcked)
	}
	b := r.Backlog
	if b == nil || !b.Drained || b.BacklogBytes < cfg.BacklogBytes || b.DrainRate <= 0 {
		t.Fatalf("backlog %+v (warnings %v)", b, r.Warnings)
	}
	if w := r.Workload; w["consumer_groups"] != "2" || w["backlog_bytes"] != "32000" {
		t.Errorf("workload %v", w)
	}
}
