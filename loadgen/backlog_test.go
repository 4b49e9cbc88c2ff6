package loadgen

import (
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
	b := newBacklogWatch(st, func() { started.Store(true) })
	producersDone := make(chan struct{})
	go b.run(producersDone)
	stop := time.After(3 * time.Second)
	joined := time.After(200 * time.Millisecond) // the groups' members have their partitions
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
		case <-joined:
			st.assigned.Store(2 * int64(cfg.Partitions))
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
	// The target is reached after about 100 ms, but the consumers are
	// resumed only once the groups joined at 200 ms: about 4000 unread.
	if r.BacklogMessages < 3000 || r.BacklogBytes != r.BacklogMessages*1000 || r.TargetBytes != 2_000_000 {
		t.Errorf("backlog %+v, want >= 3000 messages of 1000 bytes (built until the groups joined)", r)
	}
	if r.DrainSeconds <= 0 || r.DrainRate <= 0 || r.FillSeconds <= 0 {
		t.Errorf("drain %+v: want positive times and rate", r)
	}
	// 4000 unread, closing at 40 net per ms: about 100 ms (ticks are late
	// under -race, never early).
	if r.DrainSeconds < 0.06 {
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
	b := newBacklogWatch(st, func() { started.Store(true) })
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
