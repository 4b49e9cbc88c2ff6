package replication

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

var tpA, tpB = TopicPartition{Topic: "a"}, TopicPartition{Topic: "b", Partition: 1}

func logWith(epochs ...int32) *memLog {
	l := newMemLog()
	for i, e := range epochs {
		b := appendBatch(nil, int64(i), e, uint64(i))
		if _, err := l.AppendReplicated(b); err != nil {
			panic(err)
		}
	}
	l.flush()
	return l
}

func TestFollowerBatchesPartitions(t *testing.T) {
	f := NewFollower(DefaultConfig(), 2, 1)
	la, lb := logWith(0, 0, 3), logWith()
	f.AddPartition(tpA, 3, la)
	f.AddPartition(tpB, 3, lb)
	req := f.BuildRequest(t0)
	if req == nil || len(req.Partitions) != 2 || req.ReplicaID != 2 {
		t.Fatalf("request %+v", req)
	}
	for _, p := range req.Partitions {
		switch p.TopicPartition {
		case tpA:
			if p.FetchOffset != 3 || p.LastFetchedEpoch != 3 || p.CurrentLeaderEpoch != 3 {
				t.Fatalf("a: %+v", p)
			}
		case tpB:
			if p.FetchOffset != 0 || p.LastFetchedEpoch != NoEpoch {
				t.Fatalf("b: %+v", p)
			}
		}
	}
	resp := &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 9, Records: appendBatch(appendBatch(nil, 3, 3, 30), 4, 3, 40)},
		{TopicPartition: tpB, HighWatermark: 0},
	}}
	res := f.HandleResponse(req, resp, t0)
	if len(res.Appended) != 1 || la.LogEndOffset() != 5 || la.hw != 5 {
		t.Fatalf("res %+v leo %d hw %d", res, la.LogEndOffset(), la.hw)
	}
	// Unflushed: a is left out, so its fetch offset stays a durable one.
	req = f.BuildRequest(t0)
	if len(req.Partitions) != 1 || req.Partitions[0].TopicPartition != tpB {
		t.Fatalf("request while a is unflushed: %+v", req)
	}
	// The same response again is stale (a's log end moved): ignored.
	if res := f.HandleResponse(&FetchRequest{Partitions: []FetchPartition{{TopicPartition: tpA, CurrentLeaderEpoch: 3, FetchOffset: 3}}}, resp, t0); len(res.Appended) != 0 {
		t.Fatal("stale response applied")
	}
}

func TestFollowerTruncatesByEpoch(t *testing.T) {
	// KIP-101: we have epochs 1,1,2,2,2; the new leader has epoch 2 only
	// up to offset 3. Truncating to the HW (say 1) would be wrong.
	log := logWith(1, 1, 2, 2, 2)
	log.hw = 1
	f := NewFollower(DefaultConfig(), 2, 3)
	f.AddPartition(tpA, 4, log)
	req := f.BuildRequest(t0)
	res := f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 3, DivergingEpoch: &EpochEndOffset{Epoch: 2, EndOffset: 3}},
	}}, t0)
	if len(res.Truncated) != 1 || log.LogEndOffset() != 3 || log.hw != 3 {
		t.Fatalf("leo %d hw %d", log.LogEndOffset(), log.hw)
	}
	// Leader never had our epoch: first truncate to where our epoch
	// before it ends, then ask again.
	log = logWith(1, 1, 3, 3)
	off, complete := TruncationOffset(log, EpochEndOffset{Epoch: 2, EndOffset: 5})
	if off != 2 || complete {
		t.Fatalf("got %d %v, want 2 incomplete", off, complete)
	}
}

func TestFollowerErrors(t *testing.T) {
	log := logWith(0, 0)
	cfg := DefaultConfig()
	f := NewFollower(cfg, 2, 1)
	f.AddPartition(tpA, 1, log)
	// replyAt answers a request built once any backoff is over at now.
	replyAt := func(now time.Time, r FetchPartitionResponse) HandleResult {
		req := f.BuildRequest(now.Add(time.Hour))
		if req == nil {
			t.Fatal("nothing to fetch")
		}
		r.TopicPartition = tpA
		return f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{r}}, now)
	}
	reply := func(r FetchPartitionResponse) HandleResult { return replyAt(t0, r) }
	if res := reply(FetchPartitionResponse{Err: ErrNotLeaderOrFollower}); len(res.Delayed) != 1 {
		t.Fatal("not leader: no backoff")
	}
	if f.BuildRequest(t0) != nil {
		t.Fatal("fetched during backoff")
	}
	// Metadata lag (a topic or leader a moment old): retried after
	// MetadataLagBackoff, or an eighth of how long the errors have lasted
	// when that is longer, capped at FetchBackoff; a good answer starts
	// over.
	wantWake := func(what string, want time.Time) {
		t.Helper()
		if w, ok := f.NextWake(); !ok || !w.Equal(want) {
			t.Fatalf("%s: wake %v %v, want %v", what, w, ok, want)
		}
	}
	wantWake("first lag error", t0.Add(cfg.MetadataLagBackoff))
	for i := range 20 {
		// Errors younger than 8 MetadataLagBackoffs: retried after it.
		at := t0.Add(time.Duration(i) * time.Millisecond)
		replyAt(at, FetchPartitionResponse{Err: ErrUnknownTopicOrPartition})
		wantWake("young lag error", at.Add(cfg.MetadataLagBackoff))
	}
	at := t0.Add(400 * time.Millisecond)
	replyAt(at, FetchPartitionResponse{Err: ErrUnknownLeaderEpoch})
	wantWake("lag of 400ms", at.Add(50*time.Millisecond))
	at = t0.Add(time.Minute)
	replyAt(at, FetchPartitionResponse{Err: ErrUnknownLeaderEpoch})
	wantWake("lag of a minute", at.Add(cfg.FetchBackoff))
	replyAt(at, FetchPartitionResponse{HighWatermark: 2})
	at = at.Add(time.Minute)
	replyAt(at, FetchPartitionResponse{Err: ErrNotLeaderOrFollower})
	wantWake("lag error after a good answer", at.Add(cfg.MetadataLagBackoff))
	// Other errors back off the full FetchBackoff.
	reply(FetchPartitionResponse{Err: ErrStorage})
	if w, _ := f.NextWake(); !w.Equal(t0.Add(cfg.FetchBackoff)) {
		t.Fatalf("storage error: wake %v, want %v", w, t0.Add(cfg.FetchBackoff))
	}
	if res := reply(FetchPartitionResponse{Err: ErrFencedLeaderEpoch}); len(res.Fenced) != 1 {
		t.Fatal("fenced")
	}
	if f.BuildRequest(t0.Add(time.Hour)) != nil {
		t.Fatal("fetched while fenced")
	}
	f.AddPartition(tpA, 2, log) // metadata with a new epoch
	// The leader's log start moved past us: restart there.
	if res := reply(FetchPartitionResponse{Err: ErrOffsetOutOfRange, LogStartOffset: 50, HighWatermark: 60}); len(res.Truncated) != 1 || log.start != 50 || log.LogEndOffset() != 50 {
		t.Fatalf("out of range low: start %d leo %d", log.start, log.LogEndOffset())
	}
}

// scriptClient answers Fetch calls from the test, in lockstep.
type scriptClient struct {
	reqs  chan *FetchRequest
	resps chan scriptReply
}

type scriptReply struct {
	resp *FetchResponse
	err  error
}

func (c *scriptClient) Fetch(ctx context.Context, leader int32, req *FetchRequest) (*FetchResponse, error) {
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-c.resps:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestFetcherBacksOffAndAppends(t *testing.T) {
	cfg := DefaultConfig()
	clock := newFakeClock()
	client := &scriptClient{reqs: make(chan *FetchRequest), resps: make(chan scriptReply)}
	x := NewFetcher(cfg, 2, 1, client, clock)
	log := logWith(0)
	log.autoFlush = true
	x.AddPartition(tpA, 1, log)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { x.Run(ctx); close(stopped) }()

	req := <-client.reqs
	client.resps <- scriptReply{err: errors.New("connection refused")}
	// The fetcher now sleeps for exactly the backoff (a spurious wake-up
	// may make it go back to sleep for the same deadline).
	at := <-clock.registered
	if got := at.Sub(t0); got != cfg.FetchBackoff {
		t.Fatalf("backoff %v, want %v", got, cfg.FetchBackoff)
	}
	clock.AdvanceTo(at.Add(-time.Millisecond))
	select {
	case <-client.reqs:
		t.Fatal("fetched before the backoff elapsed")
	default:
	}
	clock.AdvanceTo(at)
	// A spurious wake-up between the fetcher's look at the clock and its
	// next sleep registers that sleep after this advance: move the clock
	// on to it rather than wait for a request that then never comes.
	for req = nil; req == nil; {
		select {
		case req = <-client.reqs:
		case later := <-clock.registered:
			clock.AdvanceTo(later)
		}
	}
	if len(req.Partitions) != 1 || req.Partitions[0].FetchOffset != 1 {
		t.Fatalf("request %+v", req)
	}
	client.resps <- scriptReply{resp: &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 2, Records: appendBatch(nil, 1, 1, 7)},
	}}}
	// The next request (at once, no sleep) proves the durable append.
	select {
	case next := <-client.reqs:
		if next.Partitions[0].FetchOffset != 2 || next.Partitions[0].LastFetchedEpoch != 1 {
			t.Fatalf("next request %+v", next.Partitions[0])
		}
	case at := <-clock.registered:
		if !at.Equal(t0.Add(cfg.FetchBackoff)) {
			t.Fatalf("unexpected sleep until %v", at)
		}
		// A stale timer registration from the backoff: fine, keep going.
		next := <-client.reqs
		if next.Partitions[0].FetchOffset != 2 {
			t.Fatalf("next request %+v", next.Partitions[0])
		}
	}
	cancel()
	<-stopped
	if log.LogEndOffset() != 2 || log.LatestEpoch() != 1 {
		t.Fatalf("leo %d epoch %d", log.LogEndOffset(), log.LatestEpoch())
	}
}

// A request built while a partition backs off leaves it out, and its long
// poll ends when that backoff does (rounded up to the millisecond the
// leader counts in), so the partition is retried on time: a follower that
// heard of a new topic before its leader did got UNKNOWN_TOPIC_OR_PARTITION
// and was retried only when the next long poll of its other partitions
// ended, FetchMaxWait later.
func TestFollowerLongPollEndsWithBackoff(t *testing.T) {
	cfg := DefaultConfig()
	f := NewFollower(cfg, 2, 1)
	f.AddPartition(tpA, 1, logWith(0))
	f.AddPartition(tpB, 1, logWith())
	req := f.BuildRequest(t0)
	if len(req.Partitions) != 2 || req.MaxWait != cfg.FetchMaxWait {
		t.Fatalf("first request: %d partitions, wait %v", len(req.Partitions), req.MaxWait)
	}
	f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 1},
		{TopicPartition: tpB, Err: ErrUnknownTopicOrPartition, HighWatermark: -1},
	}}, t0)
	now := t0.Add(1500 * time.Microsecond)
	req = f.BuildRequest(now)
	if len(req.Partitions) != 1 || req.Partitions[0].TopicPartition != tpA {
		t.Fatalf("request during b's backoff %+v", req.Partitions)
	}
	if want := 4 * time.Millisecond; req.MaxWait != want { // 3.5 ms left, rounded up
		t.Fatalf("long poll during b's backoff %v, want %v", req.MaxWait, want)
	}
	// Once b is ready again it is fetched, and the poll is a full one.
	req = f.BuildRequest(t0.Add(cfg.MetadataLagBackoff))
	if len(req.Partitions) != 2 || req.MaxWait != cfg.FetchMaxWait {
		t.Fatalf("request after b's backoff: %d partitions, wait %v", len(req.Partitions), req.MaxWait)
	}
	// A backoff longer than the long poll leaves it alone.
	f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 1},
		{TopicPartition: tpB, Err: ErrStorage, HighWatermark: -1},
	}}, t0)
	if req := f.BuildRequest(t0); len(req.Partitions) != 1 || req.MaxWait != cfg.FetchMaxWait {
		t.Fatalf("request during a FetchBackoff: %d partitions, wait %v", len(req.Partitions), req.MaxWait)
	}
}

// The fetcher side of TestFollowerLongPollEndsWithBackoff: after a
// metadata-lag error on one partition the request for the others carries
// a long poll that ends with the partition's backoff, and the request
// after it carries the partition again, without the fetcher sleeping.
func TestFetcherRetriesLaggingPartitionDuringLongPoll(t *testing.T) {
	cfg := DefaultConfig()
	clock := newFakeClock()
	client := &scriptClient{reqs: make(chan *FetchRequest), resps: make(chan scriptReply)}
	x := NewFetcher(cfg, 2, 1, client, clock)
	x.AddPartition(tpA, 1, logWith(0))
	x.AddPartition(tpB, 1, logWith())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { x.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	if req := <-client.reqs; len(req.Partitions) != 2 {
		t.Fatalf("first request %+v", req.Partitions)
	}
	client.resps <- scriptReply{resp: &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 1},
		{TopicPartition: tpB, Err: ErrUnknownTopicOrPartition, HighWatermark: -1},
	}}}
	req := <-client.reqs
	if len(req.Partitions) != 1 || req.MaxWait != cfg.MetadataLagBackoff {
		t.Fatalf("request while b backs off: %+v, wait %v; want a, wait %v", req.Partitions, req.MaxWait, cfg.MetadataLagBackoff)
	}
	// The leader answers when that poll ends.
	clock.AdvanceTo(t0.Add(req.MaxWait))
	client.resps <- scriptReply{resp: &FetchResponse{Partitions: []FetchPartitionResponse{{TopicPartition: tpA, HighWatermark: 1}}}}
	req = <-client.reqs
	if len(req.Partitions) != 2 || req.MaxWait != cfg.FetchMaxWait {
		t.Fatalf("request after b's backoff: %+v, wait %v", req.Partitions, req.MaxWait)
	}
	select {
	case at := <-clock.registered:
		t.Fatalf("the fetcher slept until %v", at)
	default:
	}
}

// pollClient holds every fetch like a leader long poll with no data: it
// answers only when the fetcher cancels it, reporting the cancellation
// on cancelled before returning.
type pollClient struct {
	reqs      chan *FetchRequest
	cancelled chan *FetchRequest
}

func (c *pollClient) Fetch(ctx context.Context, leader int32, req *FetchRequest) (*FetchResponse, error) {
	c.reqs <- req
	<-ctx.Done()
	c.cancelled <- req
	return nil, ctx.Err()
}

// A partition added while a fetch long-polls is fetched at once: the
// poll is cancelled and a request carrying it is sent without waiting for
// FetchMaxWait (the fake clock never moves) and without the error
// backoff; adds landing before the cancelled fetch returns share one
// interruption.
func TestFetcherAddPartitionInterruptsLongPoll(t *testing.T) {
	clock := newFakeClock()
	client := &pollClient{reqs: make(chan *FetchRequest, 4), cancelled: make(chan *FetchRequest)}
	x := NewFetcher(DefaultConfig(), 2, 1, client, clock)
	la := logWith()
	x.AddPartition(tpA, 1, la)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { x.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-client.cancelled; <-stopped }()

	recv := func(ch chan *FetchRequest, what string) *FetchRequest {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	first := recv(client.reqs, "first fetch")
	if len(first.Partitions) != 1 {
		t.Fatalf("first fetch %+v", first.Partitions)
	}
	tpC := TopicPartition{Topic: "c"}
	x.AddPartition(tpB, 1, logWith())
	x.AddPartition(tpC, 1, logWith())
	x.AddPartition(tpA, 1, la) // unchanged: no interruption
	if got := recv(client.cancelled, "cancellation of the long poll"); got != first {
		t.Fatal("another request was cancelled")
	}
	second := recv(client.reqs, "fetch carrying the new partitions")
	if len(second.Partitions) != 3 {
		t.Fatalf("second fetch carries %d partitions, want 3: %+v", len(second.Partitions), second.Partitions)
	}
	if st := x.Stats(); st.Requests != 2 || st.Interrupted != 1 {
		t.Fatalf("stats %+v, want 2 requests, 1 interrupted", st)
	}
	select {
	case at := <-clock.registered:
		t.Fatalf("backed off until %v after an interruption", at)
	default:
	}
}

// clampLog is a memLog whose high watermark, like the engine's, never
// passes what it has written (its durable end here). Its appends are
// written when the fetcher waits for them (flushPending).
type clampLog struct{ *memLog }

type flushPending struct{ l *memLog }

func (p flushPending) Done() <-chan struct{} { p.l.flush(); return closedCh }
func (p flushPending) Err() error            { return nil }

func (l clampLog) AppendReplicated(b []byte) (Pending, error) {
	if _, err := l.memLog.AppendReplicated(b); err != nil {
		return nil, err
	}
	return flushPending{l.memLog}, nil
}

func (l clampLog) SetHighWatermark(hw int64) { l.memLog.SetHighWatermark(min(hw, l.DurableEnd())) }

// TestFetcherSetsHWOnceAppendIsWritten: the leader's HW that came with
// records applies once they are written, not only as far as the log had
// written when the answer arrived. A follower that fetched its last
// catch-up chunk and was made leader before its next answer (a
// reassignment completes in the apply that admits it to the ISR) took
// over with a HW a whole chunk behind.
func TestFetcherSetsHWOnceAppendIsWritten(t *testing.T) {
	cfg := DefaultConfig()
	client := &scriptClient{reqs: make(chan *FetchRequest), resps: make(chan scriptReply)}
	x := NewFetcher(cfg, 2, 1, client, newFakeClock())
	log := clampLog{logWith(0)}
	x.AddPartition(tpA, 1, log)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { x.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	<-client.reqs
	var b []byte
	for off := int64(1); off < 4; off++ {
		b = appendBatch(b, off, 1, uint64(off))
	}
	client.resps <- scriptReply{resp: &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 4, Records: b},
	}}}
	next := <-client.reqs // built after the append was written and handled
	if next.Partitions[0].FetchOffset != 4 {
		t.Fatalf("next request %+v", next.Partitions[0])
	}
	if hw := log.HighWatermark(); hw != 4 {
		t.Fatalf("follower HW %d after its append of [1, 4) was written, leader's 4", hw)
	}
}

// Answers are matched to the request's partitions whatever their order,
// each handled once (a repeated answer is ignored), by the scan for a few
// partitions and by the map past maxScannedSent; a partition not asked
// for is ignored.
func TestFollowerMatchesAnswersOutOfOrder(t *testing.T) {
	// Against the request the follower built (each partition's place
	// known), and against a reordered copy (scanned for).
	for _, c := range []struct {
		n        int
		reversed bool
	}{{3, false}, {3, true}, {40, false}, {40, true}} {
		n := c.n
		f := NewFollower(DefaultConfig(), 2, 1)
		logs := make([]*memLog, n)
		for i := range n {
			logs[i] = logWith()
			f.AddPartition(TopicPartition{Topic: "t", Partition: int32(i)}, 1, logs[i])
		}
		var req FetchRequest
		if f.BuildRequestInto(t0, &req) != &req || len(req.Partitions) != n {
			t.Fatalf("%d partitions: request %+v", n, req)
		}
		if c.reversed {
			slices.Reverse(req.Partitions)
		}
		resp := &FetchResponse{Partitions: []FetchPartitionResponse{{TopicPartition: TopicPartition{Topic: "t", Partition: int32(n)}, HighWatermark: 1, Records: appendBatch(nil, 0, 1, 9)}}}
		for i := n - 1; i >= 0; i-- { // reversed
			resp.Partitions = append(resp.Partitions, FetchPartitionResponse{TopicPartition: TopicPartition{Topic: "t", Partition: int32(i)}, HighWatermark: 1, Records: appendBatch(nil, 0, 1, uint64(i))})
		}
		resp.Partitions = append(resp.Partitions, resp.Partitions[1]) // partition n-1 again
		res := f.HandleResponse(&req, resp, t0)
		if len(res.Appended) != n {
			t.Fatalf("%d partitions: %d appended", n, len(res.Appended))
		}
		for i, l := range logs {
			if l.LogEndOffset() != 1 {
				t.Fatalf("%d partitions: partition %d at %d, want 1 (once)", n, i, l.LogEndOffset())
			}
		}
	}
}

// BuildRequestInto reuses the request's partition slice round to round.
func TestFollowerBuildRequestIntoReuses(t *testing.T) {
	f := NewFollower(DefaultConfig(), 2, 1)
	f.AddPartition(tpA, 3, logWith(0))
	f.AddPartition(tpB, 3, logWith())
	var req FetchRequest
	f.BuildRequestInto(t0, &req)
	first := &req.Partitions[0]
	f.BuildRequestInto(t0, &req)
	if len(req.Partitions) != 2 || &req.Partitions[0] != first {
		t.Fatalf("second round: %d partitions, slice reused %v", len(req.Partitions), &req.Partitions[0] == first)
	}
	if req.ReplicaID != 2 || req.MaxWait != DefaultConfig().FetchMaxWait {
		t.Fatalf("second round's fields: %+v", req)
	}
}

// HandleResponse's Appended list is reused from round to round (the
// fetcher is done with it before the next round).
func TestFollowerHandleResponseReusesAppended(t *testing.T) {
	f := NewFollower(DefaultConfig(), 2, 1)
	la := logWith(0)
	la.autoFlush = true
	f.AddPartition(tpA, 3, la)
	var first *AppendedPartition
	for round := range 3 {
		req := f.BuildRequest(t0)
		if req == nil || len(req.Partitions) != 1 {
			t.Fatalf("round %d: request %+v", round, req)
		}
		off := req.Partitions[0].FetchOffset
		resp := &FetchResponse{Partitions: []FetchPartitionResponse{
			{TopicPartition: tpA, HighWatermark: off + 1, Records: appendBatch(nil, off, 3, uint64(round))},
		}}
		res := f.HandleResponse(req, resp, t0)
		if len(res.Appended) != 1 || la.LogEndOffset() != off+1 {
			t.Fatalf("round %d: res %+v leo %d", round, res, la.LogEndOffset())
		}
		if first == nil {
			first = &res.Appended[0]
		} else if &res.Appended[0] != first {
			t.Fatalf("round %d: a new Appended list", round)
		}
		f.OnAppendDone(res.Appended[0], t0) // memLog's appends are durable at once
	}
}
