package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-9
//
// Behavior:
//   - Bridged to group.Manager.FetchOffsets: the committed offset per
//     listed partition (-1 when none), or with a null topic list (v2+)
//     every committed partition of the group.
//   - v8 batches groups (KIP-709); each group is routed on its own, so one
//     request may mix groups this broker coordinates and NOT_COORDINATOR.
//   - v0-1 have no top-level error code: a group-level error is repeated
//     on every partition.
//   - require_stable (v7+, KIP-447): a partition with a transactional
//     offset commit still awaiting its marker answers
//     UNSTABLE_OFFSET_COMMIT (offset -1), which the consumer retries;
//     without it the committed offset is returned and pending ones are
//     not seen.
//   - v9 (KIP-848) names the consumer-group member asking: member id and
//     epoch go to the Manager, which answers STALE_MEMBER_EPOCH or
//     UNKNOWN_MEMBER_ID for a member that is not at that epoch; epoch -1
//     (or no member id) skips the check. v10 (topic ids) is not served.

func init() { register(9, 0, 9, handleOffsetFetch) }

type offsetFetchTopic struct {
	topic      string
	partitions []int32
}

func handleOffsetFetch(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	fetch := func(groupID string, topics []offsetFetchTopic, all bool, member group.FetchOptions) ([]group.FetchedOffset, error) {
		if err := s.groups.Stale(); err != nil {
			return nil, err
		}
		if !s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, groupID) {
			return nil, errGroupAuthz
		}
		var tps []group.TopicPartition
		if !all {
			tps = []group.TopicPartition{}
			for _, t := range topics {
				for _, p := range t.partitions {
					tps = append(tps, group.TopicPartition{Topic: t.topic, Partition: p})
				}
			}
		}
		member.RequireStable = req.Version >= 7 && req.RequireStable
		offs, err := s.groups.FetchOffsetsOpts(groupID, tps, member)
		if s.cfg.Security.Authorizer {
			// Topics the principal may not DESCRIBE: named ones get
			// TOPIC_AUTHORIZATION_FAILED, unnamed (all) are left out.
			kept := offs[:0]
			for _, o := range offs {
				if !s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, o.Topic) {
					if all {
						continue
					}
					o.Offset, o.Metadata, o.Err = -1, "", errTopicAuthz
				}
				kept = append(kept, o)
			}
			offs = kept
		}
		return offs, err
	}
	if req.Version >= 8 {
		for _, g := range req.Groups {
			var topics []offsetFetchTopic
			for _, t := range g.Topics {
				topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
			}
			member := group.FetchOptions{MemberEpoch: -1}
			if req.Version >= 9 && g.MemberID != nil {
				member.MemberID, member.MemberEpoch = *g.MemberID, g.MemberEpoch
			}
			offs, err := fetch(g.Group, topics, g.Topics == nil, member)
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			rg.ErrorCode = errorCode(err)
			for _, o := range offs {
				if n := len(rg.Topics); n == 0 || rg.Topics[n-1].Topic != o.Topic {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = o.Topic
					rg.Topics = append(rg.Topics, rt)
				}
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
				rp.ErrorCode = errorCode(o.Err)
				md := o.Metadata
				rp.Metadata = &md
				rt := &rg.Topics[len(rg.Topics)-1]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return immediate(resp)
	}
	var topics []offsetFetchTopic
	for _, t := range req.Topics {
		topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
	}
	all := req.Topics == nil && req.Version >= 2
	offs, err := fetch(req.Group, topics, all, group.FetchOptions{MemberEpoch: -1})
	if err != nil {
		code := errorCode(err)
		if req.Version >= 2 {
			resp.ErrorCode = code
			return immediate(resp)
		}
		// v0-1: per partition.
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return immediate(resp)
	}
	for _, o := range offs {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != o.Topic {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = o.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
		rp.ErrorCode = errorCode(o.Err)
		md := o.Metadata
		rp.Metadata = &md
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return immediate(resp)
}
