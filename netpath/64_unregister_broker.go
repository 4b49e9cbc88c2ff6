package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UnregisterBroker: v0
//
// Behavior:
//   - Needs ALTER on the cluster when the authorizer is on
//     (CLUSTER_AUTHORIZATION_FAILED otherwise).
//   - Goes through the active controller from any broker; the broker then
//     leaves Metadata and DescribeCluster everywhere. A broker that joined
//     raft as a non-voter also leaves the raft configuration; a controller
//     voter keeps its vote.
//   - Unknown id: BROKER_ID_NOT_REGISTERED, as in Kafka.
//   - Kafka removes any registration; ringlog refuses two cases that would
//     leave the cluster inconsistent, with a message saying what to do:
//     a broker that is unfenced (its process is running: it would
//     re-register at once and its leaderships would vanish) is
//     INVALID_REQUEST, the generic "not valid in this state" code that no
//     client retries; a broker still named in a replica list is
//     INVALID_REPLICA_ASSIGNMENT, since removing it would leave
//     assignments naming an unregistered broker (move them off first:
//     `ringlog admin decommission`).
//   - A process started again with the id registers again.

func init() { register(64, 0, 0, handleUnregisterBroker) }

func handleUnregisterBroker(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	if !s.authorizeCluster(r, metadata.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return immediate(resp)
	}
	return reply{resolve: func(<-chan struct{}) *response {
		ctx, cancel := s.adminContext(0)
		defer cancel()
		if err := s.node.UnregisterBroker(ctx, req.BrokerID); err != nil {
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
			return &response{msg: resp}
		}
		s.log.Info("broker unregistered through UnregisterBroker", "broker", req.BrokerID, "principal", r.conn.principal())
		return &response{msg: resp}
	}}
}
