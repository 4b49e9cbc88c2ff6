package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteShareGroupOffsets: v0
//
// Behavior:
//   - Drops the share group's state for each named topic (all its
//     partitions): a consumer that comes back starts over as
//     share.auto.offset.reset says. The group must be a share group
//     (GROUP_ID_NOT_FOUND) without members (NON_EMPTY_GROUP); unknown
//     topics are UNKNOWN_TOPIC_OR_PARTITION.
//   - Each partition's state is marked deleted in __share_group_state
//     (at the next state epoch, which fences a leader elsewhere that
//     still holds it) before the answer; a failure is the topic's error.
//     Then the topic leaves the group's initialized topics (durable in
//     __consumer_offsets).
//   - DELETE on the group, READ on each topic.

func init() { register(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if err := s.checkEmptyShareGroup(r, metadata.OpDelete, req.GroupID, false); err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = groupErrorMessage(err, resp.ErrorCode)
		return immediate(resp)
	}
	img := s.node.MetadataImage()
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		mt, ok := img.Topic(rt.Topic)
		switch {
		case !s.authorize(r, metadata.OpRead, metadata.ResourceTopic, rt.Topic):
			t.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !ok:
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			t.TopicID = [16]byte(mt.ID)
			for i := range mt.Partitions {
				if err := s.shares.DeletePartition(share.Key{Group: req.GroupID, TopicID: [16]byte(mt.ID), Partition: int32(i)}); err != nil {
					t.ErrorCode, t.ErrorMessage = errorCode(err), errorMessage(err)
				}
			}
			if t.ErrorCode == 0 {
				if err := s.groups.ShareInitialized(req.GroupID, []group.TopicID{group.TopicID(mt.ID)}, true); err != nil {
					t.ErrorCode, t.ErrorMessage = errorCode(err), errorMessage(err)
				}
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return immediate(resp)
}
