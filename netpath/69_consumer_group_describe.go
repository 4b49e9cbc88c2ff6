package netpath

import (
	"cmp"
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-1
//
// Behavior:
//   - Bridged to group.Manager.ConsumerDescribe, one result per requested
//     group: epochs, assignor, and per member its subscription, current
//     assignment and target assignment. A group that does not exist or is
//     a classic group is GROUP_ID_NOT_FOUND (describe those with
//     DescribeGroups); one coordinated elsewhere NOT_COORDINATOR.
//   - DESCRIBE on each group is required (GROUP_AUTHORIZATION_FAILED for
//     that group only).
//   - Topic names are resolved from this broker's metadata image; a topic
//     deleted since the assignment was made is left out.
//   - v1 adds the member type: always 1 (consumer), as this coordinator
//     keeps classic members in classic groups only.
//   - Authorized operations are not computed (as in DescribeGroups): the
//     field stays at Kafka's "not requested" value.

func init() { register(69, 0, 1, handleConsumerGroupDescribe) }

// consumerMemberType is ConsumerGroupDescribe v1's MemberType of a
// consumer-protocol member.
const consumerMemberType int8 = 1

func handleConsumerGroupDescribe(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	descs := make([]group.ConsumerGroupDescription, 0, len(req.Groups))
	if err := s.groups.Stale(); err != nil {
		for _, id := range req.Groups {
			descs = append(descs, group.ConsumerGroupDescription{Group: id, Err: err, State: group.ConsumerDead})
		}
	} else {
		for _, id := range req.Groups {
			if s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, id) {
				descs = append(descs, s.groups.ConsumerDescribe([]string{id})...)
			} else {
				descs = append(descs, group.ConsumerGroupDescription{Group: id, Err: errGroupAuthz, State: group.ConsumerDead})
			}
		}
	}
	var img *metadata.Image
	if s.node != nil {
		img = s.node.MetadataImage()
	}
	for _, d := range descs {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.ErrorCode = d.Group, errorCode(d.Err)
		g.ErrorMessage = groupErrorMessage(d.Err, g.ErrorCode)
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = string(d.State), d.GroupEpoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.RackID, gm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.MemberEpoch
			gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
			gm.SubscribedTopics = m.SubscribedTopicNames
			if gm.SubscribedTopics == nil {
				gm.SubscribedTopics = []string{}
			}
			gm.SubscribedTopicRegex = m.SubscribedTopicRegex
			gm.Assignment = describeAssignment(img, m.Assignment)
			gm.TargetAssignment = describeAssignment(img, m.TargetAssignment)
			gm.MemberType = consumerMemberType
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return immediate(resp)
}

// describeAssignment names a's topics from img, ordered by name; topics
// img no longer has are left out.
func describeAssignment(img *metadata.Image, a group.Assignment) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = make([]kmsg.AssignmentTopicPartition, 0, len(a))
	for id, ps := range a {
		if img == nil {
			break
		}
		t, ok := img.TopicByID(metadata.UUID(id))
		if !ok {
			continue
		}
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic = id, t.Name
		tp.Partitions = slices.Sorted(slices.Values(ps))
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	slices.SortFunc(out.TopicPartitions, func(x, y kmsg.AssignmentTopicPartition) int { return cmp.Compare(x.Topic, y.Topic) })
	return out
}
