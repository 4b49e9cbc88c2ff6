package netpath

import (
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
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
//     low watermark -1). Each partition waits in the replication
//     purgatory (replication.Purgatory.AddLow), woken when a follower
//     fetch reports a new log start or the ISR changes (Update.Low), not
//     by polling; the resolve goroutine of the connection waits on the
//     waiters one after the other, all parked at once and all answered
//     by the deadline at the latest. A client that goes away withdraws
//     them.
//   - Not the leader: NOT_LEADER_OR_FOLLOWER; unknown topic or partition:
//     UNKNOWN_TOPIC_OR_PARTITION; internal (__) topics: INVALID_TOPIC_EXCEPTION;
//     with an authorizer, DELETE on the topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(21, 0, 2, handleDeleteRecords) }

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
	arrived := time.Now()
	deadline := arrived.Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
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
		parkedAt := time.Now()
		ok := s.awaitLowWatermarks(waits, arrived, deadline, done)
		r.park(parkedAt)
		if !ok {
			return nil
		}
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

// awaitLowWatermarks parks every wait in the purgatory, then fills each
// answer as its waiter completes: low watermark reached, the leadership
// ended, or the deadline passed (the purgatory answers every waiter by
// then). false: the connection went away and the waits were withdrawn.
func (s *Server) awaitLowWatermarks(waits []deleteWait, arrived, deadline time.Time, done <-chan struct{}) bool {
	ws := make([]*replication.Waiter, len(waits))
	for i, w := range waits {
		ws[i] = w.lead.AwaitLowWatermark(w.target, arrived, deadline)
	}
	for i, pw := range ws {
		select {
		case <-pw.Done():
		case <-done:
			for _, pw := range ws[i:] {
				s.repl.Cancel(pw)
			}
			return false
		}
		if err := pw.Err(); err != nil {
			waits[i].sp.ErrorCode = replErrorCode(err)
			continue
		}
		waits[i].sp.LowWatermark = pw.LowWatermark()
	}
	return true
}
