package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteShareGroupState: v0-1 (inter-broker)
//
// Behavior:
//   - A share-partition leader stores the whole state of each named
//     share-partition (state epoch, start offset, state batches; start
//     offset -1 deletes it) on this broker, which leads its
//     __share_group_state partition. Each partition is answered once its
//     record is durable (replicated to the ISR). FENCED_STATE_EPOCH when
//     the stored state has a newer epoch (an admin reset or delete),
//     FENCED_LEADER_EPOCH when a newer leader of the data partition took
//     it over (leader epoch -1, an admin write, is not checked);
//     NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS as for
//     ReadShareGroupState. v1's delivery complete count is not used.
//   - CLUSTER_ACTION on the cluster, the plaintext listener and the
//     brokers' client id: only brokers send it.

func init() { register(85, 0, 1, handleWriteShareGroupState) }

func handleWriteShareGroupState(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	authz := r.conn.l.tls == nil && r.hdr.clientID != nil && *r.hdr.clientID == proto.ShareStateClientID &&
		s.authorizeCluster(r, metadata.OpClusterAction)
	// Appends wait for the ISR: answered on the writer.
	return reply{resolve: func(<-chan struct{}) *response {
		for _, t := range req.Topics {
			rt := kmsg.NewWriteShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				rp.Partition = p.Partition
				var err error
				switch {
				case !authz:
					err = kerr.ClusterAuthorizationFailed
				case s.state == nil:
					err = share.ErrNotCoordinator
				default:
					snap := share.Snapshot{Epoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset}
					for _, b := range p.StateBatches {
						snap.Batches = append(snap.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: share.RecordState(b.DeliveryState), DeliveryCount: b.DeliveryCount})
					}
					err = s.state.Write(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, snap)
				}
				if err != nil {
					rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return &response{msg: resp}
	}}
}
