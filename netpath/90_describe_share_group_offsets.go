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
//   - The state is read from this broker's share-partitions: on one
//     broker that is all of them; with several, only partitions led here
//     (the share coordinator that collects them is the next slice).
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
			byTopic := map[[16]byte][]share.PartitionOffset{}
			for _, po := range s.shares.Offsets(rg.GroupID, nil) {
				byTopic[po.TopicID] = append(byTopic[po.TopicID], po)
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
