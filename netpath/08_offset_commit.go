package netpath

import (
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-8
//
// Behavior:
//   - Bridged to group.Manager.CommitOffsets. Members name their
//     generation and member id; generation -1 with no member id is a
//     "simple" commit (v0 has neither: it is always simple).
//   - The response waits (in resolve) until the offset records are durable
//     in __consumer_offsets: flushed per the fsync policy and, on a
//     replicated offsets partition, covered by the high watermark (the
//     acks=all purgatory). An ISR below min.insync.replicas, or one that
//     does not catch up within 5 s, fails the commit with
//     COORDINATOR_NOT_AVAILABLE (Kafka's mapping of NOT_ENOUGH_REPLICAS
//     and REQUEST_TIMED_OUT for OffsetCommit); lost leadership with
//     NOT_COORDINATOR.
//   - The per-partition commit timestamp (v1) and retention time (v2-4)
//     are ignored: retention is the broker's (offsets.retention).
//   - A group-level failure (routing, unknown member, generation) is
//     reported on every partition, as Kafka does.

func init() { register(8, 0, 8, handleOffsetCommit) }

func handleOffsetCommit(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.OffsetCommitRequest{Group: req.Group, Generation: -1, InstanceID: req.InstanceID}
	if req.Version >= 1 {
		cr.Generation, cr.MemberID = req.Generation, req.MemberID
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := group.CommitOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 6 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			cr.Offsets = append(cr.Offsets, o)
		}
	}
	fill := func(res []group.PartitionError, all error) *response {
		i := 0
		for _, t := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = p.Partition
				err := all
				if err == nil && i < len(res) {
					err = res[i].Err
				}
				sp.ErrorCode = errorCode(err)
				i++
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return &response{msg: resp}
	}
	if err := s.groups.stale(); err != nil {
		return reply{resolve: func(<-chan struct{}) *response { return fill(nil, err) }}
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group) {
		return reply{resolve: func(<-chan struct{}) *response { return fill(nil, errGroupAuthz) }}
	}
	// Partitions of topics the principal may not READ get
	// TOPIC_AUTHORIZATION_FAILED; the rest are committed.
	var deniedAt []int
	kept := cr.Offsets[:0:0]
	for i, o := range cr.Offsets {
		if s.authorize(r, metadata.OpRead, metadata.ResourceTopic, o.Topic) {
			kept = append(kept, o)
		} else {
			deniedAt = append(deniedAt, i)
		}
	}
	if len(deniedAt) > 0 {
		all := len(cr.Offsets)
		cr.Offsets = kept
		inner := fill
		fill = func(res []group.PartitionError, err error) *response {
			merged := make([]group.PartitionError, all)
			j, d := 0, 0
			for i := range merged {
				if d < len(deniedAt) && deniedAt[d] == i {
					merged[i].Err = errTopicAuthz
					d++
					continue
				}
				if err == nil && j < len(res) {
					merged[i] = res[j]
				} else {
					merged[i].Err = err
				}
				j++
			}
			return inner(merged, nil)
		}
		if len(kept) == 0 {
			return reply{resolve: func(<-chan struct{}) *response { return fill(nil, nil) }}
		}
	}
	f := s.groups.mgr.CommitOffsets(cr)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(f, done)
		if !ok {
			return nil
		}
		return fill(res.Partitions, nil)
	}}
}
