package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5
//
// Behavior:
//   - v0-2 remove one member (its error is the top-level code); v3+ take a
//     batch (KIP-345), where an entry may name only an instance id, with a
//     result per member.
//   - The group rebalances without the members that left.

func init() { register(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var members []group.LeaveMember
	if req.Version < 3 {
		members = []group.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
	}
	err := s.groups.Stale()
	if err == nil && !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group) {
		err = errGroupAuthz
	}
	var results []group.LeaveResult
	if err == nil {
		results, err = s.groups.Leave(req.Group, members)
	}
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return immediate(resp)
	}
	if req.Version < 3 {
		if len(results) == 1 {
			resp.ErrorCode = errorCode(results[0].Err)
		}
		return immediate(resp)
	}
	for _, res := range results {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID, m.InstanceID, m.ErrorCode = res.MemberID, res.InstanceID, errorCode(res.Err)
		resp.Members = append(resp.Members, m)
	}
	return immediate(resp)
}
