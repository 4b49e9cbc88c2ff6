package replication

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
)

// remoteCfg is DefaultConfig with a RemoteRestart that must not be
// called (the Follower tests drive jobs by hand).
func remoteCfg(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.RemoteRestart = func(context.Context, string, int32) (int64, []byte, []epochcache.Entry, error) {
		t.Error("Follower called RemoteRestart itself")
		return 0, nil, nil, errors.New("unexpected")
	}
	return cfg
}

func moved(tp TopicPartition) FetchPartitionResponse {
	return FetchPartitionResponse{TopicPartition: tp, Err: ErrOffsetMovedToTieredStorage, HighWatermark: 500, LogStartOffset: 0}
}

func hasPartition(req *FetchRequest, tp TopicPartition) (FetchPartition, bool) {
	if req == nil {
		return FetchPartition{}, false
	}
	i := slices.IndexFunc(req.Partitions, func(p FetchPartition) bool { return p.TopicPartition == tp })
	if i < 0 {
		return FetchPartition{}, false
	}
	return req.Partitions[i], true
}

var remoteHistory = []epochcache.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 90}}

// A partition answered OFFSET_MOVED_TO_TIERED_STORAGE is parked (left out
// of requests, other partitions fetch on), handed out as a job, and on
// the job's result restarted at the remote end with the remote epochs,
// its HW there, fetching from there.
func TestFollowerRemoteRestartParksAndResumes(t *testing.T) {
	f := NewFollower(remoteCfg(t), 2, 1)
	la, lb := logWith(0, 0), logWith(0)
	f.AddPartition(tpA, 5, la)
	f.AddPartition(tpB, 5, lb)
	req := f.BuildRequest(t0)
	res := f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		moved(tpA),
		{TopicPartition: tpB, HighWatermark: 2, Records: appendBatch(nil, 1, 5, 11)},
	}}, t0)
	if len(res.RemoteRestarts) != 1 || res.RemoteRestarts[0].TopicPartition != tpA || len(res.Appended) != 1 {
		t.Fatalf("result %+v", res)
	}
	job := res.RemoteRestarts[0]
	lb.flush()
	// Parked: b fetches, a does not, however much time passes.
	for _, now := range []time.Time{t0, t0.Add(time.Hour)} {
		req = f.BuildRequest(now)
		if _, ok := hasPartition(req, tpA); ok {
			t.Fatalf("parked partition fetched: %+v", req.Partitions)
		}
		if _, ok := hasPartition(req, tpB); !ok {
			t.Fatalf("other partition not fetched while a is parked: %+v", req)
		}
	}
	if _, ok := f.NextWake(); ok {
		t.Fatal("a parked partition has no wake time")
	}
	// Same epoch and log again (a metadata refresh): still parked.
	if f.AddPartition(tpA, 5, la) {
		t.Fatal("unchanged AddPartition reported a change")
	}
	ok, err := f.OnRemoteRestart(job, RemoteRestartResult{Offset: 100, ProducerSnapshot: []byte("snap"), Epochs: remoteHistory}, t0)
	if !ok || err != nil {
		t.Fatalf("restart not applied: %v %v", ok, err)
	}
	if la.start != 100 || la.LogEndOffset() != 100 || la.hw != 100 || string(la.snapshot) != "snap" {
		t.Fatalf("log start %d end %d hw %d snapshot %q", la.start, la.LogEndOffset(), la.hw, la.snapshot)
	}
	if got := la.cache.Entries(); !slices.Equal(got, []epochcache.Entry{{Epoch: 4, StartOffset: 100}}) {
		t.Fatalf("epochs %v", got)
	}
	req = f.BuildRequest(t0)
	pa, ok := hasPartition(req, tpA)
	if !ok || pa.FetchOffset != 100 || pa.LastFetchedEpoch != 4 || pa.LogStartOffset != 100 {
		t.Fatalf("fetch after restart: %+v (in request %v)", pa, ok)
	}
	// A result delivered twice applies once.
	if ok, err := f.OnRemoteRestart(job, RemoteRestartResult{Offset: 200}, t0); ok || err != nil || la.start != 100 {
		t.Fatalf("stale job applied: %v %v start %d", ok, err, la.start)
	}
	// Records from the restart point are appended as usual.
	res = f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 500, Records: appendBatch(nil, 100, 4, 7)},
	}}, t0)
	if len(res.Appended) != 1 || la.LogEndOffset() != 101 {
		t.Fatalf("append after restart: %+v leo %d", res, la.LogEndOffset())
	}
}

// A leader change while parked drops the restart point (it describes a
// leader we no longer follow); so does a removal, even when the
// partition is added back at the same epoch.
func TestFollowerRemoteRestartDroppedAfterChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(f *Follower, l *memLog)
	}{
		{"epoch change", func(f *Follower, l *memLog) { f.AddPartition(tpA, 6, l) }},
		{"removed and re-added", func(f *Follower, l *memLog) { f.RemovePartition(tpA); f.AddPartition(tpA, 5, l) }},
		{"removed", func(f *Follower, l *memLog) { f.RemovePartition(tpA) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := NewFollower(remoteCfg(t), 2, 1)
			la := logWith(0, 0)
			f.AddPartition(tpA, 5, la)
			res := f.HandleResponse(f.BuildRequest(t0), &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, t0)
			if len(res.RemoteRestarts) != 1 {
				t.Fatalf("result %+v", res)
			}
			c.change(f, la)
			ok, err := f.OnRemoteRestart(res.RemoteRestarts[0], RemoteRestartResult{Offset: 100, Epochs: remoteHistory}, t0)
			if ok || err != nil || la.start != 0 || la.LogEndOffset() != 2 {
				t.Fatalf("dropped result applied: %v %v, log [%d, %d)", ok, err, la.start, la.LogEndOffset())
			}
			if c.name != "removed" {
				if _, ok := hasPartition(f.BuildRequest(t0), tpA); !ok {
					t.Fatal("partition not fetching after the change")
				}
			}
		})
	}
}

// Errors back the partition off by FetchBackoff, after which it fetches
// again (and a new answer parks it again): a failed RemoteRestart, a
// failed log restart, and a restart point not above our log end.
func TestFollowerRemoteRestartErrorsBackOff(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(l *memLog)
		res   RemoteRestartResult
		want  error
	}{
		{"store error", nil, RemoteRestartResult{Err: errors.New("store down")}, nil},
		{"log error", func(l *memLog) { l.restartErr = errors.New("disk") }, RemoteRestartResult{Offset: 100}, ErrStorage},
		{"not above our log end", nil, RemoteRestartResult{Offset: 2}, ErrOffsetMovedToTieredStorage},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := remoteCfg(t)
			f := NewFollower(cfg, 2, 1)
			la := logWith(0, 0)
			if c.setup != nil {
				c.setup(la)
			}
			f.AddPartition(tpA, 5, la)
			res := f.HandleResponse(f.BuildRequest(t0), &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, t0)
			ok, err := f.OnRemoteRestart(res.RemoteRestarts[0], c.res, t0)
			if ok || err == nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v %v, want a backoff with %v", ok, err, c.want)
			}
			if la.start != 0 || la.LogEndOffset() != 2 {
				t.Fatalf("log changed: [%d, %d)", la.start, la.LogEndOffset())
			}
			if wake, ok := f.NextWake(); !ok || !wake.Equal(t0.Add(cfg.FetchBackoff)) {
				t.Fatalf("wake %v %v, want after FetchBackoff", wake, ok)
			}
			if req := f.BuildRequest(t0.Add(cfg.FetchBackoff - time.Millisecond)); req != nil {
				t.Fatalf("fetched during the backoff: %+v", req)
			}
			req := f.BuildRequest(t0.Add(cfg.FetchBackoff))
			if _, ok := hasPartition(req, tpA); !ok {
				t.Fatal("not fetching after the backoff")
			}
			res = f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, t0.Add(cfg.FetchBackoff))
			if len(res.RemoteRestarts) != 1 {
				t.Fatalf("not parked again: %+v", res)
			}
		})
	}
}

// Without RemoteRestart the partition backs off; after a restart, the
// same answer at the restart point (our metadata lags the leader's) backs
// off once before asking the store again.
func TestFollowerRemoteRestartBackoffCases(t *testing.T) {
	f := NewFollower(DefaultConfig(), 2, 1)
	la := logWith(0)
	f.AddPartition(tpA, 5, la)
	res := f.HandleResponse(f.BuildRequest(t0), &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, t0)
	if len(res.RemoteRestarts) != 0 || len(res.Delayed) != 1 {
		t.Fatalf("without RemoteRestart: %+v", res)
	}

	cfg := remoteCfg(t)
	f = NewFollower(cfg, 2, 1)
	f.AddPartition(tpA, 5, la)
	res = f.HandleResponse(f.BuildRequest(t0), &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, t0)
	if ok, err := f.OnRemoteRestart(res.RemoteRestarts[0], RemoteRestartResult{Offset: 50}, t0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	res = f.HandleResponse(f.BuildRequest(t0), &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, t0)
	if len(res.RemoteRestarts) != 0 || len(res.Delayed) != 1 {
		t.Fatalf("same answer at the restart point: %+v", res)
	}
	now := t0.Add(cfg.FetchBackoff)
	res = f.HandleResponse(f.BuildRequest(now), &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}, now)
	if len(res.RemoteRestarts) != 1 {
		t.Fatalf("not parked after the backoff: %+v", res)
	}
}

// The Fetcher runs RemoteRestart off its loop: while it blocks, the other
// partition's fetches go on; its result restarts the log under the
// fetcher's lock and the next request carries the partition from the
// restart point at once (the long poll in flight is interrupted). The
// call has a deadline; Run waits for it on shutdown.
func TestFetcherRemoteRestartDoesNotBlockOthers(t *testing.T) {
	cfg := DefaultConfig()
	type call struct {
		topic    string
		deadline bool
	}
	calls := make(chan call, 4)
	release := make(chan struct{})
	cfg.RemoteRestart = func(ctx context.Context, topic string, partition int32) (int64, []byte, []epochcache.Entry, error) {
		_, ok := ctx.Deadline()
		calls <- call{topic, ok}
		select {
		case <-release:
			return 100, []byte("snap"), remoteHistory, nil
		case <-ctx.Done():
			return 0, nil, nil, ctx.Err()
		}
	}
	client := &scriptClient{reqs: make(chan *FetchRequest), resps: make(chan scriptReply)}
	x := NewFetcher(cfg, 2, 1, client, newFakeClock())
	la, lb := logWith(0, 0), logWith(0)
	la.autoFlush, lb.autoFlush = true, true
	x.AddPartition(tpA, 5, la)
	x.AddPartition(tpB, 5, lb)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); x.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	recv := func(what string) *FetchRequest {
		t.Helper()
		select {
		case r := <-client.reqs:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	reply := func(ps ...FetchPartitionResponse) {
		t.Helper()
		select {
		case client.resps <- scriptReply{resp: &FetchResponse{Partitions: ps}}:
		case <-time.After(10 * time.Second):
			t.Fatal("fetcher did not take the reply")
		}
	}
	req := recv("first fetch")
	if len(req.Partitions) != 2 {
		t.Fatalf("first fetch %+v", req.Partitions)
	}
	reply(moved(tpA), FetchPartitionResponse{TopicPartition: tpB, HighWatermark: 2, Records: appendBatch(nil, 1, 5, 11)})
	select {
	case c := <-calls:
		if c.topic != tpA.Topic || !c.deadline {
			t.Fatalf("RemoteRestart call %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RemoteRestart not called")
	}
	// RemoteRestart is blocked; b goes on fetching.
	for i := range 3 {
		req = recv("fetch while a is parked")
		if _, ok := hasPartition(req, tpA); ok || len(req.Partitions) != 1 {
			t.Fatalf("fetch %d while parked: %+v", i, req.Partitions)
		}
		off := lb.LogEndOffset()
		reply(FetchPartitionResponse{TopicPartition: tpB, HighWatermark: off + 1, Records: appendBatch(nil, off, 5, uint64(off))})
	}
	if st := x.Stats(); st.RemoteRestarting != 1 || st.RemoteRestarts != 0 {
		t.Fatalf("stats while parked %+v", st)
	}
	req = recv("long poll of b")
	close(release)
	// The poll in flight lacks a: it is interrupted, and a request with
	// a from the restart point follows.
	req = recv("fetch after the restart")
	pa, ok := hasPartition(req, tpA)
	if !ok || pa.FetchOffset != 100 || pa.LastFetchedEpoch != 4 {
		t.Fatalf("fetch after restart %+v", req.Partitions)
	}
	if st := x.Stats(); st.RemoteRestarts != 1 || st.RemoteRestarting != 0 || st.Interrupted != 1 {
		t.Fatalf("stats after restart %+v", st)
	}
	if la.start != 100 || la.hw != 100 || lb.LogEndOffset() != 5 {
		t.Fatalf("a [%d, %d) hw %d; b end %d", la.start, la.LogEndOffset(), la.hw, lb.LogEndOffset())
	}
}

// Shutdown while a RemoteRestart runs: the call's ctx ends, Run waits for
// it, and the log is left alone even when the call returns a result.
func TestFetcherRemoteRestartShutdown(t *testing.T) {
	cfg := DefaultConfig()
	started := make(chan struct{})
	cfg.RemoteRestart = func(ctx context.Context, topic string, partition int32) (int64, []byte, []epochcache.Entry, error) {
		close(started)
		<-ctx.Done()
		return 100, nil, nil, nil // a result despite the cancellation
	}
	client := &scriptClient{reqs: make(chan *FetchRequest), resps: make(chan scriptReply)}
	x := NewFetcher(cfg, 2, 1, client, newFakeClock())
	la := logWith(0, 0)
	x.AddPartition(tpA, 5, la)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { x.Run(ctx); close(stopped) }()
	<-client.reqs
	client.resps <- scriptReply{resp: &FetchResponse{Partitions: []FetchPartitionResponse{moved(tpA)}}}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("RemoteRestart not called")
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if la.start != 0 || la.LogEndOffset() != 2 {
		t.Fatalf("log restarted during shutdown: [%d, %d)", la.start, la.LogEndOffset())
	}
}

func TestRemoteRestartTimeoutConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil || cfg.remoteRestartTimeout() != DefaultRemoteRestartTimeout {
		t.Fatalf("default: %v, timeout %v", err, cfg.remoteRestartTimeout())
	}
	cfg.RemoteRestartTimeout = 3 * time.Second
	if err := cfg.Validate(); err != nil || cfg.remoteRestartTimeout() != 3*time.Second {
		t.Fatalf("3s: %v, timeout %v", err, cfg.remoteRestartTimeout())
	}
	cfg.RemoteRestartTimeout = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative RemoteRestartTimeout accepted")
	}
}
