package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-3
//
// Behavior:
//   - Sent to the group's coordinator (not the transaction's) after
//     AddOffsetsToTxn; bridged to group.Manager.CommitTxnOffsets. The
//     offsets are appended to the group's __consumer_offsets partition as
//     one transactional batch of the producer and stay pending (invisible
//     to OffsetFetch; require_stable fetches get UNSTABLE_OFFSET_COMMIT)
//     until the transaction's marker lands on that partition
//     (27_write_txn_markers.go): commit makes them the group's committed
//     offsets, abort drops them.
//   - The answer waits (in resolve) until the batch is durable, as
//     OffsetCommit's: flushed and, on a replicated offsets partition,
//     covered by the high watermark.
//   - v3 carries the consumer's generation, member id and instance id
//     (KIP-447) and is fenced by the group like OffsetCommit
//     (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID); v0-2
//     commit without group membership. A producer epoch older than the
//     producer's open transaction in the group, or than the log has seen,
//     is INVALID_PRODUCER_EPOCH; v0-2 get INVALID_PRODUCER_EPOCH for
//     PRODUCER_FENCED as well (KIP-588).
//   - With ACLs on: WRITE on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
//     (GROUP_AUTHORIZATION_FAILED) on every partition; partitions of topics
//     without READ get TOPIC_AUTHORIZATION_FAILED, the rest are committed.
//   - A group-level failure (routing, membership) is reported on every
//     partition, as Kafka does.

func init() { register(28, 0, 3, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	knowsFenced := req.Version >= 3
	cr := group.TxnOffsetCommitRequest{
		TransactionalID: req.TransactionalID, GroupID: req.Group,
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Generation: -1,
	}
	if req.Version >= 3 {
		cr.Generation, cr.MemberID, cr.GroupInstanceID = req.Generation, req.MemberID, req.InstanceID
	}
	var denied []bool // by request partition, for topics without READ
	for _, t := range req.Topics {
		readable := s.authorize(r, metadata.OpRead, metadata.ResourceTopic, t.Topic)
		for _, p := range t.Partitions {
			denied = append(denied, !readable)
			if !readable {
				continue
			}
			o := group.CommitOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			cr.Offsets = append(cr.Offsets, o)
		}
	}
	fill := func(res []group.PartitionError, all error) *response {
		errs := commitErrors(denied, res, all)
		i := 0
		for _, t := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = p.Partition
				sp.ErrorCode = txnErrorCode(errs[i], knowsFenced)
				i++
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return &response{msg: resp}
	}
	if err := s.groups.Stale(); err != nil {
		return reply{resolve: func(<-chan struct{}) *response { return fill(nil, err) }}
	}
	switch {
	case !s.authorize(r, metadata.OpWrite, metadata.ResourceTransactionalID, req.TransactionalID):
		return immediate(fill(nil, errTxnIDAuthz).msg)
	case !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group):
		return immediate(fill(nil, errGroupAuthz).msg)
	case len(cr.Offsets) == 0:
		return immediate(fill(nil, nil).msg)
	}
	f := s.groups.CommitTxnOffsets(cr)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		return fill(res.Partitions, nil)
	}}
}

// commitErrors spreads an offset commit's answers over the request's
// partitions, in request order: all, when set, answers every partition;
// a partition of a topic the principal may not READ gets
// TOPIC_AUTHORIZATION_FAILED; the others take the coordinator's answers
// (res, for the committed partitions only) in turn.
func commitErrors(denied []bool, res []group.PartitionError, all error) []error {
	errs := make([]error, len(denied))
	j := 0
	for i, d := range denied {
		switch {
		case all != nil:
			errs[i] = all
		case d:
			errs[i] = errTopicAuthz
		case j < len(res):
			errs[i] = res[j].Err
			j++
		}
	}
	return errs
}
