package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behavior:
//   - Bridged to group.Manager.Heartbeat: extends the member's session;
//     REBALANCE_IN_PROGRESS tells it to rejoin; zombies get
//     ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID.

func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	err := s.groups.Stale()
	if err == nil && !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group) {
		err = errGroupAuthz
	}
	if err == nil {
		err = s.groups.Heartbeat(group.HeartbeatRequest{
			Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
		})
	}
	resp.ErrorCode = errorCode(err)
	return immediate(resp)
}
