package netpath

import (
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-7
//
// Behavior:
//   - Timestamp -2 is the log start offset, -1 the high watermark (the
//     last stable offset under read_committed), -3 the offset of the batch
//     with the largest timestamp (KIP-734); otherwise the first offset
//     whose batch timestamp is >= the one asked for, or -1 when none.
//   - v0 (old style, max_num_offsets) is not served.
//   - Only the partition's leader answers (NOT_LEADER_OR_FOLLOWER
//     elsewhere); the leader epoch reported and checked is the image's.

func init() { register(2, 1, 7, handleListOffsets) }

func handleListOffsets(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			lc := s.leaderPartition(img, fresh, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch)
			if lc.code != 0 {
				sp.ErrorCode = lc.code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			part := lc.part
			if rp.Timestamp == engine.TimestampMax && req.Version < 7 {
				sp.ErrorCode = kerr.UnsupportedVersion.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			offset, ts, err := part.OffsetForTimestamp(rp.Timestamp)
			if err == nil && rp.Timestamp == -1 && req.IsolationLevel == 1 {
				offset = part.LastStableOffset()
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.Offset, sp.Timestamp = offset, ts
				if offset >= 0 {
					sp.LeaderEpoch = lc.info.LeaderEpoch
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}
