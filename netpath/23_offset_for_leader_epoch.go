package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4
//
// Behavior:
//   - Answers from the partition leader's leader-epoch cache (Kafka's
//     endOffsetFor): the largest epoch <= the requested one and where it
//     ends (the log end offset for the latest epoch). Consumers use it to
//     detect truncation after a leader change (KIP-320); followers use
//     Fetch's DivergingEpoch instead.
//   - Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere);
//     current_leader_epoch (v2+) is checked like Fetch's.
//   - An epoch we cannot place gives epoch -1 and end offset -1.
//   - Tiered storage: the local epoch cache starts at the local log start.
//     An epoch that ended at or below it is answered from the leader
//     epochs the metadata image records for the remote segments (the
//     whole log's history), in the same way (remoteEpochEnd).

func init() { register(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	// Followers (replica id set, v3+) need CLUSTER_ACTION; clients
	// DESCRIBE on the topic.
	allowed := func(topic string) bool {
		if req.Version >= 3 && req.ReplicaID >= 0 {
			return s.authorizeCluster(r, metadata.OpClusterAction)
		}
		return s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, topic)
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if !allowed(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				if req.Version >= 3 && req.ReplicaID >= 0 {
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			clientEpoch := int32(-1)
			if req.Version >= 2 {
				clientEpoch = rp.CurrentLeaderEpoch
			}
			lc := s.leaderPartition(img, fresh, rt.Topic, rp.Partition, clientEpoch)
			if lc.code != 0 {
				sp.ErrorCode = lc.code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if rp.LeaderEpoch < 0 {
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			} else {
				sp.LeaderEpoch, sp.EndOffset = lc.part.EndOffsetForEpoch(rp.LeaderEpoch)
				if e, end, ok := remoteEpochEnd(img, rt.Topic, rp.Partition, rp.LeaderEpoch, lc.part.LocalLogStartOffset()); ok {
					sp.LeaderEpoch, sp.EndOffset = e, end
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}

// remoteEpochEnd answers OffsetForLeaderEpoch from the remote tier's epoch
// history when the requested epoch ended at or below the local log start
// (localStart): the largest epoch <= epoch (epoch itself when the history
// starts later, as Kafka's cache answers) and the start of the next one.
// ok is false when the remote history has no later epoch starting at or
// below localStart: the local cache answers then.
func remoteEpochEnd(img *metadata.Image, topic string, idx, epoch int32, localStart int64) (int32, int64, bool) {
	t, ok := img.Topic(topic)
	if !ok {
		return 0, 0, false
	}
	floor := epoch
	// Walk the readable segments in offset order as reads resolve them
	// (SegmentFor: the newer upload wins where two overlap).
	for off := img.RemoteLogStart(t.ID, idx); off >= 0 && off < localStart; {
		seg, ok := img.SegmentFor(t.ID, idx, off)
		if !ok {
			break
		}
		for i, e := range seg.Epochs {
			// The entry in force at off, and those starting after it.
			if i+1 < len(seg.Epochs) && seg.Epochs[i+1].StartOffset <= off {
				continue
			}
			start := max(e.StartOffset, off)
			if e.Epoch > epoch {
				if start > localStart {
					return 0, 0, false
				}
				return floor, start, true
			}
			floor = e.Epoch
		}
		off = seg.NextOffset
	}
	return 0, 0, false
}
