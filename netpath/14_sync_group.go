package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5
//
// Behavior:
//   - Bridged to group.Manager.Sync. The leader sends every member's
//     assignment; followers wait for it. Every answer waits (in resolve)
//     until the assignment is durable in __consumer_offsets.
//   - v5 checks the protocol type and name against the group's.

func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if err := s.groups.Stale(); err != nil {
		resp.ErrorCode = errorCode(err)
		return immediate(resp)
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group) {
		resp.ErrorCode = errorCode(errGroupAuthz)
		return immediate(resp)
	}
	sr := group.SyncRequest{
		Group:        req.Group,
		Generation:   req.Generation,
		MemberID:     req.MemberID,
		InstanceID:   req.InstanceID,
		ProtocolType: req.ProtocolType,
		Protocol:     req.Protocol,
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	f := s.groups.Sync(sr)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		resp.ErrorCode = errorCode(res.Err)
		resp.MemberAssignment = res.Assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		if req.Version >= 5 && res.Err == nil {
			pt, p := res.ProtocolType, res.Protocol
			resp.ProtocolType, resp.Protocol = &pt, &p
		}
		return &response{msg: resp}
	}}
}
