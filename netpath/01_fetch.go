package netpath

import (
	"sync"
	"time"

	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/replication"
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
//     (capped at 2 min); then it answers with what there is. Each
//     partition's change notification is taken before it is read, so an
//     advance between the read and the wait still wakes it.
//   - max_bytes and partition_max_bytes are honoured, except that the first
//     batch of the response is always returned whole (KIP-74).
//   - Record data are file ranges sent with sendfile on plaintext listeners
//     (copied through user space on TLS or with --fetch-copy); the response
//     frame and per-partition headers are encoded here (fetch_encode.go).
//   - Fetch sessions (KIP-227) are not created: session id 0 tells clients
//     to keep sending full requests; an unknown session id gets
//     FETCH_SESSION_ID_NOT_FOUND.
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

func init() { register(1, 4, 12, handleFetch) }

func handleFetch(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.FetchRequest)
	// Authorization is decided once, on the reader: a replica fetch needs
	// CLUSTER_ACTION (a forged replica id gains nothing), a consumer READ
	// on each topic.
	var denied map[string]bool
	if s.cfg.Security.Authorizer {
		if req.ReplicaID >= 0 {
			if !s.authorizeCluster(r, metadata.OpClusterAction) {
				return fetchErrorReply(req, kerr.ClusterAuthorizationFailed.Code)
			}
		} else {
			for _, t := range req.Topics {
				name := t.Topic
				if req.Version >= 13 {
					if info, ok := s.topicByID(t.TopicID); ok {
						name = info.Name
					}
				}
				if !s.authorize(r, metadata.OpRead, metadata.ResourceTopic, name) {
					if denied == nil {
						denied = map[string]bool{}
					}
					denied[name] = true
				}
			}
		}
	}
	deadline := requestDeadline(time.Now(), req.MaxWaitMillis, 0)
	return reply{resolve: func(done <-chan struct{}) *response {
		return s.fetch(req, deadline, done, denied)
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
}

type fetchTopic struct {
	name       string
	id         [16]byte
	partitions []fetchPartition
}

// fetch answers req, long-polling until deadline for min_bytes.
func (s *Server) fetch(req *kmsg.FetchRequest, deadline time.Time, done <-chan struct{}, denied map[string]bool) *response {
	if req.Version >= 7 && req.SessionID != 0 {
		// We never hand out session ids, so any non-zero id is stale.
		return &response{parts: []responsePart{{buf: encodeFetchError(req.Version, kerr.FetchSessionIDNotFound.Code)}}, flexible: req.Version >= 12}
	}
	for {
		topics, total, hasErr, watch := s.readFetch(req, denied)
		if total >= int64(req.MinBytes) || hasErr || req.MaxWaitMillis <= 0 || !time.Now().Before(deadline) || len(watch) == 0 {
			return s.fetchResponse(req, topics)
		}
		releaseFetch(topics)
		if !waitAny(watch, deadline, done) {
			if isClosed(done) {
				return nil
			}
			// Deadline: one more read answers with whatever arrived.
			topics, _, _, _ = s.readFetch(req, denied)
			return s.fetchResponse(req, topics)
		}
	}
}

// readFetch reads every requested partition once. It returns the file
// ranges (held until released), their total size, whether any partition
// has an error, and the change channels to wait on.
func (s *Server) readFetch(req *kmsg.FetchRequest, denied map[string]bool) ([]fetchTopic, int64, bool, []<-chan struct{}) {
	var (
		topics []fetchTopic
		total  int64
		hasErr bool
		watch  []<-chan struct{}
	)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		ft := fetchTopic{name: rt.Topic, id: rt.TopicID}
		if req.Version >= 13 {
			if info, ok := img.TopicByID(rt.TopicID); ok {
				ft.name = info.Name
			}
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
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
				limit = remaining
			}
			if limit < 0 {
				limit = 0
			}
			read := part.Read
			var aborted []producerstate.AbortedTxn
			if req.IsolationLevel == 1 && req.ReplicaID < 0 {
				read = func(off int64, n int32, minOne bool) (engine.ReadResult, error) {
					res, ab, err := part.ReadCommitted(off, n, minOne)
					aborted = ab
					return res, err
				}
			}
			if req.ReplicaID >= 0 && s.repl != nil && part.Replicated() {
				div, err := s.repl.FollowerFetch(ft.name, rp.Partition, replication.FollowerFetch{
					ReplicaID: req.ReplicaID, CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
					FetchOffset: rp.FetchOffset, LastFetchedEpoch: rp.LastFetchedEpoch,
				})
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
				read = func(off int64, n int32, _ bool) (engine.ReadResult, error) { return part.ReadReplica(off, n) }
			}
			// The change channel is taken before the read: an advance
			// that lands after the read closes this channel, so a long
			// poll cannot sleep through it (taken after, it would be the
			// next one and the advance would be missed).
			changed := part.Changed()
			res, err := read(rp.FetchOffset, int32(limit), total == 0)
			if afterFetchRead != nil {
				afterFetchRead()
			}
			if err != nil {
				info := part.Info()
				fp.errorCode = errorCode(err)
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
			fp.aborted = aborted
			if res.Data.Len() > 0 {
				fp.data = res.Data
				total += int64(res.Data.Len())
			} else {
				res.Data.Release()
			}
			watch = append(watch, changed)
			ft.partitions = append(ft.partitions, fp)
		}
		topics = append(topics, ft)
	}
	return topics, total, hasErr, watch
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

func (s *Server) fetchResponse(req *kmsg.FetchRequest, topics []fetchTopic) *response {
	s.metrics.fetched(s, req.ReplicaID >= 0, topics)
	resp := &response{parts: encodeFetchResponse(req.Version, req.IsolationLevel, topics), flexible: req.Version >= 12}
	resp.release = append(resp.release, func() { releaseFetch(topics) })
	return resp
}

// waitAny blocks until one of chans is closed (true), or the deadline
// passes or done is closed (false).
func waitAny(chans []<-chan struct{}, deadline time.Time, done <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timer.C:
			return false
		case <-done:
			return false
		}
	}
	woke := make(chan struct{})
	stop := make(chan struct{})
	var once sync.Once
	for _, ch := range chans {
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				once.Do(func() { close(woke) })
			case <-stop:
			}
		}(ch)
	}
	defer close(stop)
	select {
	case <-woke:
		return true
	case <-timer.C:
		return false
	case <-done:
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
