package netpath

import (
	"time"

	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords: v0-2
//
// Behavior:
//   - Per partition the leader moves its log start offset up to offset
//     (-1: the high watermark); segments wholly below it are deleted, the
//     partially covered one stays, reads below the start answer
//     OFFSET_OUT_OF_RANGE, ListOffsets earliest answers the new start. The
//     start is persisted before the answer (engine/logstart.go).
//   - offset above the high watermark (or below -1): OFFSET_OUT_OF_RANGE;
//     an offset at or below the current start changes nothing.
//   - Answered with the low watermark: the smallest log start over the
//     leader and its ISR (replication.LeaderState.LowWatermark); followers
//     take the leader's start from fetch responses and report theirs in
//     the next fetch. As in Kafka's DelayedDeleteRecords the answer waits
//     until the low watermark reaches offset, the leadership ends
//     (NOT_LEADER_OR_FOLLOWER) or timeout_ms passes (REQUEST_TIMED_OUT,
//     low watermark -1). The wait polls every deleteRecordsPoll: the low
//     watermark moves on follower fetches, which come at most
//     replica.fetch.wait.max.ms apart.
//   - Not the leader: NOT_LEADER_OR_FOLLOWER; unknown topic or partition:
//     UNKNOWN_TOPIC_OR_PARTITION; internal (__) topics: INVALID_TOPIC_EXCEPTION;
//     with an authorizer, DELETE on the topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(21, 0, 2, handleDeleteRecords) }

const deleteRecordsPoll = 10 * time.Millisecond

// deleteWait is one partition whose answer waits for the low watermark.
type deleteWait struct {
	sp     *kmsg.DeleteRecordsResponseTopicPartition
	lead   Leadership
	target int64
}

func handleDeleteRecords(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
	return reply{resolve: func(done <-chan struct{}) *response {
		var waits []deleteWait
		resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
		for i, rt := range req.Topics {
			st := &resp.Topics[i]
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
			authorized := s.authorize(r, metadata.OpDelete, metadata.ResourceTopic, rt.Topic)
			for j, rp := range rt.Partitions {
				sp := &st.Partitions[j]
				*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.LowWatermark = rp.Partition, -1
				if !authorized {
					sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
					continue
				}
				if w, ok := s.deleteRecords(img, fresh, rt.Topic, rp, sp); ok {
					waits = append(waits, w)
				}
			}
		}
		s.awaitLowWatermarks(waits, deadline, done)
		return &response{msg: resp}
	}}
}

// deleteRecords moves one partition's log start and fills sp; ok when the
// answer must wait for the replicas' low watermark.
func (s *Server) deleteRecords(img *metadata.Image, fresh error, topic string, rp kmsg.DeleteRecordsRequestTopicPartition, sp *kmsg.DeleteRecordsResponseTopicPartition) (deleteWait, bool) {
	lc := s.leaderPartition(img, fresh, topic, rp.Partition, -1)
	if lc.code != 0 {
		sp.ErrorCode = lc.code
		return deleteWait{}, false
	}
	if isInternalTopic(topic) {
		sp.ErrorCode = kerr.InvalidTopicException.Code
		return deleteWait{}, false
	}
	var lead Leadership
	if s.repl != nil && lc.part.Replicated() {
		if lead = s.repl.Leader(topic, rp.Partition); lead == nil {
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			return deleteWait{}, false
		}
	}
	target := rp.Offset
	if target == -1 {
		target = lc.part.Info().HighWatermark
	}
	if target < 0 {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return deleteWait{}, false
	}
	start, err := lc.part.AdvanceLogStart(target)
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return deleteWait{}, false
	}
	s.log.Info("deleted records", "topic", topic, "partition", rp.Partition, "log_start", start)
	if lead == nil {
		sp.LowWatermark = start // RF=1: the leader is every replica
		return deleteWait{}, false
	}
	return deleteWait{sp: sp, lead: lead, target: target}, true
}

// awaitLowWatermarks answers every wait: low watermark reached, the
// leadership ended, the deadline passed, or the connection went away.
func (s *Server) awaitLowWatermarks(waits []deleteWait, deadline time.Time, done <-chan struct{}) {
	tick := time.NewTicker(deleteRecordsPoll)
	defer tick.Stop()
	for {
		pending := waits[:0]
		for _, w := range waits {
			lw, err := w.lead.LowWatermark()
			switch {
			case err != nil:
				w.sp.ErrorCode = replErrorCode(err)
			case lw != replication.NoOffset && lw >= w.target:
				w.sp.LowWatermark = lw
			default:
				pending = append(pending, w)
			}
		}
		waits = pending
		if len(waits) == 0 {
			return
		}
		if !time.Now().Before(deadline) {
			for _, w := range waits {
				w.sp.ErrorCode = kerr.RequestTimedOut.Code
			}
			return
		}
		select {
		case <-tick.C:
		case <-done:
			return
		}
	}
}
