package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0
//
// Behavior:
//   - Bridged to group.Manager.DeleteOffsets (KIP-496): an Empty group
//     loses the listed offsets; a consumer group with members keeps those
//     of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC per partition).
//   - The answer waits (in resolve) until the tombstones are durable.

func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if err := s.groups.Stale(); err != nil {
		resp.ErrorCode = errorCode(err)
		return immediate(resp)
	}
	if !s.authorize(r, metadata.OpDelete, metadata.ResourceGroup, req.Group) {
		resp.ErrorCode = errorCode(errGroupAuthz)
		return immediate(resp)
	}
	var tps []group.TopicPartition
	for _, t := range req.Topics {
		if !s.authorize(r, metadata.OpRead, metadata.ResourceTopic, t.Topic) {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errorCode(errTopicAuthz)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		for _, p := range t.Partitions {
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	f := s.groups.DeleteOffsets(req.Group, tps)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		resp.ErrorCode = errorCode(res.Err)
		if res.Err != nil {
			return &response{msg: resp}
		}
		for _, pe := range res.Partitions {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != pe.Topic {
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = pe.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pe.Partition, errorCode(pe.Err)
			rt := &resp.Topics[len(resp.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		return &response{msg: resp}
	}}
}
