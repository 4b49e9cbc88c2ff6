package replication

import (
	"testing"
	"time"
)

func TestThrottleBucket(t *testing.T) {
	th := NewThrottle()
	if th.Limited() || th.Delay(t0) != 0 {
		t.Fatal("a new throttle must be unlimited")
	}
	th.Record(1<<30, t0)
	if th.Delay(t0) != 0 {
		t.Fatal("unlimited: recording must not throttle")
	}
	th.SetRate(1000, t0) // bytes/s
	// No saved-up burst at first: the first fetch goes (the bucket is
	// not in debt), the next waits for what it cost.
	if d := th.Delay(t0); d != 0 {
		t.Fatalf("delay before any bytes: %v", d)
	}
	th.Record(500, t0)
	if d := th.Delay(t0); d < 500*time.Millisecond || d > 502*time.Millisecond {
		t.Fatalf("delay after 500 bytes at 1000/s: %v, want ~500ms", d)
	}
	at := t0.Add(500 * time.Millisecond)
	if d := th.Delay(at); d != 0 {
		t.Fatalf("debt paid after 500ms, delay %v", d)
	}
	// Idle for a minute: at most ThrottleBurst of the rate saved up.
	at = at.Add(time.Minute)
	th.Record(1000, at)
	if d := th.Delay(at); d != 0 {
		t.Fatalf("burst of one second's worth throttled: %v", d)
	}
	th.Record(1000, at)
	if d := th.Delay(at); d < time.Second || d > time.Second+2*time.Millisecond {
		t.Fatalf("past the burst: delay %v, want ~1s", d)
	}
	// A greedy reader that waits out each delay is held to the rate.
	th2 := NewThrottle()
	th2.SetRate(4<<20, t0)
	now, served := t0, int64(0)
	for now.Before(t0.Add(10 * time.Second)) {
		if d := th2.Delay(now); d > 0 {
			now = now.Add(d)
			continue
		}
		th2.Record(1<<20, now)
		served += 1 << 20
	}
	if rate := float64(served) / 10; rate < 3.9*(1<<20) || rate > 4.6*(1<<20) {
		t.Fatalf("greedy reader got %.0f B/s, want about %d", rate, 4<<20)
	}
	if st := th2.Stats(); st.Bytes != uint64(served) {
		t.Fatalf("stats %+v, served %d", st, served)
	}
	th2.SetRate(Unlimited, now)
	if th2.Delay(now) != 0 || th2.Limited() {
		t.Fatal("back to unlimited must release at once")
	}
	th2.SetRate(0, now)
	th2.Record(1, now)
	if th2.Delay(now.Add(time.Hour)) == 0 {
		t.Fatal("rate 0 must hold throttled replicas")
	}
}

// TestFollowerThrottle: while the rate is exceeded a throttled partition
// is left out of the request (its long poll cut to the wait) and comes
// back once the debt is paid; an unthrottled one is always fetched;
// appended records of the throttled one are charged.
func TestFollowerThrottle(t *testing.T) {
	f := NewFollower(DefaultConfig(), 2, 1)
	la, lb := logWith(), logWith()
	f.AddPartition(tpA, 1, la)
	f.AddPartition(tpB, 1, lb)
	th := NewThrottle()
	th.SetRate(1000, t0)
	f.SetThrottle(&FollowerThrottle{Limit: th, Throttled: func(tp TopicPartition) bool { return tp == tpA }})

	req := f.BuildRequest(t0)
	if len(req.Partitions) != 2 || req.MaxWait != DefaultConfig().FetchMaxWait {
		t.Fatalf("within the rate: %+v", req)
	}
	recs := appendBatch(nil, 0, 1, 1)
	resp := &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 1, Records: recs},
		{TopicPartition: tpB, HighWatermark: 1, Records: appendBatch(nil, 0, 1, 2)},
	}}
	f.HandleResponse(req, resp, t0)
	if st := th.Stats(); st.Bytes != uint64(len(recs)) {
		t.Fatalf("charged %d bytes, want %d (the throttled partition's only)", st.Bytes, len(recs))
	}
	la.flush()
	lb.flush()
	// a is at the leader's high watermark: in sync, never held back.
	th.Record(2000, t0) // now two seconds in debt
	if req := f.BuildRequest(t0); len(req.Partitions) != 2 {
		t.Fatalf("caught-up partition held back: %+v", req)
	}
	// Behind the leader's high watermark again: held back.
	f.HandleResponse(&FetchRequest{Partitions: []FetchPartition{{TopicPartition: tpA, CurrentLeaderEpoch: 1, FetchOffset: 1}}},
		&FetchResponse{Partitions: []FetchPartitionResponse{{TopicPartition: tpA, HighWatermark: 50}}}, t0)
	req = f.BuildRequest(t0)
	if len(req.Partitions) != 1 || req.Partitions[0].TopicPartition != tpB {
		t.Fatalf("over the rate: %+v", req)
	}
	if req.MaxWait > DefaultConfig().FetchMaxWait {
		t.Fatalf("max wait %v", req.MaxWait)
	}
	if wake, ok := f.NextWake(); !ok || wake.Sub(t0) < 2*time.Second {
		t.Fatalf("next wake %v %v", wake, ok)
	}
	if st := th.Stats(); st.Withheld != 1 {
		t.Fatalf("withheld %d", st.Withheld)
	}
	later := t0.Add(3 * time.Second)
	req = f.BuildRequest(later)
	if len(req.Partitions) != 2 {
		t.Fatalf("after the debt is paid: %+v", req)
	}
	if _, ok := f.NextWake(); ok {
		t.Fatal("no wake needed once nothing is held back")
	}
	// Only the throttled partition left and held back: no request, but a
	// wake time for when it may go.
	f.RemovePartition(tpB)
	th.Record(5000, later)
	if req := f.BuildRequest(later); req != nil {
		t.Fatalf("request with only a held-back partition: %+v", req)
	}
	if wake, ok := f.NextWake(); !ok || wake.Before(later.Add(4*time.Second)) { // 5000 bytes less what 3 s earned
		t.Fatalf("next wake %v %v", wake, ok)
	}
}
