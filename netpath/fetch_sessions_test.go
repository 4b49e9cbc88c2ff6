package netpath

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is a Fetch v12 request of topic's partitions at offsets
// (partition -> fetch offset), with a session id and epoch.
func sessionFetch(topic string, id, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MinBytes, req.MaxBytes = 12, 0, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p, off := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func forget(req *kmsg.FetchRequest, topic string, parts ...int32) {
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = topic, parts
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
}

// doFetch runs req through the fetch path and decodes the answer with
// kmsg; parts maps each returned partition to its record bytes.
func doFetch(t *testing.T, srv *Server, req *kmsg.FetchRequest) (*kmsg.FetchResponse, map[int32]int) {
	t.Helper()
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	resp := srv.fetch(req, time.Now().Add(wait), make(chan struct{}), nil, new(time.Duration))
	defer resp.releaseAll()
	var body []byte
	for _, p := range resp.parts {
		if p.file == nil {
			body = append(body, p.buf...)
			continue
		}
		b := make([]byte, p.file.Len())
		if _, err := p.file.ReadAt(b, p.file.Pos()); err != nil {
			t.Fatal(err)
		}
		body = append(body, b...)
	}
	kr := kmsg.NewPtrFetchResponse()
	kr.Version = req.Version
	if err := kr.ReadFrom(body); err != nil {
		t.Fatalf("decode: %v", err)
	}
	parts := map[int32]int{}
	for _, rt := range kr.Topics {
		for _, rp := range rt.Partitions {
			if _, dup := parts[rp.Partition]; dup {
				t.Fatalf("partition %d twice in one response", rp.Partition)
			}
			parts[rp.Partition] = len(rp.RecordBatches)
		}
	}
	return kr, parts
}

func appendTo(t *testing.T, eng *engine.Engine, topic string, p int32) {
	t.Helper()
	part, err := eng.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := part.Append(batchtest.Values("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
}

// The session rules, on one server (its start dominates the run time).
// The subtests run in order: each leaves no session behind but the
// last, and those that count sessions expect none from the others.
func TestFetchSessions(t *testing.T) {
	t.Parallel()
	srv, eng := clusterServer(t, nil, 4, "s", "f", "r")
	t.Run("epochs", func(t *testing.T) { testFetchSessionEpochs(t, srv, eng) })
	t.Run("forget", func(t *testing.T) { testFetchSessionForgetAndErrors(t, srv, eng) })
	t.Run("rotate", func(t *testing.T) { testFetchSessionRotatesUnderByteLimit(t, srv, eng) })
}

// The KIP-227 epoch rules and what incremental responses carry: a full
// fetch opens a session that lists everything; incremental fetches get
// only partitions with records (or other news); a replayed epoch, an
// unknown id and another fetcher's id are refused; epoch 0 on an old id
// replaces the session; FINAL closes it and is answered without one.
func testFetchSessionEpochs(t *testing.T, srv *Server, eng *engine.Engine) {
	all := map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}
	kr, parts := doFetch(t, srv, sessionFetch("s", 0, 0, all))
	if kr.ErrorCode != 0 || kr.SessionID == 0 || len(parts) != 4 {
		t.Fatalf("full fetch: error %d session %d partitions %v", kr.ErrorCode, kr.SessionID, parts)
	}
	id := kr.SessionID
	// Nothing changed: nothing listed.
	if kr, parts = doFetch(t, srv, sessionFetch("s", id, 1, nil)); kr.ErrorCode != 0 || kr.SessionID != id || len(parts) != 0 {
		t.Fatalf("idle incremental: error %d session %d partitions %v", kr.ErrorCode, kr.SessionID, parts)
	}
	// Records on partition 2 (not named in the request): only it comes
	// back, with them.
	appendTo(t, eng, "s", 2)
	if kr, parts = doFetch(t, srv, sessionFetch("s", id, 2, nil)); kr.ErrorCode != 0 || len(parts) != 1 || parts[2] == 0 {
		t.Fatalf("incremental after an append to 2: error %d partitions %v", kr.ErrorCode, parts)
	}
	// The fetcher moves partition 2 past the record: the HW it was told
	// is unchanged, so nothing comes back.
	if _, parts = doFetch(t, srv, sessionFetch("s", id, 3, map[int32]int64{2: 1})); len(parts) != 0 {
		t.Fatalf("incremental at the log end: partitions %v", parts)
	}
	for _, c := range []struct {
		name      string
		id, epoch int32
		replica   int32
		want      int16
	}{
		{"replayed epoch", id, 3, -1, kerr.InvalidFetchSessionEpoch.Code},
		{"future epoch", id, 9, -1, kerr.InvalidFetchSessionEpoch.Code},
		{"unknown id", id + 1, 4, -1, kerr.FetchSessionIDNotFound.Code},
		{"another fetcher", id, 4, 7, kerr.FetchSessionIDNotFound.Code},
	} {
		req := sessionFetch("s", c.id, c.epoch, nil)
		req.ReplicaID = c.replica
		if kr, _ := doFetch(t, srv, req); kr.ErrorCode != c.want || kr.SessionID != 0 {
			t.Errorf("%s: error %d session %d, want error %d", c.name, kr.ErrorCode, kr.SessionID, c.want)
		}
	}
	// The refusals did not disturb the session.
	if kr, _ = doFetch(t, srv, sessionFetch("s", id, 4, nil)); kr.ErrorCode != 0 {
		t.Fatalf("epoch 4 after refusals: error %d", kr.ErrorCode)
	}
	// Epoch 0 with the id: a new session replaces it.
	kr, parts = doFetch(t, srv, sessionFetch("s", id, 0, all))
	if kr.ErrorCode != 0 || kr.SessionID == 0 || kr.SessionID == id || len(parts) != 4 {
		t.Fatalf("re-open: error %d session %d (old %d) partitions %v", kr.ErrorCode, kr.SessionID, id, parts)
	}
	if kr, _ := doFetch(t, srv, sessionFetch("s", id, 5, nil)); kr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("replaced session still answers: error %d", kr.ErrorCode)
	}
	id = kr.SessionID
	// FINAL: closed, answered in full without a session.
	kr, parts = doFetch(t, srv, sessionFetch("s", id, -1, all))
	if kr.ErrorCode != 0 || kr.SessionID != 0 || len(parts) != 4 {
		t.Fatalf("final: error %d session %d partitions %v", kr.ErrorCode, kr.SessionID, parts)
	}
	if kr, _ := doFetch(t, srv, sessionFetch("s", id, 1, nil)); kr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session still answers: error %d", kr.ErrorCode)
	}
	if n, p := srv.sessions.stats(); n != 0 || p != 0 {
		t.Fatalf("%d sessions with %d partitions left", n, p)
	}
	// Pre-v7 and epoch -1 requests never open sessions (librdkafka).
	req := sessionFetch("s", 0, 0, all)
	req.Version = 6
	doFetch(t, srv, req)
	doFetch(t, srv, sessionFetch("s", 0, -1, all))
	if n, _ := srv.sessions.stats(); n != 0 {
		t.Fatalf("%d sessions opened by sessionless fetches", n)
	}
}

// Forgotten partitions leave the session: their records no longer come
// back until an incremental request names them again. Errors come back
// on every response.
func testFetchSessionForgetAndErrors(t *testing.T, srv *Server, eng *engine.Engine) {
	kr, _ := doFetch(t, srv, sessionFetch("f", 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}))
	id := kr.SessionID
	req := sessionFetch("f", id, 1, nil)
	forget(req, "f", 1, 2, 3)
	if kr, parts := doFetch(t, srv, req); kr.ErrorCode != 0 || len(parts) != 0 {
		t.Fatalf("forget: error %d partitions %v", kr.ErrorCode, parts)
	}
	if _, p := srv.sessions.stats(); p != 1 {
		t.Fatalf("session holds %d partitions after forgetting 3 of 4", p)
	}
	appendTo(t, eng, "f", 1)
	appendTo(t, eng, "f", 0)
	if _, parts := doFetch(t, srv, sessionFetch("f", id, 2, nil)); len(parts) != 1 || parts[0] == 0 {
		t.Fatalf("after forgetting 1: partitions %v", parts)
	}
	// Named again (with partition 0 moved past its record): back, with
	// its record.
	if _, parts := doFetch(t, srv, sessionFetch("f", id, 3, map[int32]int64{1: 0, 0: 1})); len(parts) != 1 || parts[1] == 0 {
		t.Fatalf("re-added partition 1: partitions %v", parts)
	}
	// A partition that does not exist answers its error every time.
	for epoch := int32(4); epoch < 6; epoch++ {
		kr, parts := doFetch(t, srv, sessionFetch("f", id, epoch, map[int32]int64{9: 0, 1: 1}))
		if len(kr.Topics) != 1 || len(parts) != 1 || kr.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("epoch %d: unknown partition answered %+v", epoch, kr.Topics)
		}
	}
}

// The cache is bounded: with every slot taken by sessions used within
// the eviction age, a new session only takes the slot of a strictly
// weaker one (fewer partitions, or a consumer's when a follower asks);
// once sessions are idle past the age the least recently used goes.
func TestFetchSessionEviction(t *testing.T) {
	t.Parallel()
	srv, _ := clusterServer(t, func(c *Config) { c.FetchSessionSlots = 2; c.FetchSessionEvictionAge = time.Hour }, 4, "e")
	open := func(replica int32, n int) int32 {
		offsets := map[int32]int64{}
		for p := range n {
			offsets[int32(p)] = 0
		}
		req := sessionFetch("e", 0, 0, offsets)
		req.ReplicaID = replica
		kr, _ := doFetch(t, srv, req)
		return kr.SessionID
	}
	alive := func(id, epoch, replica int32) bool {
		req := sessionFetch("e", id, epoch, nil)
		req.ReplicaID = replica
		kr, _ := doFetch(t, srv, req)
		return kr.ErrorCode == 0
	}
	a, b := open(-1, 1), open(-1, 2)
	if a == 0 || b == 0 {
		t.Fatal("sessions not opened with free slots")
	}
	if id := open(-1, 1); id != 0 {
		t.Fatal("an equal session took a slot")
	}
	c := open(-1, 3)
	if c == 0 || alive(a, 1, -1) || !alive(b, 1, -1) {
		t.Fatalf("a bigger session (id %d) did not take the smaller's slot", c)
	}
	if srv.sessions.evictions.Load() != 1 {
		t.Fatalf("%d evictions counted", srv.sessions.evictions.Load())
	}
	f := open(3, 1)
	if f == 0 || alive(b, 2, -1) {
		t.Fatal("a follower session did not take a consumer's slot")
	}
	if open(-1, 3) != 0 || !alive(f, 1, 3) {
		t.Fatal("an equal consumer session took a slot")
	}
	// Everything idle past the age: the least recently used (c, not f
	// just used) goes, even for a weaker newcomer.
	srv.sessions.minAge = 0
	if id := open(-1, 1); id == 0 || alive(c, 1, -1) || !alive(f, 2, 3) {
		t.Fatalf("the stale session was not the one replaced (new id %d)", id)
	}
}

// Many long-poll fetches, each on many partitions, wait on one Waker
// each: the goroutine count does not grow with the partitions watched,
// and appends racing with the fetches' reads and registrations wake
// every one of them (none waits out max_wait_ms). -race.
func TestFetchLongPollsScale(t *testing.T) {
	const parts, fetches, rounds = 64, 16, 8
	srv, eng := clusterServer(t, nil, parts, "m")
	ps := make([]*engine.Partition, parts)
	for i := range ps {
		var err error
		if ps[i], err = eng.Partition("m", int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	offsets := make([]int64, parts) // log ends
	done := make(chan struct{})
	for round := range rounds {
		before := runtime.NumGoroutine()
		var wg sync.WaitGroup
		errs := make(chan error, fetches)
		started := make(chan struct{}, fetches)
		for range fetches {
			m := map[int32]int64{}
			for p := range parts {
				m[int32(p)] = offsets[p]
			}
			req := sessionFetch("m", 0, -1, m)
			req.MinBytes, req.MaxWaitMillis = 1, 10_000
			wg.Add(1)
			go func() {
				defer wg.Done()
				started <- struct{}{}
				t0 := time.Now()
				resp := srv.fetch(req, t0.Add(10*time.Second), done, nil, new(time.Duration))
				resp.releaseAll()
				if d := time.Since(t0); d > 5*time.Second {
					errs <- fmt.Errorf("round %d: a fetch waited %v past an append", round, d)
				}
			}()
		}
		for range fetches {
			<-started
		}
		if round%2 == 0 {
			// Once every fetch parked (it watches every partition),
			// count: one goroutine per fetch.
			testwait.For(t, 10*time.Second, "every fetch to watch every partition", func() bool {
				for _, p := range ps {
					if p.Watchers() < fetches {
						return false
					}
				}
				return true
			})
			if g := runtime.NumGoroutine() - before; g > fetches+4 {
				t.Fatalf("%d goroutines for %d fetches on %d partitions", g, fetches, parts)
			}
		}
		// One append to one partition wakes every fetch (all watch it).
		p := round % parts
		w, err := ps[p].Append(batchtest.Values("x"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
		offsets[p]++
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	for i, p := range ps {
		if n := p.Watchers(); n != 0 {
			t.Fatalf("partition %d keeps %d watchers", i, n)
		}
	}
}

// A franz-go consumer over a broker handing out sessions reads every
// record of every partition in order, and its fetches were incremental.
func TestFetchSessionFranzGoConsumer(t *testing.T) {
	t.Parallel()
	const parts, n = 8, 2000
	srv, _ := clusterServer(t, nil, parts, "kgo")
	addr := srv.listeners[0].ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("kgo"), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.DisableIdempotentWrite()) // the in-process server has no producer ids
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("kgo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Produce while consuming, in bursts, so fetches see idle and busy
	// partitions.
	go func() {
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%64), Value: fmt.Appendf(nil, "%d", i)}, nil)
			if i%200 == 199 {
				prod.Flush(ctx)
				time.Sleep(20 * time.Millisecond) // pacing: an idle gap between bursts
			}
		}
		prod.Flush(ctx)
	}()
	next := map[int32]int64{}
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d of %d records consumed: %v", len(seen), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			if seen[string(r.Value)] {
				t.Fatalf("record %s twice", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	// The metrics tell that sessions were used.
	reg := prometheus.NewRegistry()
	reg.MustRegister(srv.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range mt.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	if got["ringlog_fetch_session_incremental_total"] == 0 || got["ringlog_fetch_sessions/sessions"] == 0 || got["ringlog_fetch_sessions/partitions"] != parts {
		t.Fatalf("session metrics: incremental %v, sessions %v, partitions %v", got["ringlog_fetch_session_incremental_total"],
			got["ringlog_fetch_sessions/sessions"], got["ringlog_fetch_sessions/partitions"])
	}

	// A session is not tied to its connection: opened on one client's,
	// continued on another's.
	var id int32
	for i, cl := range []*kgo.Client{prod, cons} {
		req := sessionFetch("kgo", id, int32(i), map[int32]int64{0: 0})
		kr, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if kr.ErrorCode != 0 || kr.SessionID == 0 || i == 1 && kr.SessionID != id {
			t.Fatalf("request %d: error %d session %d (opened %d)", i, kr.ErrorCode, kr.SessionID, id)
		}
		id = kr.SessionID
	}
}

// Under a max_bytes that fits two partitions' records, the partitions a
// response served move behind the others: busy partitions at the head
// of the session do not starve the rest.
func testFetchSessionRotatesUnderByteLimit(t *testing.T, srv *Server, eng *engine.Engine) {
	for p := range int32(4) {
		appendTo(t, eng, "r", p)
	}
	_, probe := doFetch(t, srv, sessionFetch("r", 0, -1, map[int32]int64{0: 0}))
	b := int32(probe[0])
	full := sessionFetch("r", 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0})
	// One topic, partitions in request order 0..3 (the map above is
	// unordered).
	slices.SortFunc(full.Topics[0].Partitions, func(x, y kmsg.FetchRequestTopicPartition) int { return int(x.Partition - y.Partition) })
	full.MaxBytes = 2*b + b/2
	kr, parts := doFetch(t, srv, full)
	if parts[0] == 0 || parts[1] == 0 || parts[2] != 0 || parts[3] != 0 {
		t.Fatalf("full fetch under max_bytes %d (batch %d): records per partition %v", full.MaxBytes, b, parts)
	}
	// 0 and 1 get more records; the fetcher moves past what it read.
	appendTo(t, eng, "r", 0)
	appendTo(t, eng, "r", 1)
	inc := sessionFetch("r", kr.SessionID, 1, map[int32]int64{0: 1, 1: 1})
	inc.MaxBytes = full.MaxBytes
	if _, parts = doFetch(t, srv, inc); parts[2] == 0 || parts[3] == 0 || parts[0] != 0 || parts[1] != 0 {
		t.Fatalf("after serving 0 and 1, records per partition %v, want 2 and 3 first", parts)
	}
	inc = sessionFetch("r", kr.SessionID, 2, map[int32]int64{2: 1, 3: 1})
	inc.MaxBytes = full.MaxBytes
	if _, parts = doFetch(t, srv, inc); parts[0] == 0 || parts[1] == 0 {
		t.Fatalf("then records per partition %v, want 0 and 1 again", parts)
	}
}

// The session's bookkeeping (adds, updates, forgets, reordering) agrees
// with a plain map after every step of a random sequence: the index
// points at the right partition, the sent state moves with it, and the
// partition count is right.
func TestFetchSessionBookkeeping(t *testing.T) {
	rng := rand.New(rand.NewPCG(227, 227))
	type tp struct {
		topic string
		p     int32
	}
	s := &fetchSession{replicaID: -1}
	model := map[tp]int64{} // fetch offset
	for step := range 5000 {
		topic := fmt.Sprintf("t%d", rng.IntN(4))
		p := int32(rng.IntN(6))
		switch rng.IntN(3) {
		case 0, 1:
			off := int64(rng.IntN(1000))
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset = p, off
			rt.Partitions = append(rt.Partitions, rp)
			s.upsert(&rt)
			model[tp{topic, p}] = off
		case 2:
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.Partitions = topic, []int32{p}
			s.forget(&ft)
			delete(model, tp{topic, p})
		}
		// Mark the sent state with the offset, then move a random
		// subset to the end as a byte-limited response would.
		var served []sessionPos
		for ti := range s.topics {
			for pi := range s.topics[ti].Partitions {
				s.sent[ti][pi].hw = s.topics[ti].Partitions[pi].FetchOffset
				if rng.IntN(4) == 0 {
					served = append(served, sessionPos{int32(ti), int32(pi)})
				}
			}
		}
		if len(served) > 0 {
			s.moveToEnd(served)
		}
		n := 0
		for ti := range s.topics {
			if len(s.topics[ti].Partitions) == 0 || len(s.sent[ti]) != len(s.topics[ti].Partitions) {
				t.Fatalf("step %d: group %d has %d partitions, %d sent states", step, ti, len(s.topics[ti].Partitions), len(s.sent[ti]))
			}
			for pi, rp := range s.topics[ti].Partitions {
				k := tp{s.topics[ti].Topic, rp.Partition}
				if off, ok := model[k]; !ok || off != rp.FetchOffset || s.sent[ti][pi].hw != off {
					t.Fatalf("step %d: %v at offset %d (sent %d), model %d %v", step, k, rp.FetchOffset, s.sent[ti][pi].hw, off, ok)
				}
				if pos := s.index[sessionKey{k.topic, k.p}]; pos != (sessionPos{int32(ti), int32(pi)}) {
					t.Fatalf("step %d: index of %v is %v, want %d/%d", step, k, pos, ti, pi)
				}
				n++
			}
		}
		if n != len(model) || s.n != n || len(s.index) != n {
			t.Fatalf("step %d: %d partitions listed, count %d, index %d, model %d", step, n, s.n, len(s.index), len(model))
		}
	}
}

// A session's long-poll waker stays registered with its partitions from
// fetch to fetch, and still wakes the next fetch for an append; a
// forgotten partition loses it at the session's next fetch, and a closed
// session's registrations all go.
func TestFetchSessionKeepsItsWatch(t *testing.T) {
	srv, eng := clusterServer(t, nil, 2, "sw")
	ps := partitionsOf(t, eng, "sw", 2)
	watchers := func() []int { return []int{ps[0].Watchers(), ps[1].Watchers()} }
	poll := func(req *kmsg.FetchRequest, wait time.Duration) (*kmsg.FetchResponse, map[int32]int) {
		req.MinBytes, req.MaxWaitMillis = 1, int32(wait/time.Millisecond)
		return doFetch(t, srv, req)
	}

	// The session's first fetch parks on both partitions and times out.
	kr, _ := poll(sessionFetch("sw", 0, 0, map[int32]int64{0: 0, 1: 0}), 150*time.Millisecond)
	id := kr.SessionID
	if id == 0 {
		t.Fatal("no session")
	}
	if w := watchers(); !slices.Equal(w, []int{1, 1}) {
		t.Fatalf("watchers after the first fetch %v, want the session's waker on both", w)
	}

	// The next fetch (naming nothing) wakes for an append to partition 1.
	got := make(chan map[int32]int, 1)
	go func() {
		_, n := poll(sessionFetch("sw", id, 1, nil), 10*time.Second)
		got <- n
	}()
	testwait.For(t, 5*time.Second, "the second fetch to hold the session", func() bool {
		srv.sessions.mu.Lock()
		defer srv.sessions.mu.Unlock()
		return srv.sessions.byID[id].busy
	})
	appendOne(t, ps[1])
	select {
	case n := <-got:
		if n[1] == 0 {
			t.Fatalf("answer %v, want partition 1's records", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the session's fetch did not wake for the append")
	}

	// Forgetting partition 0 drops its registration at that fetch.
	req := sessionFetch("sw", id, 2, map[int32]int64{1: 1})
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "sw", []int32{0}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	poll(req, 150*time.Millisecond)
	if w := watchers(); !slices.Equal(w, []int{0, 1}) {
		t.Fatalf("watchers after forgetting partition 0 %v, want [0 1]", w)
	}

	// Closing the session (epoch -1) drops the rest.
	poll(sessionFetch("sw", id, -1, map[int32]int64{1: 1}), 0)
	if w := watchers(); !slices.Equal(w, []int{0, 0}) {
		t.Fatalf("watchers after the session closed %v, want none", w)
	}
}

// A fetch of a session whose read withheld a throttled partition drops
// the session's registration with it, so its appends do not wake reads
// that withhold them again; the partitions it watches stay registered.
func TestSessionWatchDropsThrottled(t *testing.T) {
	_, eng := clusterServer(t, nil, 2, "th")
	ps := partitionsOf(t, eng, "th", 2)
	st := getFetchState()
	defer putFetchState(st)
	sess := &fetchSession{}
	st.ws = sess.watchSet(engine.WakeOnData)
	st.watch = append(st.watch[:0], watched{ps[0], st.ws.waker.Seen(ps[0])}, watched{ps[1], st.ws.waker.Seen(ps[1])})
	st.arm()
	if ps[0].Watchers() != 1 || ps[1].Watchers() != 1 {
		t.Fatalf("watchers %d, %d after the first arm", ps[0].Watchers(), ps[1].Watchers())
	}
	// The next read withheld partition 1.
	st.watch = append(st.watch[:0], watched{ps[0], st.ws.waker.Seen(ps[0])})
	st.throttleWait = time.Second
	st.arm()
	if ps[0].Watchers() != 1 || ps[1].Watchers() != 0 || len(st.ws.regs) != 1 {
		t.Fatalf("watchers %d, %d, registrations %d after a read that withheld partition 1", ps[0].Watchers(), ps[1].Watchers(), len(st.ws.regs))
	}
	sess.unwatchLocked()
	if ps[0].Watchers() != 0 {
		t.Fatal("the session's end left a registration")
	}
}
