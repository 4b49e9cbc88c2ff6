package netpath

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareFetch: v1-2
//
// Behavior:
//   - Share groups (KIP-932) on the partition leader (coordinator/share).
//     Each request goes through the member's share session: epoch 0 opens
//     one (replacing the member's previous session here, whose records
//     are released), later ones carry the epoch the last answer moved to
//     (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH otherwise),
//     -1 closes it after applying its acknowledgements. Partitions named
//     in the request join the session, forgotten ones leave it (the
//     member's records there are released).
//   - Acknowledgements (accept, release, reject, gap; renew only with
//     is_renew_ack) are applied first, per partition, all or nothing:
//     a record the member does not hold is INVALID_RECORD_STATE in
//     AcknowledgeErrorCode. Acknowledgements with epoch 0 are refused
//     (INVALID_SHARE_SESSION_EPOCH) as the session is new.
//   - Then every partition of the session is read from where its
//     share-partition can acquire (its first available record, else its
//     end), up to the last stable offset (share.isolation.level
//     read_committed, the default) or the high watermark; whole batches
//     go back with the acquired ranges and their delivery counts.
//     Control batches, aborted transactions' records and offsets the log
//     does not hold are archived, never acquired. max_records (v1+) caps
//     the records acquired over the request exactly (a large batch is
//     split among consumers, each skipping what it did not acquire);
//     max_bytes the bytes. Partitions are served round-robin, so one
//     busy partition does not starve the others.
//   - Long poll: with nothing acquired the request waits, up to max_wait
//     (2 min at most), for a fetched partition to change or a record to
//     be released, its lock to expire or a start offset to move.
//   - AcquisitionLockTimeoutMillis is the group's lock duration
//     (share.record.lock.duration.ms).
//   - v0 (Kafka 4.0 early access) is not served; franz-go needs v2.
//     share_acquire_mode (v2) needs nothing: both modes get the exact
//     record limit.
//   - READ on the group (top-level GROUP_AUTHORIZATION_FAILED) and on
//     each topic (TOPIC_AUTHORIZATION_FAILED for that partition).

func init() { register(78, 1, 2, handleShareFetch) }

// shareRound rotates the partition a share fetch starts at.
var shareRound atomic.Uint32

func handleShareFetch(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(code int16) reply {
		resp.ErrorCode = code
		return immediate(resp)
	}
	if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
		return fail(kerr.InvalidRequest.Code)
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, *req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	deadline := requestDeadline(time.Now(), req.MaxWaitMillis, 0)
	return reply{resolve: func(done <-chan struct{}) *response {
		s.shareFetch(r, req, resp, deadline, done)
		return &response{msg: resp}
	}}
}

func (s *Server) shareFetch(r *request, req *kmsg.ShareFetchRequest, resp *kmsg.ShareFetchResponse, deadline time.Time, done <-chan struct{}) {
	group, member := *req.GroupID, *req.MemberID
	now := time.Now()
	sreq := share.SessionRequest{Group: group, Member: member, Epoch: req.ShareSessionEpoch}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sreq.Add = append(sreq.Add, share.TP{TopicID: t.TopicID, Partition: p.Partition})
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			sreq.Forget = append(sreq.Forget, share.TP{TopicID: t.TopicID, Partition: p})
		}
	}
	sess, err := s.shares.Session(sreq, now)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = errorMessage(err)
		return
	}
	resp.AcquisitionLockTimeoutMillis = int32(s.shares.LockDuration(group).Milliseconds())
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	out := newShareFetchOut(resp)

	// Acknowledgements first.
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			rp := out.partition(t.TopicID, p.Partition)
			switch {
			case req.ShareSessionEpoch == share.OpenEpoch:
				rp.AcknowledgeErrorCode = kerr.InvalidShareSessionEpoch.Code
			case len(p.AcknowledgementBatches) > maxShareAckBatches:
				rp.AcknowledgeErrorCode = kerr.InvalidRequest.Code
			default:
				tg := s.shareTargetOf(r, img, fresh, group, t.TopicID, p.Partition)
				if tg.code != 0 {
					rp.AcknowledgeErrorCode = tg.code
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = tg.leader, tg.epoch
					continue
				}
				if err := s.shares.Acknowledge(tg.key, member, shareAcks(p.AcknowledgementBatches), now); err != nil {
					rp.AcknowledgeErrorCode = errorCode(err)
					rp.AcknowledgeErrorMessage = errorMessage(err)
				}
			}
		}
	}
	if sess.Final {
		s.shares.CloseSession(group, member, sess.Partitions)
		out.finish()
		return
	}
	if len(sess.Partitions) == 0 || req.MaxWaitMillis < 0 {
		out.finish()
		return
	}

	maxRecords := int(req.MaxRecords)
	if req.Version == 0 || maxRecords <= 0 {
		maxRecords = 500 // KIP-1206's default
	}
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	waker := engine.NewWaker()
	var watching []*engine.Partition
	defer func() {
		for _, p := range watching {
			p.Unwatch(waker)
		}
	}()
	start := int(shareRound.Add(1))
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		changed := s.shares.Changed()
		img, fresh = s.node.MetadataImage(), s.node.Fresh()
		now = time.Now()
		got, bytes := 0, int64(0)
		for i := range sess.Partitions {
			tp := sess.Partitions[(start+i)%len(sess.Partitions)]
			tg := s.shareTargetOf(r, img, fresh, group, tp.TopicID, tp.Partition)
			if tg.code != 0 {
				rp := out.partition(tp.TopicID, tp.Partition)
				rp.ErrorCode = tg.code
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = tg.leader, tg.epoch
				continue
			}
			if got >= maxRecords || bytes >= maxBytes {
				continue
			}
			rd, version := s.readShare(tg, member, int32(min(maxBytes-bytes, 1<<31-1)), maxRecords-got, waker, now)
			if !slices.Contains(watching, tg.part) {
				tg.part.Watch(waker, version)
				watching = append(watching, tg.part)
			}
			if rd.code != 0 {
				out.partition(tp.TopicID, tp.Partition).ErrorCode = rd.code
				continue
			}
			if len(rd.acquired) == 0 {
				continue
			}
			rp := out.partition(tp.TopicID, tp.Partition)
			rp.Records = rd.records
			for _, l := range rd.acquired {
				a := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				a.FirstOffset, a.LastOffset, a.DeliveryCount = l.First, l.Last, l.DeliveryCount
				rp.AcquiredRecords = append(rp.AcquiredRecords, a)
				got += int(l.Last - l.First + 1)
			}
			bytes += int64(len(rd.records))
		}
		if got > 0 || out.errors() {
			break
		}
		select {
		case <-waker.C():
		case <-changed:
		case <-timer.C:
			out.finish()
			return
		case <-done:
			out.finish()
			return
		}
	}
	out.finish()
}

// shareFetchOut collects a ShareFetch response's partitions, each once.
type shareFetchOut struct {
	resp  *kmsg.ShareFetchResponse
	index map[share.TP]*kmsg.ShareFetchResponseTopicPartition
	order []share.TP
}

func newShareFetchOut(resp *kmsg.ShareFetchResponse) *shareFetchOut {
	return &shareFetchOut{resp: resp, index: make(map[share.TP]*kmsg.ShareFetchResponseTopicPartition)}
}

func (o *shareFetchOut) partition(topicID [16]byte, p int32) *kmsg.ShareFetchResponseTopicPartition {
	tp := share.TP{TopicID: topicID, Partition: p}
	if rp := o.index[tp]; rp != nil {
		return rp
	}
	rp := &kmsg.ShareFetchResponseTopicPartition{}
	rp.Default()
	rp.Partition = p
	o.index[tp] = rp
	o.order = append(o.order, tp)
	return rp
}

// errors reports whether a partition got a fetch error (the long poll
// answers at once then, as Fetch does).
func (o *shareFetchOut) errors() bool {
	for _, rp := range o.index {
		if rp.ErrorCode != 0 {
			return true
		}
	}
	return false
}

// finish writes the collected partitions into the response, grouped by
// topic in first-seen order.
func (o *shareFetchOut) finish() {
	topics := map[[16]byte]int{}
	for _, tp := range o.order {
		i, ok := topics[tp.TopicID]
		if !ok {
			i = len(o.resp.Topics)
			topics[tp.TopicID] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.TopicID
			o.resp.Topics = append(o.resp.Topics, t)
		}
		o.resp.Topics[i].Partitions = append(o.resp.Topics[i].Partitions, *o.index[tp])
	}
}
