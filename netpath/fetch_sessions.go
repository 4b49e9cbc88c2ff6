package netpath

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental fetch sessions (KIP-227, Fetch v7+), server side.
//
// A full fetch (session_epoch 0) lists every partition the fetcher wants
// and, room permitting, creates a session: the response carries its id
// and the fetcher's next request names it with epoch 1, then 2, ...
// Such an incremental request lists only partitions whose fetch position
// (or max bytes, leader epoch) changed plus forgotten_topics_data to drop,
// and its response carries only partitions with records, an error, a
// diverging epoch, or a high watermark / last stable offset / log start
// offset different from what this session last sent. A long poll
// watches every partition of the session, through the session's own
// Waker, which stays registered with them between requests. A consumer
// session's partitions are all read on every request. A follower's
// unchanged position still counts as a fetch for ISR purposes, so a
// replica session's partitions are read and recorded too, except those
// its last read found quiet (the follower in sync at our log end, nothing
// to send) that have not changed since, within the time replication
// allows (sentState.quiet, replication.FetchOutcome.QuietUntil): idle
// partitions then cost a replica fetch a version check each, not a read,
// a record of the follower's progress, request and response bytes, their
// parsing and encoding, or registering the long poll with each.
//
// Epoch rules, as Kafka's FetchManager:
//   - epoch 0 with a session id closes that session, then opens a new one;
//   - epoch -1 (FINAL) closes the named session, if any, and is served as
//     a sessionless full fetch (session id 0 in the response; librdkafka
//     always sends this);
//   - epoch > 0: an unknown id (or one created by another fetcher) is
//     FETCH_SESSION_ID_NOT_FOUND, another epoch than the session expects
//     (or a request while the previous one is still being answered) is
//     INVALID_FETCH_SESSION_EPOCH, a switch between topic names and topic
//     ids (v13+) is FETCH_SESSION_TOPIC_ID_ERROR. The fetcher then starts
//     over with a full fetch.
//
// The epoch advances when a request is accepted, not when its answer is
// written: a response lost with its connection leaves the client one
// epoch behind, which it is told, and it starts over. Sessions do not
// belong to a connection; any connection may carry the next request.
//
// Bounds: at most cfg.FetchSessionSlots sessions, maxSessionPartitions
// partitions in one session and maxCachedSessionPartitions in all (about
// 200 bytes each). When the cache is full a new session takes the slot
// of the least recently used session idle for FetchSessionEvictionAge,
// otherwise of the weakest one if it is weaker than the new one
// (followers rank above consumers, then more partitions above fewer);
// otherwise the fetch is served without a session.

const (
	maxSessionPartitions       = 100_000
	maxCachedSessionPartitions = 500_000
)

// fetchSessions is the broker's session cache. One mutex guards the map
// and every session's bookkeeping; a session's partition state (topics,
// sent) belongs to the one fetch that holds it busy.
type fetchSessions struct {
	slots  int
	minAge time.Duration

	mu         sync.Mutex
	byID       map[int32]*fetchSession
	partitions int // over all sessions

	evictions   atomic.Uint64
	incremental atomic.Uint64 // incremental requests accepted
}

// fetchSession is one fetcher's session.
type fetchSession struct {
	id        int32
	replicaID int32 // -1 for consumers
	topicIDs  bool  // created by a v13+ request: topics are keyed by id
	// Guarded by fetchSessions.mu.
	epoch    int32 // what the next request must carry
	busy     bool  // a fetch is being answered
	lastUsed time.Time
	closed   bool // removed from the cache
	// Owned by the busy fetch. topics holds the partitions as the
	// fetcher last described them; sent[i][j] is what the last response
	// told about topics[i].Partitions[j]; index locates a partition.
	topics []kmsg.FetchRequestTopic
	sent   [][]sentState
	index  map[sessionKey]sessionPos
	n      int
	// watch is the session's long-poll waker and the partitions it is
	// registered with, kept from fetch to fetch: used by the busy fetch
	// (whose arm also drops forgotten partitions), dropped with the
	// session (unwatchLocked).
	watch watchSet
}

type sentState struct {
	hw, lastStable, logStart int64
	ok                       bool // sent at least once
	// quiet is set by a replica fetch's read that found the partition
	// quiet (readFetch); the fields above then hold that read's answer,
	// which filter either sent or found already sent.
	quiet quietRead
}

// quietRead is a replica fetch's read of a session partition that found
// nothing to send, no error and the follower in sync at our log end.
// Until until, while the partition's Version stays ver, the metadata
// image stays img and the follower does not list the partition again
// (upsert clears it), a read would answer the same and its FollowerFetch
// record may be skipped (replication.FetchOutcome.QuietUntil).
type quietRead struct {
	part  *engine.Partition // nil: not quiet
	ver   uint64
	img   *metadata.Image
	until time.Time
}

func (q *quietRead) usable(img *metadata.Image, now time.Time) bool {
	return q.part != nil && q.img == img && now.Before(q.until)
}

type sessionKey struct {
	topic     string // name, or the 16 id bytes for topicIDs sessions
	partition int32
}

type sessionPos struct{ topic, part int32 }

func newFetchSessions(slots int, minAge time.Duration) *fetchSessions {
	return &fetchSessions{slots: slots, minAge: minAge, byID: make(map[int32]*fetchSession)}
}

// begin resolves the session of req. It returns the session the fetch
// reads (busy until end), or nil for a sessionless fetch; full tells
// whether the response lists every partition; code is a top-level error
// that answers the request alone.
func (c *fetchSessions) begin(req *kmsg.FetchRequest, now time.Time) (sess *fetchSession, full bool, code int16) {
	if req.Version < 7 {
		return nil, true, 0
	}
	if req.SessionEpoch <= 0 {
		if req.SessionID != 0 {
			c.mu.Lock()
			if old := c.byID[req.SessionID]; old != nil && old.replicaID == req.ReplicaID {
				c.removeLocked(old)
			}
			c.mu.Unlock()
		}
		if req.SessionEpoch < 0 || c.slots == 0 {
			return nil, true, 0
		}
		return c.create(req, now), true, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.byID[req.SessionID]
	switch {
	case s == nil || s.replicaID != req.ReplicaID:
		return nil, false, kerr.FetchSessionIDNotFound.Code
	case s.topicIDs != (req.Version >= 13):
		return nil, false, kerr.FetchSessionTopicIDError.Code
	case s.busy || s.epoch != req.SessionEpoch:
		return nil, false, kerr.InvalidFetchSessionEpoch.Code
	}
	before := s.n
	for i := range req.Topics {
		s.upsert(&req.Topics[i])
	}
	for i := range req.ForgottenTopics {
		s.forget(&req.ForgottenTopics[i])
	}
	c.partitions += s.n - before
	if s.n > maxSessionPartitions || c.partitions > maxCachedSessionPartitions {
		// Grown past its bound: the fetcher starts over, and its full
		// fetch is then served without a session.
		c.removeLocked(s)
		return nil, false, kerr.FetchSessionIDNotFound.Code
	}
	s.epoch = nextSessionEpoch(s.epoch)
	s.busy, s.lastUsed = true, now
	c.incremental.Add(1)
	return s, false, 0
}

// create opens a session for a full fetch, or returns nil when none fits.
func (c *fetchSessions) create(req *kmsg.FetchRequest, now time.Time) *fetchSession {
	s := &fetchSession{replicaID: req.ReplicaID, topicIDs: req.Version >= 13, epoch: 1, busy: true, lastUsed: now}
	for i := range req.Topics {
		s.upsert(&req.Topics[i])
	}
	if s.n > maxSessionPartitions {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byID) >= c.slots || c.partitions+s.n > maxCachedSessionPartitions {
		victim := c.victimLocked(s, now)
		if victim == nil {
			return nil
		}
		c.removeLocked(victim)
		c.evictions.Add(1)
	}
	for {
		// Ids are random so one fetcher cannot guess another's easily.
		s.id = rand.Int32N(math.MaxInt32) + 1
		if c.byID[s.id] == nil {
			break
		}
	}
	c.byID[s.id] = s
	c.partitions += s.n
	return s
}

// victimLocked picks the session a new one may replace: the least
// recently used idle past minAge, else the weakest if strictly weaker
// than s (a flood of equal new sessions must not churn the cache). Busy
// sessions are never taken. Lock must be held.
func (c *fetchSessions) victimLocked(s *fetchSession, now time.Time) *fetchSession {
	var stale, weak *fetchSession
	for _, o := range c.byID {
		if o.busy {
			continue
		}
		if now.Sub(o.lastUsed) >= c.minAge && (stale == nil || o.lastUsed.Before(stale.lastUsed)) {
			stale = o
		}
		if weak == nil || o.outranks(weak) < 0 || o.outranks(weak) == 0 && o.lastUsed.Before(weak.lastUsed) {
			weak = o
		}
	}
	if stale != nil {
		return stale
	}
	if weak != nil && s.outranks(weak) > 0 {
		return weak
	}
	return nil
}

// outranks compares sessions for eviction (> 0: s ranks higher):
// followers above consumers, then more partitions above fewer.
func (s *fetchSession) outranks(o *fetchSession) int {
	if f, g := s.replicaID >= 0, o.replicaID >= 0; f != g {
		if f {
			return 1
		}
		return -1
	}
	return s.n - o.n
}

// removeLocked drops s from the cache; a fetch holding it finishes
// harmlessly. Lock must be held.
func (c *fetchSessions) removeLocked(s *fetchSession) {
	if s.closed {
		return
	}
	s.closed = true
	delete(c.byID, s.id)
	c.partitions -= s.n
	if !s.busy {
		s.unwatchLocked() // else end or abandon does, once the fetch is done with it
	}
}

// unwatchLocked drops the session's registrations with its partitions.
// Lock must be held, and no fetch may hold s busy.
func (s *fetchSession) unwatchLocked() {
	if s.watch.waker != nil {
		s.watch.unwatchAll()
	}
}

// watchSet returns the session's waker, made on first use with the
// changes that wake this session's fetches (its fetcher kind never
// changes). The busy fetch only.
func (s *fetchSession) watchSet(on engine.WakeOn) *watchSet {
	if s.watch.waker == nil {
		s.watch.waker = engine.NewWaker()
		s.watch.waker.SetWakeOn(on)
	}
	return &s.watch
}

// end releases the session after its response was built.
func (c *fetchSessions) end(s *fetchSession, now time.Time) {
	c.mu.Lock()
	s.busy, s.lastUsed = false, now
	if s.closed {
		s.unwatchLocked() // removed while this fetch held it
	}
	c.mu.Unlock()
}

// abandon releases a session whose fetch ended without a response (its
// connection closed); a session created by that fetch is dropped, as its
// id never reached the fetcher.
func (c *fetchSessions) abandon(s *fetchSession, created bool) {
	c.mu.Lock()
	s.busy = false
	if created {
		c.removeLocked(s)
	}
	if s.closed {
		s.unwatchLocked()
	}
	c.mu.Unlock()
}

// stats returns the cached sessions and their partitions.
func (c *fetchSessions) stats() (sessions, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID), c.partitions
}

func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

func (s *fetchSession) key(name string, id [16]byte) string {
	if s.topicIDs {
		return string(id[:])
	}
	return name
}

// upsert adds rt's partitions to the session or updates their fetch
// state.
func (s *fetchSession) upsert(rt *kmsg.FetchRequestTopic) {
	if s.index == nil {
		s.index = make(map[sessionKey]sessionPos)
	}
	name := s.key(rt.Topic, rt.TopicID)
	ti := -1
	for i := range rt.Partitions {
		rp := &rt.Partitions[i]
		k := sessionKey{name, rp.Partition}
		if pos, ok := s.index[k]; ok {
			s.sent[pos.topic][pos.part].quiet = quietRead{} // listed: its fetch state changed
			p := &s.topics[pos.topic].Partitions[pos.part]
			p.FetchOffset, p.PartitionMaxBytes = rp.FetchOffset, rp.PartitionMaxBytes
			p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.LogStartOffset = rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset
			continue
		}
		if ti < 0 {
			ti = s.topicIndex(rt, name)
		}
		t := &s.topics[ti]
		np := *rp
		np.UnknownTags = kmsg.Tags{}
		t.Partitions = append(t.Partitions, np)
		s.sent[ti] = append(s.sent[ti], sentState{})
		s.index[k] = sessionPos{int32(ti), int32(len(t.Partitions) - 1)}
		s.n++
	}
}

// topicIndex returns the index of the session's topic named key,
// appending it if new.
func (s *fetchSession) topicIndex(rt *kmsg.FetchRequestTopic, key string) int {
	for i := range s.topics {
		if s.key(s.topics[i].Topic, s.topics[i].TopicID) == key {
			return i
		}
	}
	s.topics = append(s.topics, kmsg.FetchRequestTopic{Topic: rt.Topic, TopicID: rt.TopicID})
	s.sent = append(s.sent, nil)
	return len(s.topics) - 1
}

// forget drops the listed partitions (unknown ones are ignored).
func (s *fetchSession) forget(ft *kmsg.FetchRequestForgottenTopic) {
	name := s.key(ft.Topic, ft.TopicID)
	for _, part := range ft.Partitions {
		pos, ok := s.index[sessionKey{name, part}]
		if !ok {
			continue
		}
		delete(s.index, sessionKey{name, part})
		s.n--
		t := &s.topics[pos.topic]
		last := len(t.Partitions) - 1
		if int(pos.part) != last {
			t.Partitions[pos.part] = t.Partitions[last]
			s.sent[pos.topic][pos.part] = s.sent[pos.topic][last]
			s.index[sessionKey{name, t.Partitions[pos.part].Partition}] = pos
		}
		t.Partitions = t.Partitions[:last]
		s.sent[pos.topic] = s.sent[pos.topic][:last]
		if last > 0 {
			continue
		}
		// The topic is empty: move the last topic into its place.
		lt := len(s.topics) - 1
		if int(pos.topic) != lt {
			s.topics[pos.topic], s.sent[pos.topic] = s.topics[lt], s.sent[lt]
			moved := &s.topics[pos.topic]
			mk := s.key(moved.Topic, moved.TopicID)
			for j := range moved.Partitions {
				s.index[sessionKey{mk, moved.Partitions[j].Partition}] = sessionPos{pos.topic, int32(j)}
			}
		}
		s.topics[lt] = kmsg.FetchRequestTopic{}
		s.topics, s.sent = s.topics[:lt], s.sent[:lt]
	}
}

// filter keeps, for an incremental response, the partitions the fetcher
// must hear about, and records what every kept partition told. topics is
// parallel to s.topics (readFetch keeps the order). It is compacted in
// place by swapping, so each entry keeps its own partitions array for
// reuse (fetchState). A full response keeps everything. When limited
// (the request's max_bytes cut a read short) the partitions that returned
// records move behind the others, so the next fetches read the rest
// first (as Kafka does) instead of starving the session's tail.
func (s *fetchSession) filter(topics []fetchTopic, full, limited bool) []fetchTopic {
	var served []sessionPos
	out := 0
	for i := range topics {
		t := &topics[i]
		sent := s.sent[i]
		kept := t.partitions[:0]
		for j, p := range t.partitions {
			st := &sent[j]
			if !full && st.ok && p.errorCode == 0 && p.data == nil && p.diverging == nil &&
				p.highWatermark == st.hw && p.lastStable == st.lastStable && p.logStart == st.logStart {
				continue
			}
			st.hw, st.lastStable, st.logStart, st.ok = p.highWatermark, p.lastStable, p.logStart, true
			if limited && p.data != nil {
				served = append(served, sessionPos{int32(i), int32(j)})
			}
			kept = append(kept, p)
		}
		if len(kept) > 0 {
			t.partitions = kept
			topics[out], topics[i] = topics[i], topics[out]
			out++
		}
	}
	if len(served) > 0 {
		s.moveToEnd(served)
	}
	return topics[:out]
}

// moveToEnd reorders the session so the partitions at pos (ascending)
// come last. A topic may then appear in two groups; responses list it
// twice, which clients accept (Kafka's responses do the same).
func (s *fetchSession) moveToEnd(pos []sessionPos) {
	last := make(map[sessionPos]bool, len(pos))
	for _, p := range pos {
		last[p] = true
	}
	topics := make([]kmsg.FetchRequestTopic, 0, len(s.topics)+1)
	sent := make([][]sentState, 0, len(s.topics)+1)
	add := func(p sessionPos) {
		src := &s.topics[p.topic]
		k := s.key(src.Topic, src.TopicID)
		if n := len(topics); n == 0 || s.key(topics[n-1].Topic, topics[n-1].TopicID) != k {
			topics = append(topics, kmsg.FetchRequestTopic{Topic: src.Topic, TopicID: src.TopicID})
			sent = append(sent, nil)
		}
		n := len(topics) - 1
		part := src.Partitions[p.part]
		topics[n].Partitions = append(topics[n].Partitions, part)
		sent[n] = append(sent[n], s.sent[p.topic][p.part])
		s.index[sessionKey{k, part.Partition}] = sessionPos{int32(n), int32(len(topics[n].Partitions) - 1)}
	}
	for ti := range s.topics {
		for pi := range s.topics[ti].Partitions {
			if p := (sessionPos{int32(ti), int32(pi)}); !last[p] {
				add(p)
			}
		}
	}
	for _, p := range pos {
		add(p)
	}
	s.topics, s.sent = topics, sent
}

var (
	descFetchSessions = prometheus.NewDesc("ringlog_fetch_sessions",
		"Incremental fetch sessions (KIP-227) cached, and the partitions they hold.", []string{"what"}, nil)
	descFetchSessionEvictions = prometheus.NewDesc("ringlog_fetch_session_evictions_total",
		"Fetch sessions evicted to make room for a new one.", nil, nil)
	descFetchSessionIncremental = prometheus.NewDesc("ringlog_fetch_session_incremental_total",
		"Incremental fetch requests accepted (they named a live session and its epoch).", nil, nil)
)

func (c *fetchSessions) describe(ch chan<- *prometheus.Desc) {
	ch <- descFetchSessions
	ch <- descFetchSessionEvictions
	ch <- descFetchSessionIncremental
}

func (c *fetchSessions) collect(ch chan<- prometheus.Metric) {
	if c == nil {
		return // a Server not built by New (tests)
	}
	sessions, partitions := c.stats()
	ch <- prometheus.MustNewConstMetric(descFetchSessions, prometheus.GaugeValue, float64(sessions), "sessions")
	ch <- prometheus.MustNewConstMetric(descFetchSessions, prometheus.GaugeValue, float64(partitions), "partitions")
	ch <- prometheus.MustNewConstMetric(descFetchSessionEvictions, prometheus.CounterValue, float64(c.evictions.Load()))
	ch <- prometheus.MustNewConstMetric(descFetchSessionIncremental, prometheus.CounterValue, float64(c.incremental.Load()))
}
