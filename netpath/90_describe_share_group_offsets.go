package netpath

import (
	"cmp"
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeShareGroupOffsets: v0-1
//
// Behavior:
//   - Per share group (which must exist: GROUP_ID_NOT_FOUND otherwise,
//     also for a consumer or classic group), the share-partition start
//     offset of each requested partition, or of every partition the
//     group has state for when topics is null. A partition without
//     state has start offset -1 and no error; an unknown topic is
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - The state is this broker's for partitions it leads, else read
//     from __share_group_state (ReadShareGroupState to the leader of
//     the key's partition there). Null topics: every partition with
//     state of the topics the group coordinator records as initialized
//     (offsets altered, or assigned to a member; durable in
//     __consumer_offsets), of those the members subscribe to, and of
//     those this broker holds state of.
//   - v1's lag is the high watermark minus the start offset minus the
//     records finished above it, for partitions led here; -1 otherwise.
//   - DESCRIBE on the group; topics the client may not DESCRIBE are left
//     out of a null-topics answer, and TOPIC_AUTHORIZATION_FAILED when
//     named.

func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	stale := s.groups.Stale()
	img := s.node.MetadataImage()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		var err error
		switch {
		case stale != nil:
			err = stale
		case !s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, rg.GroupID):
			err = errGroupAuthz
		default:
			err = s.groups.ShareGroupEmpty(rg.GroupID, false, false)
		}
		if err != nil {
			g.ErrorCode, g.ErrorMessage = errorCode(err), groupErrorMessage(err, errorCode(err))
			resp.Groups = append(resp.Groups, g)
			continue
		}
		partition := func(t metadata.Topic, p int32, po share.PartitionOffset, ok bool) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch = p, -1, -1
			if int(p) >= len(t.Partitions) || p < 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				return rp
			}
			rp.LeaderEpoch = t.Partitions[p].LeaderEpoch
			if !ok {
				return rp
			}
			rp.StartOffset = po.Start
			if part, err := s.engine.Partition(t.Name, p); err == nil && t.Partitions[p].Leader == s.cfg.NodeID {
				rp.Lag = max(0, part.Info().HighWatermark-po.Start-int64(po.InFlightDone))
			}
			return rp
		}
		if rg.Topics == nil {
			// The topics with state here, and those the members
			// subscribe to, whose state may be anywhere.
			ids := map[[16]byte]bool{}
			for _, po := range s.shares.Offsets(rg.GroupID, nil) {
				ids[po.TopicID] = true
			}
			// State stored here without a live share partition (an
			// empty group whose offsets were altered, or whose members
			// left).
			if s.state != nil {
				for _, k := range s.state.Keys(rg.GroupID) {
					ids[k.TopicID] = true
				}
			}
			for _, d := range s.groups.ShareDescribe([]string{rg.GroupID}) {
				for _, id := range d.Initialized {
					ids[id] = true
				}
				for _, m := range d.Members {
					for _, name := range m.SubscribedTopicNames {
						if t, ok := img.Topic(name); ok {
							ids[[16]byte(t.ID)] = true
						}
					}
				}
			}
			byTopic := map[[16]byte][]share.PartitionOffset{}
			for id := range ids {
				t, ok := img.TopicByID(metadata.UUID(id))
				if !ok {
					continue
				}
				for p := range int32(len(t.Partitions)) {
					if po, ok := s.shares.Offset(share.Key{Group: rg.GroupID, TopicID: id, Partition: p}); ok {
						byTopic[id] = append(byTopic[id], po)
					}
				}
			}
			for id, pos := range byTopic {
				t, ok := img.TopicByID(metadata.UUID(id))
				if !ok || !s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, t.Name) {
					continue
				}
				gt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				gt.Topic, gt.TopicID = t.Name, id
				for _, po := range pos {
					gt.Partitions = append(gt.Partitions, partition(t, po.Partition, po, true))
				}
				g.Topics = append(g.Topics, gt)
			}
			slices.SortFunc(g.Topics, func(a, b kmsg.DescribeShareGroupOffsetsResponseGroupTopic) int { return cmp.Compare(a.Topic, b.Topic) })
		}
		for _, rt := range rg.Topics {
			gt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			gt.Topic = rt.Topic
			t, ok := img.Topic(rt.Topic)
			authz := s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, rt.Topic)
			if ok {
				gt.TopicID = [16]byte(t.ID)
			}
			for _, p := range rt.Partitions {
				if !ok || !authz {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.LeaderEpoch = p, -1, -1
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					if !authz {
						rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
					}
					gt.Partitions = append(gt.Partitions, rp)
					continue
				}
				po, has := s.shares.Offset(share.Key{Group: rg.GroupID, TopicID: [16]byte(t.ID), Partition: p})
				gt.Partitions = append(gt.Partitions, partition(t, p, po, has))
			}
			g.Topics = append(g.Topics, gt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return immediate(resp)
}
