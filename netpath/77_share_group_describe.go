package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe: v1
//
// Behavior:
//   - Bridged to group.Manager.ShareDescribe, one result per requested
//     group: state (Empty, Stable; Dead for unknown groups), epochs, the
//     "simple" assignor, and per member its subscription and assignment.
//     A group that is not a share group is GROUP_ID_NOT_FOUND.
//   - DESCRIBE on each group is required (GROUP_AUTHORIZATION_FAILED for
//     that group only). Topic names come from this broker's metadata
//     image; a topic deleted since is left out.
//   - Authorized operations are not computed (Kafka's "not requested").

func init() { register(77, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	descs := make([]group.ShareGroupDescription, 0, len(req.GroupIDs))
	stale := s.groups.Stale()
	for _, id := range req.GroupIDs {
		switch {
		case stale != nil:
			descs = append(descs, group.ShareGroupDescription{Group: id, Err: stale, State: group.ShareDead})
		case !s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, id):
			descs = append(descs, group.ShareGroupDescription{Group: id, Err: errGroupAuthz, State: group.ShareDead})
		default:
			descs = append(descs, s.groups.ShareDescribe([]string{id})...)
		}
	}
	var img *metadata.Image
	if s.node != nil {
		img = s.node.MetadataImage()
	}
	for _, d := range descs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.ErrorCode = d.Group, errorCode(d.Err)
		g.ErrorMessage = groupErrorMessage(d.Err, g.ErrorCode)
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.State, d.GroupEpoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			gm := kmsg.NewShareGroupDescribeResponseGroupMember()
			gm.MemberID, gm.RackID, gm.MemberEpoch = m.MemberID, m.RackID, m.MemberEpoch
			gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
			gm.SubscribedTopicNames = m.SubscribedTopicNames
			if gm.SubscribedTopicNames == nil {
				gm.SubscribedTopicNames = []string{}
			}
			for _, tp := range describeAssignment(img, m.Assignment).TopicPartitions {
				a := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				a.TopicID, a.Topic, a.Partitions = tp.TopicID, tp.Topic, tp.Partitions
				gm.Assignment.TopicPartitions = append(gm.Assignment.TopicPartitions, a)
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return immediate(resp)
}
