package netpath

import (
	"fmt"
	"github.com/ringlog/ringlog/controller/metadata"
	"time"

	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v0-10 advertised, v3-10 handled
//
// Behavior:
//   - v0-2 (message sets) are answered with UNSUPPORTED_VERSION per
//     partition; v0 is advertised only because librdkafka stops compressing
//     when the advertised minimum is above 0.
//   - Appends run on the connection's reader goroutine, in request order,
//     so pipelined requests keep their order; the response waits until
//     every append is durable per the fsync policy (on the writer
//     goroutine, or on the reader itself when nothing else is queued or
//     read ahead: conn.answerInline),
//     bounded by timeout_ms counted from the request's arrival
//     (REQUEST_TIMED_OUT after that; timeout_ms <= 0 means 30 s, and more
//     than 2 min is capped), so a request queued behind a slow one on the
//     same connection is not held longer than its own timeout.
//   - acks=0 appends and sends nothing back; acks must be -1, 0 or 1.
//   - Unknown topics are auto-created (through the controller) when the
//     broker allows it.
//   - Only the partition's leader appends; other brokers, and a broker
//     whose metadata may be stale, answer NOT_LEADER_OR_FOLLOWER. From v10
//     (KIP-951) such a partition carries CurrentLeader (the leader and
//     epoch this broker's image knows when answering) and the response
//     lists those leaders' endpoints for the listener the request came on,
//     so a client moves the partition without a metadata round trip; with
//     no live leader known the fields keep their -1 defaults and the
//     client refreshes metadata as before.
//   - Replicated partitions (RF>1): acks=-1 is refused with
//     NOT_ENOUGH_REPLICAS before appending when the ISR is below
//     min.insync.replicas, and answered once the high watermark covers the
//     append (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below it
//     meanwhile; NOT_LEADER_OR_FOLLOWER if the leader epoch the append was
//     made under ended first, even if this broker leads again since, or
//     while the local write was still pending).
//   - Internal topics (names starting "__") cannot be produced to.
//   - Transactional produce (KIP-98): batches with the transactional
//     attribute are accepted only in a request that names a transactional
//     id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request,
//     as Kafka answers); the partition's producer state checks their
//     epoch and sequence and opens the producer's transaction there, which
//     holds the last stable offset until the coordinator's marker. That
//     the partition was added to the transaction is not verified
//     (KIP-890 is not implemented).

func init() { register(0, 0, 10, handleProduce) }

func handleProduce(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	// Each partition's records are framed once, here; the view serves the
	// transactional check below and the engine's append (validation and
	// producer state).
	sets := parseProduceRecords(req)
	var topLevel int16
	var topMsg string
	switch {
	case req.Version < 3:
		topLevel, topMsg = kerr.UnsupportedVersion.Code, "produce v0-v2 (message sets) is not supported; use v3+"
	case req.Acks != -1 && req.Acks != 0 && req.Acks != 1:
		topLevel, topMsg = kerr.InvalidRequiredAcks.Code, fmt.Sprintf("acks %d must be -1, 0 or 1", req.Acks)
	case req.TransactionID == nil && hasTransactionalBatches(sets):
		topLevel, topMsg = kerr.TransactionalIDAuthorizationFailed.Code, "transactional batches need a transactional id"
	case req.TransactionID != nil && !s.authorize(r, metadata.OpWrite, metadata.ResourceTransactionalID, *req.TransactionID):
		topLevel, topMsg = kerr.TransactionalIDAuthorizationFailed.Code, "not authorized to write with this transactional id"
	}

	arrived := time.Now()
	deadline := requestDeadline(arrived, req.TimeoutMillis, defaultProduceWait)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	type waiting struct {
		t, p  int
		w     engine.AppendWaiter
		lp    Leadership // acks=all on a replicated partition: wait for the HW
		epoch int32      // lp's leader epoch when the append was made
		// ended is closed when the leadership the append was made under
		// ends (nil on an unreplicated partition): a local write still
		// pending then (it may be truncated away) is answered at once.
		ended <-chan struct{}
	}
	var waits []waiting
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			st.Partitions = append(st.Partitions, sp)
			setErr := func(code int16, msg string) {
				p := &st.Partitions[len(st.Partitions)-1]
				p.ErrorCode = code
				if req.Version >= 8 && msg != "" {
					p.ErrorMessage = &msg
				}
			}
			if topLevel != 0 {
				setErr(topLevel, topMsg)
				continue
			}
			if isInternalTopic(rt.Topic) {
				setErr(kerr.InvalidTopicException.Code, "internal topics cannot be produced to")
				continue
			}
			if !s.authorize(r, metadata.OpWrite, metadata.ResourceTopic, rt.Topic) {
				setErr(kerr.TopicAuthorizationFailed.Code, "")
				continue
			}
			if err := engine.ValidateTopicName(rt.Topic); err != nil {
				setErr(errorCode(err), err.Error())
				continue
			}
			var ok bool
			if _, img, ok = s.cluster.LookupTopic(img, rt.Topic); !ok {
				if !s.authorizeCluster(r, metadata.OpCreate) && !s.authorize(r, metadata.OpCreate, metadata.ResourceTopic, rt.Topic) {
					setErr(kerr.TopicAuthorizationFailed.Code, "not authorized to create the topic")
					continue
				}
				created, err := s.autoCreate(rt.Topic)
				if err != nil {
					setErr(errorCode(err), err.Error())
					continue
				}
				img, fresh = created, s.node.Fresh()
			}
			lc := s.leaderPartition(img, fresh, rt.Topic, rp.Partition, -1)
			if lc.code != 0 {
				setErr(lc.code, "")
				continue
			}
			part := lc.part
			var lp Leadership
			var epoch int32
			var ended <-chan struct{}
			if s.repl != nil && (part.Replicated() || len(lc.info.Replicas) > 1) {
				lp = s.repl.Leader(rt.Topic, rp.Partition)
				if lp == nil && part.Failed() == nil {
					// The image says we lead a replicated partition and
					// replication has not taken it up: a topic created a
					// moment ago whose reconcile pass is still running
					// (its log exists, its leader epoch is being
					// stamped). Catch up now, as leaderPartition does for
					// a log not created yet, rather than answer
					// NOT_LEADER_OR_FOLLOWER, which clients retry only
					// after their backoff (librdkafka's 100 ms). The
					// image's replica count, not only the log's flag,
					// decides: a log the pass has not marked replicated
					// yet must not take an acks=all append as RF=1.
					if rerr := s.cluster.Reconcile(); rerr != nil {
						s.log.Warn("reconcile", "err", rerr)
					}
					lp = s.repl.Leader(rt.Topic, rp.Partition)
				}
				if lp == nil {
					// The image says we lead, replication has not caught up.
					setErr(kerr.NotLeaderForPartition.Code, "")
					continue
				}
				var err error
				if epoch, err = lp.CheckProduce(req.Acks); err != nil {
					setErr(replErrorCode(err), err.Error())
					continue
				}
				ended = lp.Ended()
				if req.Acks != -1 {
					lp = nil
				}
			}
			// The engine takes ownership of Records: the request frame
			// is not reused after decoding, so no copy is needed.
			w, err := part.AppendParsed(sets[ti][pi])
			if err != nil {
				setErr(errorCode(err), err.Error())
				continue
			}
			waits = append(waits, waiting{t: ti, p: len(st.Partitions) - 1, w: w, lp: lp, epoch: epoch, ended: ended})
		}
		resp.Topics = append(resp.Topics, st)
	}

	if req.Acks == 0 {
		return reply{noResponse: true, produced: sets}
	}
	return reply{produced: sets, resolve: func(done <-chan struct{}) *response {
		t := r.conn.resolveTimer(deadline)
		defer t.Stop()
		timer := t.C
		timedOut := false
		for _, wt := range waits {
			sp := &resp.Topics[wt.t].Partitions[wt.p]
			setErr := func(err error) {
				sp.ErrorCode = replErrorCode(err)
				if req.Version >= 8 {
					sp.ErrorMessage = errorMessage(err)
				}
			}
			if !timedOut {
				parkedAt := time.Now()
				select {
				case <-wt.w.Done():
					r.park(parkedAt)
				case <-wt.ended:
					r.park(parkedAt)
					select {
					case <-wt.w.Done(): // written anyway: answer as usual
					default:
						// Leadership moved while the write was pending:
						// the new leader may truncate it; the client
						// retries.
						setErr(fmt.Errorf("%s-%d: leadership ended during the write: %w", resp.Topics[wt.t].Topic, sp.Partition, replication.ErrNotLeaderOrFollower))
						continue
					}
				case <-timer:
					r.park(parkedAt)
					timedOut = true
				case <-done:
					return nil
				}
			}
			if timedOut {
				// The bytes may still become durable; the client must
				// treat the outcome as unknown, as with Kafka.
				select {
				case <-wt.w.Done():
				default:
					sp.ErrorCode = kerr.RequestTimedOut.Code
					continue
				}
			}
			res, err := wt.w.Result()
			if err == nil && wt.lp != nil && !timedOut {
				// acks=all: wait until the HW passes our last offset.
				pw := wt.lp.AwaitHW(wt.epoch, res.LastOffset, arrived, deadline)
				parkedAt := time.Now()
				select {
				case <-pw.Done():
					r.park(parkedAt)
					err = pw.Err()
				case <-timer:
					r.park(parkedAt)
					timedOut = true
					s.repl.Cancel(pw)
					err = replication.ErrRequestTimedOut
				case <-done:
					s.repl.Cancel(pw)
					return nil
				}
			} else if err == nil && wt.lp != nil {
				err = replication.ErrRequestTimedOut
			}
			if err != nil {
				setErr(err)
				continue
			}
			sp.BaseOffset = res.BaseOffset
			sp.LogAppendTime = res.LogAppendTime
			sp.LogStartOffset = res.LogStartOffset
		}
		s.addLeaderHints(r, resp)
		return &response{msg: resp}
	}}
}

// addLeaderHints fills KIP-951's CurrentLeader of every
// NOT_LEADER_OR_FOLLOWER partition of a v10+ response, and the endpoints of
// the leaders named. The image is read when answering, not when the
// request arrived: a leadership that ended during the write has usually
// been handed over by then.
func (s *Server) addLeaderHints(r *request, resp *kmsg.ProduceResponse) {
	if resp.Version < 10 {
		return
	}
	var img *metadata.Image
	// Read once, on the first refusal: an answer without one allocates
	// nothing here.
	var live map[int32]brokerEndpoint
	var named map[int32]bool
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if img == nil {
				img, live, named = s.node.MetadataImage(), map[int32]brokerEndpoint{}, map[int32]bool{}
				for _, be := range s.liveBrokers(img, r.conn.l) {
					live[be.id] = be
				}
			}
			info, ok := img.Partition(t.Topic, p.Partition)
			if !ok {
				continue
			}
			// A leader without a live endpoint on this listener (none,
			// fenced, or not listening here) is no use as a hint.
			be, ok := live[info.Leader]
			if !ok {
				continue
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = info.Leader, info.LeaderEpoch
			if !named[be.id] {
				named[be.id] = true
				b := kmsg.NewProduceResponseBroker()
				b.NodeID, b.Host, b.Port, b.Rack = be.id, be.host, be.port, be.rack
				resp.Brokers = append(resp.Brokers, b)
			}
		}
	}
}

// parseProduceRecords frames the record batches of every partition of a
// v3+ request (older versions carry message sets, which the handler
// refuses), indexed like req.Topics[ti].Partitions[pi].
func parseProduceRecords(req *kmsg.ProduceRequest) [][]records.Set {
	if req.Version < 3 {
		return nil
	}
	n := 0
	for ti := range req.Topics {
		n += len(req.Topics[ti].Partitions)
	}
	flat := make([]records.Set, n) // one allocation for the request
	sets := make([][]records.Set, len(req.Topics))
	// The batch views share one array too, sized for one batch per
	// partition (what clients send); a partition with more takes the room
	// left, or gets its own array once that is used up.
	batches := make([]records.Batch, 0, n)
	for ti := range req.Topics {
		ps := req.Topics[ti].Partitions
		sets[ti], flat = flat[:len(ps):len(ps)], flat[len(ps):]
		for pi := range ps {
			free := batches[len(batches):len(batches):cap(batches)]
			set := records.ParseSetInto(ps[pi].Records, free)
			if len(set.Batches) <= cap(free) {
				batches = batches[:len(batches)+len(set.Batches)]
			}
			sets[ti][pi] = set
		}
	}
	return sets
}

// hasTransactionalBatches reports whether any batch of the request has the
// transactional attribute. Sizes are not trusted: a malformed tail ends
// the scan and is left for the engine's validation to refuse.
func hasTransactionalBatches(sets [][]records.Set) bool {
	for _, t := range sets {
		for _, p := range t {
			if p.HasTransactional() {
				return true
			}
		}
	}
	return false
}
