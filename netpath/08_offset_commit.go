package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-9
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
//   - For a consumer (KIP-848) group the generation is the member epoch.
//     A stale one is STALE_MEMBER_EPOCH from v9 on and ILLEGAL_GENERATION
//     before (the client cannot know the newer code). v10 (topic ids
//     instead of names) is not served.

func init() { register(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.OffsetCommitRequest{Version: req.Version, Group: req.Group, Generation: -1, InstanceID: req.InstanceID}
	if req.Version >= 1 {
		cr.Generation, cr.MemberID = req.Generation, req.MemberID
	}
	// Partitions of topics the principal may not READ get
	// TOPIC_AUTHORIZATION_FAILED; the rest are committed.
	var denied []bool // by request partition
	for _, t := range req.Topics {
		readable := s.authorize(r, metadata.OpRead, metadata.ResourceTopic, t.Topic)
		for _, p := range t.Partitions {
			denied = append(denied, !readable)
			if !readable {
				continue
			}
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
		errs := commitErrors(denied, res, all)
		i := 0
		for _, t := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = p.Partition
				sp.ErrorCode = commitErrorCode(errs[i], req.Version)
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
	case !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group):
		return immediate(fill(nil, errGroupAuthz).msg)
	case len(cr.Offsets) == 0:
		return immediate(fill(nil, nil).msg)
	}
	f := s.groups.CommitOffsets(cr)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		return fill(res.Partitions, nil)
	}}
}
