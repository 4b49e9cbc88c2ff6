package replication

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// FetchClient sends replica fetches. netpath/peer implements it with Kafka
// Fetch requests (replica id set, v12+ so LastFetchedEpoch and
// DivergingEpoch travel) and translates partition error codes into this
// package's errors. Fetch may block up to req.MaxWait plus network time;
// cancelling ctx ends it at once (the Fetcher does, to take in a new
// partition).
//
// The answer has one entry per partition of req with news (records, an
// error, a moved high watermark or log start); it may have one for each
// (a full fetch does), but under an incremental fetch session it has
// none for a quiet partition.
//
// Buffer ownership: Records may alias memory the client reuses for later
// responses. When FetchResponse.Release is set the caller calls it once,
// after every Pending of the appends it made from those Records has
// completed: Log.AppendReplicated's implementation owns the bytes it was
// given until its Pending completes (the engine may still be writing
// them) and must not keep them after. Release hands back the response as
// well: the caller must not touch it afterwards (the client fills it
// again for a later fetch).
type FetchClient interface {
	Fetch(ctx context.Context, leaderID int32, req *FetchRequest) (*FetchResponse, error)
}

// Fetcher runs a Follower against one leader broker in a goroutine (Run):
// build a request, send it, apply the answer, wait for the appends to be
// durable, repeat. Errors back partitions off by Config.FetchBackoff
// (MetadataLagBackoff, growing with the lag, where the leader only lags
// our metadata). AddPartition and RemovePartition may be called from any
// goroutine.
//
// A partition added while a request long-polls at the leader (up to
// FetchMaxWait) is not in that request; AddPartition cancels it and Run
// sends a new one at once, so a new or newly assigned partition starts
// replicating without waiting for the poll to end. Adds that arrive
// while one cancellation is pending share it. A partition backing off
// is not in the requests sent meanwhile either; their long poll ends
// when its backoff does (Follower.BuildRequest), so it is retried on
// time.
type Fetcher struct {
	client FetchClient
	clock  Clock
	wake   chan struct{}

	mu sync.Mutex // guards the fields below; held while a response is applied
	f  *Follower
	// inflight cancels the request being sent (nil when none), and
	// interrupted says AddPartition already did.
	inflight    context.CancelFunc
	interrupted bool
	stats       FetcherStats
	// restarts tracks the RemoteRestart goroutines; Run waits for them.
	restarts sync.WaitGroup
	// req is the request of the round in flight, reused round to round
	// (Run's own).
	req FetchRequest
}

// FetcherStats counts a fetcher's requests (metrics, tests).
type FetcherStats struct {
	// Requests is the number of fetches sent; Interrupted those cancelled
	// by AddPartition to take in a new partition.
	Requests, Interrupted uint64
	// RemoteRestarts counts partitions restarted from the remote tier
	// (OFFSET_MOVED_TO_TIERED_STORAGE); RemoteRestartErrors the
	// restart attempts that failed and backed off. RemoteRestarting is
	// the partitions parked now.
	RemoteRestarts, RemoteRestartErrors uint64
	RemoteRestarting                    int
}

// NewFetcher returns a fetcher of leaderID; start it with Run.
func NewFetcher(cfg Config, localID, leaderID int32, client FetchClient, clock Clock) *Fetcher {
	return &Fetcher{client: client, clock: clock, wake: make(chan struct{}, 1), f: NewFollower(cfg, localID, leaderID)}
}

func (x *Fetcher) nudge() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// AddPartition starts following tp in leaderEpoch (see
// Follower.AddPartition), interrupting a request in flight that lacks it.
func (x *Fetcher) AddPartition(tp TopicPartition, leaderEpoch int32, log Log) {
	x.mu.Lock()
	if x.f.AddPartition(tp, leaderEpoch, log) {
		x.interruptLocked()
	}
	x.mu.Unlock()
	x.nudge()
}

// interruptLocked cancels the request in flight, which lacks a partition
// that can fetch now. x.mu must be held.
func (x *Fetcher) interruptLocked() {
	if x.inflight != nil && !x.interrupted {
		x.interrupted = true
		x.stats.Interrupted++
		x.inflight()
	}
}

// RemovePartition stops following tp. It waits for a response being
// applied, so when it returns this fetcher will not touch tp's log again
// and another fetcher (the new leader's) may take it over. A request in
// flight is left alone: its answer for tp is dropped when applied.
func (x *Fetcher) RemovePartition(tp TopicPartition) {
	x.mu.Lock()
	x.f.RemovePartition(tp)
	x.mu.Unlock()
}

// Len is the number of partitions followed.
func (x *Fetcher) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.f.Len()
}

// Stats returns the request counters.
func (x *Fetcher) Stats() FetcherStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.stats
	for _, p := range x.f.parts {
		if p.status == statusRemote {
			st.RemoteRestarting++
		}
	}
	return st
}

// Run fetches until ctx ends, then waits for its RemoteRestart calls
// (bounded by their deadline; ctx's end cancels them).
func (x *Fetcher) Run(ctx context.Context) {
	defer x.restarts.Wait()
	// rctx is the requests' context, which AddPartition's interruption
	// cancels. It serves round after round until that happens: a context
	// per round cost an allocation and a registration with ctx per fetch,
	// and the client's cancellation hook on the connection could not
	// outlive a round either.
	var rctx context.Context
	var cancel context.CancelFunc
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	for ctx.Err() == nil {
		x.mu.Lock()
		now := x.clock.Now()
		req := x.f.BuildRequestInto(now, &x.req)
		var wakeAt time.Time
		var delayed bool
		if req == nil {
			wakeAt, delayed = x.f.NextWake() // a look at every partition: only when idle
		}
		leader := x.f.Leader()
		if req != nil {
			if rctx == nil {
				rctx, cancel = context.WithCancel(ctx)
			}
			x.inflight, x.interrupted = cancel, false
			x.stats.Requests++
		}
		x.mu.Unlock()
		if req == nil {
			var timer <-chan time.Time
			if delayed {
				// From the now the request was built at: a clock read
				// later could pass the wake time and sleep for nothing.
				timer = x.clock.After(wakeAt.Sub(now))
			}
			select {
			case <-ctx.Done():
			case <-x.wake:
			case <-timer:
			}
			continue
		}
		resp, err := x.client.Fetch(rctx, leader, req)
		x.mu.Lock()
		interrupted := x.interrupted
		x.inflight, x.interrupted = nil, false
		x.mu.Unlock()
		if interrupted {
			cancel() // cancelled already; the next round gets a new one
			rctx, cancel = nil, nil
		}
		if err != nil {
			if interrupted && ctx.Err() == nil {
				// Cancelled to take in a new partition: not the
				// leader's fault, so resend at once without backoff.
				continue
			}
			x.mu.Lock()
			x.f.OnRequestError(req, err, x.clock.Now())
			x.mu.Unlock()
			continue
		}
		x.mu.Lock()
		res := x.f.HandleResponse(req, resp, x.clock.Now())
		x.mu.Unlock()
		for _, job := range res.RemoteRestarts {
			x.startRemoteRestart(ctx, job)
		}
		// The partitions just appended are left out of requests until
		// durable anyway; waiting here turns the next request into one
		// that carries all of them again, sent as soon as the last
		// append's round is durable.
		for _, a := range res.Appended {
			select {
			case <-ctx.Done():
				return // the buffer is not handed back: appends may still hold it
			case <-a.Pending.Done():
			}
			x.mu.Lock()
			if err := a.Pending.Err(); err != nil {
				x.f.OnStorageError(a.TopicPartition, err, x.clock.Now())
			} else {
				x.f.OnAppendDone(a, x.clock.Now())
			}
			x.mu.Unlock()
		}
		if resp.Release != nil {
			resp.Release()
		}
	}
}

// Fetchers keeps one running Fetcher per leader broker, created on first
// use, and moves partitions between them as leaders change.
type Fetchers struct {
	cfg     Config
	localID int32
	client  FetchClient
	clock   Clock
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	byLeader map[int32]*Fetcher
	leaderOf map[TopicPartition]int32
	throttle *FollowerThrottle
}

// SetThrottle gives every fetcher, present and future, the follower
// throttle ft (nil: none).
func (s *Fetchers) SetThrottle(ft *FollowerThrottle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = ft
	for _, f := range s.byLeader {
		f.mu.Lock()
		f.f.SetThrottle(ft)
		f.mu.Unlock()
	}
}

// NewFetchers returns an empty set; Close stops its goroutines.
func NewFetchers(cfg Config, localID int32, client FetchClient, clock Clock) *Fetchers {
	ctx, cancel := context.WithCancel(context.Background())
	return &Fetchers{cfg: cfg, localID: localID, client: client, clock: clock, ctx: ctx, cancel: cancel,
		byLeader: map[int32]*Fetcher{}, leaderOf: map[TopicPartition]int32{}}
}

// Follow makes this broker follow tp on leaderID in leaderEpoch: it stops
// fetching tp from any other leader first, so two fetchers never write
// one log.
func (s *Fetchers) Follow(tp TopicPartition, leaderID, leaderEpoch int32, log Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.leaderOf[tp]; ok && old != leaderID {
		s.removeLocked(tp)
	}
	f := s.byLeader[leaderID]
	if f == nil {
		f = NewFetcher(s.cfg, s.localID, leaderID, s.client, s.clock)
		f.f.SetThrottle(s.throttle)
		s.byLeader[leaderID] = f
		s.wg.Add(1)
		go func() { defer s.wg.Done(); f.Run(s.ctx) }()
	}
	s.leaderOf[tp] = leaderID
	f.AddPartition(tp, leaderEpoch, log)
}

// Unfollow stops fetching tp (we became its leader, or it was deleted).
func (s *Fetchers) Unfollow(tp TopicPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(tp)
}

// Leader returns the leader tp is fetched from, if it is.
func (s *Fetchers) Leader(tp TopicPartition) (int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.leaderOf[tp]
	return id, ok
}

// removeLocked: s.mu should be held.
func (s *Fetchers) removeLocked(tp TopicPartition) {
	leader, ok := s.leaderOf[tp]
	if !ok {
		return
	}
	delete(s.leaderOf, tp)
	s.byLeader[leader].RemovePartition(tp)
	// Idle fetchers are kept: leaders come back, and an idle one only
	// sleeps on its wake channel.
}

// Stats sums the request counters of every fetcher.
func (s *Fetchers) Stats() FetcherStats {
	s.mu.Lock()
	fs := make([]*Fetcher, 0, len(s.byLeader))
	for _, f := range s.byLeader {
		fs = append(fs, f)
	}
	s.mu.Unlock()
	var out FetcherStats
	for _, f := range fs {
		st := f.Stats()
		out.Requests += st.Requests
		out.Interrupted += st.Interrupted
		out.RemoteRestarts += st.RemoteRestarts
		out.RemoteRestartErrors += st.RemoteRestartErrors
		out.RemoteRestarting += st.RemoteRestarting
	}
	return out
}

// Close stops every fetcher and waits for them.
func (s *Fetchers) Close() {
	s.cancel()
	s.wg.Wait()
}

// startRemoteRestart runs Config.RemoteRestart for job in its own
// goroutine (object-store reads must not stall the other partitions'
// fetches) and applies the outcome under x.mu, as responses are, so
// RemovePartition's promise holds: once it returns, tp's log is not
// touched. A partition that can fetch again interrupts the long poll in
// flight, which lacks it.
func (x *Fetcher) startRemoteRestart(ctx context.Context, job RemoteRestartJob) {
	cfg := x.f.cfg
	x.restarts.Add(1)
	go func() {
		defer x.restarts.Done()
		rctx, cancel := context.WithTimeout(ctx, cfg.remoteRestartTimeout())
		var r RemoteRestartResult
		r.Offset, r.ProducerSnapshot, r.Epochs, r.Err = cfg.RemoteRestart(rctx, job.Topic, job.Partition)
		cancel()
		if ctx.Err() != nil {
			return // shutting down: leave the log alone
		}
		if r.Err != nil {
			r.Err = fmt.Errorf("restart point of %s-%d from the remote tier: %w", job.Topic, job.Partition, r.Err)
		}
		x.mu.Lock()
		restarted, err := x.f.OnRemoteRestart(job, r, x.clock.Now())
		switch {
		case restarted:
			x.stats.RemoteRestarts++
			x.interruptLocked()
		case err != nil:
			x.stats.RemoteRestartErrors++
		}
		x.mu.Unlock()
		x.nudge()
	}()
}
