package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReadShareGroupState: v0 (inter-broker)
//
// Behavior:
//   - A share-partition leader reads the durable state of each named
//     share-partition from this broker, which leads its
//     __share_group_state partition: state epoch, start offset (-1 with
//     no state, or deleted state) and state batches. A leader epoch
//     newer than the stored one takes the state over (stored before the
//     answer; later writes of older epochs are refused), an older one is
//     FENCED_LEADER_EPOCH; -1 reads without either. NOT_COORDINATOR
//     when this broker does not lead that partition,
//     COORDINATOR_LOAD_IN_PROGRESS while it reads it.
//   - CLUSTER_ACTION on the cluster, the plaintext listener and the
//     brokers' client id: only brokers send it.

func init() { register(84, 0, 0, handleReadShareGroupState) }

func handleReadShareGroupState(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	authz := r.conn.l.tls == nil && r.hdr.clientID != nil && *r.hdr.clientID == proto.ShareStateClientID &&
		s.authorizeCluster(r, metadata.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StartOffset = p.Partition, -1
			var snap share.Snapshot
			var ok bool
			var err error
			switch {
			case !authz:
				err = kerr.ClusterAuthorizationFailed
			case s.state == nil:
				err = share.ErrNotCoordinator
			default:
				snap, ok, err = s.state.Read(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p.LeaderEpoch)
			}
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				rp.StateEpoch = snap.Epoch
				if ok {
					rp.StartOffset = snap.StartOffset
					for _, b := range snap.Batches {
						kb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
						kb.FirstOffset, kb.LastOffset, kb.DeliveryState, kb.DeliveryCount = b.First, b.Last, int8(b.State), b.DeliveryCount
						rp.StateBatches = append(rp.StateBatches, kb)
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return immediate(resp)
}
