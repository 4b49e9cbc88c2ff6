package netpath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/replication"
	"github.com/ringlog/ringlog/tiered/remote"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v4-12
//
// Behavior:
//   - v4 is the floor: older versions return message sets, which we never
//     store (librdkafka needs v4 for record batch v2).
//   - Long poll: if fewer than min_bytes are available the request waits,
//     woken by high watermark advances of the fetched partitions (for a
//     follower, log end advances), until max_wait_ms after its arrival
//     (capped at 2 min); then it answers with what there is. A replica
//     fetch whose follower reported a log start below ours answers at
//     once (a log start move wakes it too), so DeleteRecords' low
//     watermark does not wait for a long poll to run out. The fetch
//     registers one engine.Waker with every partition it read (no
//     goroutine per partition); each partition's version is taken before
//     it is read, so an advance between the read and the registration
//     still wakes it.
//   - max_bytes and partition_max_bytes are honoured, except that the first
//     batch of the response is always returned whole (KIP-74).
//   - Record data are file ranges sent with sendfile on plaintext listeners
//     (copied through user space on TLS or with --fetch-copy); the response
//     frame and per-partition headers are encoded here (fetch_encode.go).
//   - Incremental fetch sessions (KIP-227, v7+) for consumers and
//     followers: a full fetch (epoch 0) opens one when the cache has room,
//     incremental requests name only changed partitions and get back only
//     partitions with news; the fetch reads and watches every partition
//     of the session. Rules and bounds in fetch_sessions.go.
//   - Replica fetches (replica_id >= 0) of replicated partitions go
//     through the leader's replication state (Replicas, broker/replicas.go): the follower's
//     progress moves the HW and the ISR, a diverged follower gets
//     DivergingEpoch and no records, and records are read up to the log
//     end rather than the high watermark.
//   - Only the partition's leader serves it: elsewhere (or while this
//     broker's metadata may be stale) NOT_LEADER_OR_FOLLOWER, with the
//     CurrentLeader tagged field (v12+) naming the leader and epoch the
//     image knows. current_leader_epoch is checked against the image's.
//   - read_committed stops at the last stable offset and lists the aborted
//     transactions overlapping the returned range (the consumer drops
//     their records); read_uncommitted reads to the high watermark.
//   - Tiered storage (KIP-405): a consumer read below the local
//     log start (engine.ErrOffsetRemote) is served from the remote tier
//     (Deps.Remote, tiered/remote) with the same HW, LSO and log start
//     the local path reports; its records are a range of a chunk-cache
//     file, sent and released like a segment range. The remote reads of
//     one pass over the partitions share one time budget: until the
//     fetch's max wait, but at least remoteReadMinWait from the first
//     remote read (a cold chunk needs a store round trip) and at most
//     remoteReadMaxWait. A partition whose read the budget cuts short (or
//     that finds it spent) answers with no records and no error; the
//     chunk fetch goes on in the cache and the consumer's next fetch
//     finds it. So a slow store delays an answer by one budget at most,
//     however many partitions read remotely. read_committed lists the
//     aborted transactions of both tiers. Without an object store the
//     read answers KAFKA_STORAGE_ERROR. A replica fetch below the local
//     log start answers OFFSET_MOVED_TO_TIERED_STORAGE with the log
//     start: followers restart from the remote tier's end
//     (tiered/remote RestartPoint) instead of copying it.
//   - Replication throttle (broker/throttle.go): a replica fetch's
//     partitions that Replicas.LeaderThrottle calls throttled get no
//     records while leader.replication.throttled.rate is exceeded (the
//     rest of the response is unaffected) and are not watched; the long
//     poll then lasts at most until the rate allows them again. The bytes
//     sent for throttled partitions are charged to the rate.

func init() { register(1, 4, 12, handleFetch) }

func handleFetch(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.FetchRequest)
	// Authorization is decided on the reader: a replica fetch needs
	// CLUSTER_ACTION (a forged replica id gains nothing), a consumer READ
	// on each topic it reads, which with a session are the session's
	// (checked when the fetch resolves them).
	var authz func(string) bool
	if s.cfg.Security.Authorizer {
		if req.ReplicaID >= 0 {
			if !s.authorizeCluster(r, metadata.OpClusterAction) {
				return fetchErrorReply(req, kerr.ClusterAuthorizationFailed.Code)
			}
		} else {
			authz = func(name string) bool { return s.authorize(r, metadata.OpRead, metadata.ResourceTopic, name) }
		}
	}
	deadline := requestDeadline(time.Now(), req.MaxWaitMillis, 0)
	return reply{resolve: func(done <-chan struct{}) *response {
		return s.fetch(req, deadline, done, authz, &r.parked)
	}}
}

// fetchErrorReply answers a fetch with only a top-level error.
func fetchErrorReply(req *kmsg.FetchRequest, code int16) reply {
	return reply{resolve: func(<-chan struct{}) *response {
		return &response{parts: []responsePart{{buf: encodeFetchError(req.Version, code)}}, flexible: req.Version >= 12}
	}}
}

// fetchPartition is one partition's part of a fetch response.
type fetchPartition struct {
	partition     int32
	errorCode     int16
	highWatermark int64
	lastStable    int64
	logStart      int64
	data          engine.FileRange // nil when there is nothing to send
	// currentLeader/currentEpoch fill the CurrentLeader tagged field
	// (v12+) of a NOT_LEADER_OR_FOLLOWER or epoch error; set when
	// hasLeader.
	hasLeader     bool
	currentLeader int32
	currentEpoch  int32
	// diverging is the DivergingEpoch (v12+) of a replica fetch whose log
	// parted from ours; no records go with it.
	diverging *replication.EpochEndOffset
	// aborted lists the aborted transactions overlapping the records of a
	// read_committed fetch.
	aborted []producerstate.AbortedTxn
	// throttled: the records (if any) count against the replication
	// throttle (Replicas.LeaderThrottle).
	throttled bool
	// src, on a replica read that found nothing to send and no error, is
	// the partition read, and ver its Version before the read: while
	// that version holds, a read again would answer the same.
	src *engine.Partition
	ver uint64
}

type fetchTopic struct {
	name       string
	id         [16]byte
	partitions []fetchPartition
}

// fetch answers req, long-polling until deadline for min_bytes. authz,
// when set, tells whether the consumer may read a topic. The time spent
// waiting in the long poll is added to parked (request_quota.go).
func (s *Server) fetch(req *kmsg.FetchRequest, deadline time.Time, done <-chan struct{}, authz func(string) bool, parked *time.Duration) *response {
	now := time.Now()
	sess, full, code := s.sessions.begin(req, now)
	if code != 0 {
		return &response{parts: []responsePart{{buf: encodeFetchError(req.Version, code)}}, flexible: req.Version >= 12}
	}
	created := sess != nil && full
	reqTopics := req.Topics
	if sess != nil {
		reqTopics = sess.topics
	}
	denied := s.deniedTopics(req.Version, reqTopics, authz)
	st := getFetchState()
	st.heldBack, st.deadline = false, deadline
	// A replica reads up to the log end: a move of the high watermark or
	// of the durable end alone (each once per acknowledged round) gives
	// it nothing to send.
	wakeOn := engine.WakeOnAll
	if req.ReplicaID >= 0 {
		wakeOn = engine.WakeOnData
	}
	if sess != nil {
		// A session's waker stays registered with its partitions from
		// fetch to fetch (fetchSession.watch): registering it with every
		// partition and unregistering it again on each fetch cost each
		// round a map insert and delete per partition of the session.
		// What changed since the last fetch is read now, so its token
		// goes.
		st.ws = sess.watchSet(wakeOn)
		st.ws.waker.Drain()
	} else {
		st.ws = &st.own
		st.ws.waker.SetWakeOn(wakeOn)
	}
	st.reread, st.sess = false, sess
	for {
		topics, total, hasErr := s.readFetch(req, reqTopics, denied, st)
		st.reread = true
		if total >= int64(req.MinBytes) || hasErr || st.startNews || req.MaxWaitMillis <= 0 || !time.Now().Before(deadline) || len(st.watch) == 0 && st.throttleWait == 0 {
			return s.fetchResponse(req, sess, full, topics, st)
		}
		releaseFetch(topics)
		st.arm()
		until := deadline
		if st.throttleWait > 0 {
			// Throttled partitions are not watched (every append would
			// wake a read that withholds them again): read again when
			// the rate allows them.
			if t := time.Now().Add(st.throttleWait); t.Before(deadline) {
				until = t
			}
		}
		parkedAt := time.Now()
		woke := st.wait(until, done)
		*parked += time.Since(parkedAt)
		if !woke {
			if isClosed(done) {
				if sess != nil {
					s.sessions.abandon(sess, created)
				}
				st.unwatch()
				putFetchState(st)
				return nil
			}
			if until.Before(deadline) {
				continue
			}
			// Deadline: one more read answers with whatever arrived.
			topics, _, _ = s.readFetch(req, reqTopics, denied, st)
			return s.fetchResponse(req, sess, full, topics, st)
		}
	}
}

// deniedTopics lists the topics of a consumer fetch that authz refuses.
func (s *Server) deniedTopics(version int16, topics []kmsg.FetchRequestTopic, authz func(string) bool) map[string]bool {
	if authz == nil {
		return nil
	}
	var denied map[string]bool
	for i := range topics {
		name := topics[i].Topic
		if version >= 13 {
			if info, ok := s.topicByID(topics[i].TopicID); ok {
				name = info.Name
			}
		}
		if !authz(name) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[name] = true
		}
	}
	return denied
}

// fetchState is what one fetch reuses across its reads and the pool
// reuses across fetches: the response's topic slices, the partitions the
// last read watched, and the one Waker registered with them.
type fetchState struct {
	topics []fetchTopic
	watch  []watched
	// ws is the waker the fetch waits on and the partitions it is
	// registered with: own for a fetch without a session, the session's
	// otherwise.
	ws  *watchSet
	own watchSet
	// limited: the last read cut a partition short for max_bytes.
	limited bool
	// startNews: the last read found a replica fetch's follower behind
	// our log start (DeleteRecords moved it): answer now, without
	// waiting for min_bytes, so the follower follows and reports it.
	startNews bool
	// throttleWait > 0: the last read withheld a throttled partition's
	// records, which the replication throttle allows after this long;
	// heldBack: some read of this fetch did.
	throttleWait time.Duration
	heldBack     bool
	// deadline is the fetch's; remoteBy ends the remote reads of the
	// current pass (zero until one starts).
	deadline, remoteBy time.Time
	timer              *time.Timer
	// resp and enc are the fetch's response and its encoding (fetchResponse).
	resp response
	enc  fetchEncoding
	// reread: an earlier read of this fetch recorded the follower's
	// progress (FollowerFetch). Like Kafka's delayed fetch, the reads
	// after a wake only read: the request's offsets are the same, so a
	// second record changed nothing the HW or the ISR depend on, and it
	// was a third of a replica read's cost.
	reread bool
	// sess is the fetch's session (nil without one): readFetch keeps its
	// quiet partitions' state in it (sentState.quiet).
	sess *fetchSession
}

// watched is a partition a long poll waits on, with its change count
// taken before it was read.
type watched struct {
	part    *engine.Partition
	version uint64
}

// watchSet is a Waker and the partitions it is registered with.
type watchSet struct {
	waker *engine.Waker
	regs  []*engine.Partition
	// set indexes regs once they are more than a scan should cover.
	set map[*engine.Partition]struct{}
}

// registered reports whether the waker is registered with p; i is p's
// place in the last read, where it usually sits in regs too.
func (w *watchSet) registered(p *engine.Partition, i int) bool {
	if i < len(w.regs) && w.regs[i] == p {
		return true
	}
	if len(w.regs) <= maxScannedRegs {
		return slices.Contains(w.regs, p)
	}
	if w.set == nil {
		w.set = make(map[*engine.Partition]struct{}, len(w.regs))
		for _, r := range w.regs {
			w.set[r] = struct{}{}
		}
	}
	_, ok := w.set[p]
	return ok
}

// maxScannedRegs: up to this many registrations a scan finds one.
const maxScannedRegs = 16

// add records a registration with p.
func (w *watchSet) add(p *engine.Partition) {
	w.regs = append(w.regs, p)
	if w.set != nil {
		w.set[p] = struct{}{}
	}
}

// keepOnly drops the registrations with partitions not in watch.
func (w *watchSet) keepOnly(watch []watched) {
	keep := make(map[*engine.Partition]struct{}, len(watch))
	for _, x := range watch {
		keep[x.part] = struct{}{}
	}
	n := 0
	for _, p := range w.regs {
		if _, ok := keep[p]; ok {
			w.regs[n] = p
			n++
		} else {
			p.Unwatch(w.waker)
		}
	}
	clear(w.regs[n:])
	w.regs, w.set = w.regs[:n], nil
}

// unwatchAll unregisters w from every partition; afterwards none can
// wake it.
func (w *watchSet) unwatchAll() {
	for _, p := range w.regs {
		p.Unwatch(w.waker)
	}
	clear(w.regs)
	w.regs, w.set = w.regs[:0], nil
	w.waker.Drain()
}

var fetchStates = sync.Pool{New: func() any { return &fetchState{own: watchSet{waker: engine.NewWaker()}} }}

func getFetchState() *fetchState { return fetchStates.Get().(*fetchState) }

// putFetchState returns st to the pool once its response is written:
// the topics' file ranges are released and st is unwatched.
func putFetchState(st *fetchState) {
	all := st.topics[:cap(st.topics)]
	for i := range all {
		ps := all[i].partitions
		clear(ps[:cap(ps)])
	}
	clear(st.watch[:cap(st.watch)])
	st.topics, st.watch, st.ws = st.topics[:0], st.watch[:0], nil
	st.resp = response{}
	st.enc.reset()
	fetchStates.Put(st)
}

// arm registers the Waker with every partition the last read watched
// and that it is not registered with yet. A partition changed since its
// read wakes it at once (Watch compares the version).
func (st *fetchState) arm() {
	ws := st.ws
	for i, w := range st.watch {
		if ws.registered(w.part, i) {
			// Registered by an earlier round (or fetch of the session):
			// every change since then left a token, or was seen by the
			// read that followed it.
			continue
		}
		w.part.Watch(ws.waker, w.version)
		ws.add(w.part)
	}
	if len(ws.regs) > len(st.watch) {
		// Registered with partitions this read did not watch: forgotten
		// by the session, or withheld by the replication throttle (see
		// fetch), whose appends would wake every read that withholds
		// them again.
		ws.keepOnly(st.watch)
	}
}

// wait blocks until a watched partition changes (true), or the deadline
// passes or done is closed (false).
func (st *fetchState) wait(deadline time.Time, done <-chan struct{}) bool {
	if st.timer == nil {
		st.timer = time.NewTimer(time.Until(deadline))
	} else {
		st.timer.Reset(time.Until(deadline))
	}
	defer st.timer.Stop()
	select {
	case <-st.ws.waker.C():
		return true
	case <-st.timer.C:
		return false
	case <-done:
		return false
	}
}

// unwatch undoes arm for a fetch without a session; a session's
// registrations stay with it (fetchSessions.end drops them with the
// session).
func (st *fetchState) unwatch() {
	if st.ws == &st.own {
		st.own.unwatchAll()
	}
}

// Read modes of a partition in a fetch.
const (
	readUncommitted = iota
	readCommitted
	readReplica
)

// readFetch reads every partition of reqTopics once, into st.topics (in
// reqTopics' order, one entry per requested partition: session filtering
// relies on it). It returns the file ranges (held until released), their
// total size and whether any partition has an error; st.watch gets the
// partitions to wait on, each with its version taken before its read.
func (s *Server) readFetch(req *kmsg.FetchRequest, reqTopics []kmsg.FetchRequestTopic, denied map[string]bool, st *fetchState) ([]fetchTopic, int64, bool) {
	var (
		total  int64
		hasErr bool
	)
	topics := st.topics[:0]
	st.watch, st.limited, st.startNews, st.throttleWait, st.remoteBy = st.watch[:0], false, false, 0, time.Time{}
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	// A replica fetch's session remembers which of its partitions were
	// quiet at its last read (sentState.quiet).
	var (
		sent [][]sentState
		now  time.Time
	)
	if req.ReplicaID >= 0 && st.sess != nil && fresh == nil {
		sent, now = st.sess.sent, time.Now()
	}
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	for ti := range reqTopics {
		rt := &reqTopics[ti]
		// Reuse the slot's partition slice from an earlier read.
		var parts []fetchPartition
		if len(topics) < cap(topics) {
			parts = topics[:len(topics)+1][len(topics)].partitions[:0]
		}
		ft := fetchTopic{name: rt.Topic, id: rt.TopicID, partitions: parts}
		if req.Version >= 13 {
			if info, ok := img.TopicByID(rt.TopicID); ok {
				ft.name = info.Name
			}
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			if st.reread && pi < cap(ft.partitions) {
				// After a wake, a partition of a replica fetch that has
				// not changed at all since its empty read keeps that
				// read's answer: a fetch session names every partition
				// the follower replicates from us, and reading them all
				// again for the one that woke the fetch cost each
				// acknowledged round a read per partition.
				if prev := ft.partitions[:pi+1][pi]; prev.src != nil && prev.partition == rp.Partition && st.keepUnchanged(&ft, prev) {
					continue
				}
			}
			var sentQuiet *quietRead // the session's record of this partition, read on arrival
			if !st.reread && sent != nil {
				// A session partition the follower did not list, found
				// quiet at an earlier fetch and unchanged since, keeps
				// that answer without a read or a FollowerFetch record
				// (sentState.quiet): each acknowledged round otherwise
				// read every partition the follower replicates from us.
				ss := &sent[ti][pi]
				if q := &ss.quiet; q.usable(img, now) && st.keepUnchanged(&ft, fetchPartition{partition: rp.Partition,
					highWatermark: ss.hw, lastStable: ss.lastStable, logStart: ss.logStart, src: q.part, ver: q.ver}) {
					continue
				}
				sentQuiet = &ss.quiet
				*sentQuiet = quietRead{} // until this read finds it quiet again
			}
			var quiet quietRead // set when this read finds the partition quiet
			fp := fetchPartition{partition: rp.Partition, highWatermark: -1, lastStable: -1, logStart: -1}
			if denied[ft.name] {
				fp.errorCode = kerr.TopicAuthorizationFailed.Code
				hasErr = true
				ft.partitions = append(ft.partitions, fp)
				continue
			}
			lc := s.leaderPartition(img, fresh, ft.name, rp.Partition, rp.CurrentLeaderEpoch)
			if lc.code != 0 {
				fp.errorCode = lc.code
				if lc.code != kerr.UnknownTopicOrPartition.Code {
					fp.hasLeader, fp.currentLeader, fp.currentEpoch = true, lc.info.Leader, lc.info.LeaderEpoch
				}
				hasErr = true
				ft.partitions = append(ft.partitions, fp)
				continue
			}
			part := lc.part
			limit := int64(rp.PartitionMaxBytes)
			if remaining := maxBytes - total; remaining < limit {
				limit, st.limited = remaining, true
			}
			if limit < 0 {
				limit = 0
			}
			mode := readUncommitted
			if req.IsolationLevel == 1 && req.ReplicaID < 0 {
				mode = readCommitted
			}
			if req.ReplicaID >= 0 && s.repl != nil && part.Replicated() {
				var (
					div *replication.EpochEndOffset
					err error
				)
				if !st.reread {
					div, quiet.until, err = s.repl.FollowerFetch(ft.name, rp.Partition, replication.FollowerFetch{
						ReplicaID: req.ReplicaID, CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
						FetchOffset: rp.FetchOffset, LastFetchedEpoch: rp.LastFetchedEpoch,
						LogStartOffset: rp.LogStartOffset,
					})
				}
				if err != nil || div != nil {
					var code int16
					if err != nil {
						code = replErrorCode(err)
					}
					info := part.Info()
					fp.errorCode, fp.diverging = code, div
					fp.highWatermark, fp.lastStable, fp.logStart = info.HighWatermark, info.HighWatermark, info.LogStartOffset
					hasErr = true
					ft.partitions = append(ft.partitions, fp)
					continue
				}
				mode = readReplica
				var wait time.Duration
				if fp.throttled, wait = s.repl.LeaderThrottle(ft.name, rp.Partition, req.ReplicaID); wait > 0 {
					info := part.Info()
					fp.highWatermark, fp.lastStable, fp.logStart = info.HighWatermark, info.HighWatermark, info.LogStartOffset
					if st.throttleWait == 0 || wait < st.throttleWait {
						st.throttleWait = wait
					}
					st.heldBack = true
					ft.partitions = append(ft.partitions, fp)
					continue
				}
			}
			// The version is taken before the read: a change that lands
			// after the read has a later version, so registering with
			// this one (fetchState.arm) wakes at once rather than
			// sleeping through it.
			version := st.ws.waker.Seen(part)
			var full uint64 // for the reuse after a wake (replica reads only)
			if mode == readReplica {
				full = part.Version()
			}
			var (
				res engine.ReadResult
				err error
			)
			switch mode {
			case readCommitted:
				res, fp.aborted, err = part.ReadCommitted(rp.FetchOffset, int32(limit), total == 0)
			case readReplica:
				res, err = part.ReadReplica(rp.FetchOffset, int32(limit))
			default:
				res, err = part.Read(rp.FetchOffset, int32(limit), total == 0)
			}
			if err != nil && mode != readReplica && errors.Is(err, engine.ErrOffsetRemote) {
				if s.remote == nil {
					s.warnNoRemote(err)
				} else {
					if st.remoteBy.IsZero() {
						st.remoteBy = remoteBudget(time.Now(), st.deadline)
					}
					// res.Data is the engine's empty range: the answer
					// when the remote read runs out of time.
					res, fp.aborted, err = s.remoteRead(img, part, rp.Partition, rp.FetchOffset, int32(limit), total == 0, mode == readCommitted, st.remoteBy, res.Data)
				}
			}
			if afterFetchRead != nil {
				afterFetchRead()
			}
			if err != nil {
				info := part.Info()
				fp.errorCode, fp.aborted = errorCode(err), nil
				if mode == readReplica && errors.Is(err, engine.ErrOffsetRemote) {
					// The follower restarts at the remote tier's end
					// rather than copying what the object store holds.
					fp.errorCode = kerr.OffsetMovedToTieredStorage.Code
				}
				fp.highWatermark, fp.lastStable, fp.logStart = info.HighWatermark, info.HighWatermark, info.LogStartOffset
				hasErr = true
				ft.partitions = append(ft.partitions, fp)
				continue
			}
			// Right after a leader change this HW may be below what the
			// previous leader acknowledged (below the epoch start, see
			// 02_list_offsets.go). Like Kafka we serve the fetch anyway:
			// records below it are committed, and the HW a later fetch
			// returns has caught up; only ListOffsets refuses then.
			fp.highWatermark, fp.lastStable, fp.logStart = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
			if mode == readReplica && rp.LogStartOffset >= 0 && res.LogStartOffset > rp.LogStartOffset {
				// The leader's low watermark (DeleteRecords' answer)
				// waits for this follower's start; it can always
				// follow ours (start <= its HW once it has this
				// response), so this cannot repeat without progress.
				st.startNews = true
			}
			if res.Data.Len() > 0 {
				fp.data = res.Data
				total += int64(res.Data.Len())
			} else {
				res.Data.Release()
				if mode == readReplica && !fp.throttled {
					fp.src, fp.ver = part, full
					// Quiet: in sync at our end (QuietUntil) and not
					// to be told of a log start move (startNews).
					if sentQuiet != nil && !quiet.until.IsZero() && (rp.LogStartOffset < 0 || res.LogStartOffset <= rp.LogStartOffset) {
						quiet.part, quiet.ver, quiet.img = part, full, img
						*sentQuiet = quiet
					}
				}
			}
			st.watch = append(st.watch, watched{part, version})
			ft.partitions = append(ft.partitions, fp)
		}
		topics = append(topics, ft)
	}
	st.topics = topics
	return topics, total, hasErr
}

// keepUnchanged answers fp, the empty answer of an earlier read of
// fp.src at Version fp.ver, again when the partition has not changed
// since, and has the long poll watch it; it reports whether it did. The
// watch's version is taken before the check, so a change that lands
// after it wakes the poll.
func (st *fetchState) keepUnchanged(ft *fetchTopic, fp fetchPartition) bool {
	seen := st.ws.waker.Seen(fp.src)
	if fp.src.Version() != fp.ver {
		return false
	}
	st.watch = append(st.watch, watched{fp.src, seen})
	ft.partitions = append(ft.partitions, fp)
	return true
}

// afterFetchRead, when set (tests only), runs after each partition read
// of a fetch, where an append that lands must still wake the long poll.
var afterFetchRead func()

func releaseFetch(topics []fetchTopic) {
	for _, t := range topics {
		for _, p := range t.partitions {
			if p.data != nil {
				p.data.Release()
			}
		}
	}
}

// fetchResponse encodes the answer; for a session it keeps only what the
// fetcher must hear (fetch_sessions.go) and releases the session.
func (s *Server) fetchResponse(req *kmsg.FetchRequest, sess *fetchSession, full bool, topics []fetchTopic, st *fetchState) *response {
	st.unwatch()
	if req.ReplicaID >= 0 && s.repl != nil {
		var n int64
		for _, t := range topics {
			for _, p := range t.partitions {
				if p.throttled && p.data != nil {
					n += int64(p.data.Len())
				}
			}
		}
		if n > 0 || st.heldBack {
			s.repl.RecordLeaderThrottle(n, st.heldBack)
		}
	}
	var sessionID int32
	if sess != nil {
		topics = sess.filter(topics, full, st.limited)
		s.sessions.end(sess, time.Now())
		sessionID = sess.id
	}
	s.metrics.fetched(s, req.ReplicaID >= 0, topics)
	// The response is st's own, like its encoding: both go back to the
	// pool with st once the response is written (releaseAll).
	st.resp = response{parts: encodeFetchResponse(&st.enc, req.Version, req.IsolationLevel, sessionID, topics), flexible: req.Version >= 12,
		fetchTopics: topics, fetchState: st}
	return &st.resp
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Bounds of one remote read (see the header comment).
const (
	remoteReadMinWait = 2 * time.Second
	remoteReadMaxWait = 30 * time.Second
)

// warnNoRemote logs, once a minute at most, that a consumer asked for
// data only the remote tier holds on a broker without an object store
// (the client only sees KAFKA_STORAGE_ERROR).
func (s *Server) warnNoRemote(err error) {
	now := time.Now().UnixNano()
	last := s.noRemoteWarned.Load()
	if now-last < int64(time.Minute) || !s.noRemoteWarned.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("fetch below the local log start answered KAFKA_STORAGE_ERROR: the remote tier holds it and this broker has no object store configured", "err", err)
}

// remoteBudget is when the remote reads of a fetch pass starting at now
// must end (see the header comment).
func remoteBudget(now, deadline time.Time) time.Time {
	wait := min(max(deadline.Sub(now), remoteReadMinWait), remoteReadMaxWait)
	return now.Add(wait)
}

// remoteRead serves a consumer read of part below its local log start
// from the remote tier by deadline, with the offsets the local path
// would report. empty is the Data of an answer without records.
func (s *Server) remoteRead(img *metadata.Image, part *engine.Partition, idx int32, offset int64, limit int32, minOne, committed bool, deadline time.Time, empty engine.FileRange) (engine.ReadResult, []producerstate.AbortedTxn, error) {
	t, ok := img.Topic(part.Topic())
	if !ok {
		return engine.ReadResult{}, nil, fmt.Errorf("%w: %s not in the metadata", engine.ErrUnknownTopic, part.Topic())
	}
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	defer cancel()
	var (
		res     engine.ReadResult
		aborted []producerstate.AbortedTxn
		err     = ctx.Err()
	)
	if err == nil {
		res, aborted, err = s.remote.Read(ctx, t.ID, idx, offset, limit, minOne, committed)
	}
	if err != nil {
		if ctx.Err() == nil || s.ctx.Err() != nil || errors.Is(err, remote.ErrOffsetGone) || empty == nil {
			return res, nil, err
		}
		// Out of time: no records this time (the cache keeps fetching).
		res, aborted, err = engine.ReadResult{Data: empty}, nil, nil
	}
	info := part.Info()
	res.HighWatermark, res.LastStableOffset, res.LogStartOffset = info.HighWatermark, info.HighWatermark, info.LogStartOffset
	if committed {
		res.LastStableOffset = part.LastStableOffset()
		if res.Data.Len() > 0 {
			aborted = mergeAborted(aborted, part.LocalAbortedTxns(offset, res.LastStableOffset))
		} else {
			aborted = nil
		}
	}
	return res, aborted, nil
}

// mergeAborted merges the remote tier's aborted transactions with the
// local log's (a transaction may be in both lists where the tiers
// overlap), in marker order.
func mergeAborted(a, b []producerstate.AbortedTxn) []producerstate.AbortedTxn {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clip(a), b...)
	slices.SortFunc(out, func(x, y producerstate.AbortedTxn) int {
		if c := cmp.Compare(x.LastOffset, y.LastOffset); c != 0 {
			return c
		}
		return cmp.Compare(x.ProducerID, y.ProducerID)
	})
	return slices.CompactFunc(out, func(x, y producerstate.AbortedTxn) bool {
		return x.ProducerID == y.ProducerID && x.FirstOffset == y.FirstOffset && x.LastOffset == y.LastOffset
	})
}
