package netpath

import (
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterShareGroupOffsets: v0
//
// Behavior:
//   - Sets the share-partition start offset of each named partition,
//     forgetting its in-flight records: consumption resumes there. The
//     group must have no members (NON_EMPTY_GROUP); an unknown group
//     becomes an empty share group (so offsets can be set before any
//     consumer joins), a consumer or classic group is GROUP_ID_NOT_FOUND.
//   - An offset below the log start or above the high watermark of a
//     partition led here is clamped to them, as a fetch would; -1 is
//     the high watermark (latest), -2 the log start (earliest).
//     On a partition led elsewhere -1 and -2 are not resolved yet
//     (INVALID_REQUEST) and other offsets are taken as they are.
//   - Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION. The
//     new state is written to __share_group_state at the next state
//     epoch before the answer; a leader elsewhere that still holds the
//     partition is fenced at its next write and reads the new state.
//     The topic joins the group's initialized topics (durable in
//     __consumer_offsets) before the answer, so the all-topics
//     DescribeShareGroupOffsets finds it from any coordinator.
//   - READ on the group, READ on each topic.

func init() { register(91, 0, 0, handleAlterShareGroupOffsets) }

// checkEmptyShareGroup is what AlterShareGroupOffsets and
// DeleteShareGroupOffsets check of the group before touching its state:
// fresh metadata, op on the group, and an empty share group (an unknown
// one is created as such when create is set).
func (s *Server) checkEmptyShareGroup(r *request, op int8, group string, create bool) error {
	if err := s.groups.Stale(); err != nil {
		return err
	}
	if !s.authorize(r, op, metadata.ResourceGroup, group) {
		return errGroupAuthz
	}
	return s.groups.ShareGroupEmpty(group, true, create)
}

func handleAlterShareGroupOffsets(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if err := s.checkEmptyShareGroup(r, metadata.OpRead, req.GroupID, true); err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = groupErrorMessage(err, resp.ErrorCode)
		return immediate(resp)
	}
	img := s.node.MetadataImage()
	for _, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		mt, ok := img.Topic(rt.Topic)
		authz := s.authorize(r, metadata.OpRead, metadata.ResourceTopic, rt.Topic)
		if ok {
			t.TopicID = [16]byte(mt.ID)
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !authz:
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !ok || rp.Partition < 0 || int(rp.Partition) >= len(mt.Partitions):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				off := rp.StartOffset
				if part, err := s.engine.Partition(mt.Name, rp.Partition); err == nil && mt.Partitions[rp.Partition].Leader == s.cfg.NodeID {
					info := part.Info()
					switch {
					case off == -1:
						off = info.HighWatermark
					case off == -2:
						off = info.LogStartOffset
					default:
						off = min(max(off, info.LogStartOffset), info.HighWatermark)
					}
				}
				if off < 0 {
					p.ErrorCode = kerr.InvalidRequest.Code
					break
				}
				if err := s.shares.SetOffset(share.Key{Group: req.GroupID, TopicID: [16]byte(mt.ID), Partition: rp.Partition}, off); err != nil {
					p.ErrorCode, p.ErrorMessage = errorCode(err), errorMessage(err)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		if ok && slices.ContainsFunc(t.Partitions, func(p kmsg.AlterShareGroupOffsetsResponseTopicPartition) bool { return p.ErrorCode == 0 }) {
			if err := s.groups.ShareInitialized(req.GroupID, []group.TopicID{group.TopicID(mt.ID)}, false); err != nil {
				for i := range t.Partitions {
					if t.Partitions[i].ErrorCode == 0 {
						t.Partitions[i].ErrorCode, t.Partitions[i].ErrorMessage = errorCode(err), errorMessage(err)
					}
				}
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return immediate(resp)
}
