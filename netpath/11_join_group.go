package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"time"

	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9
//
// Behavior:
//   - Bridged to group.Manager.Join; the response waits (in resolve, on the
//     writer goroutine) until the rebalance completes, so the connection
//     keeps reading other requests meanwhile.
//   - v0 has no rebalance timeout: the session timeout is used.
//   - v4+ requires a known member id (KIP-394): a first join is answered
//     MEMBER_ID_REQUIRED with the new id.
//   - NOT_COORDINATOR when this broker does not lead the group's offsets
//     partition (or its metadata may be stale), COORDINATOR_LOAD_IN_PROGRESS
//     while loading it.

func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(err error) reply {
		resp.ErrorCode, resp.Generation = errorCode(err), -1
		resp.MemberID = req.MemberID
		return immediate(resp)
	}
	if err := s.groups.Stale(); err != nil {
		return fail(err)
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group) {
		return fail(errGroupAuthz)
	}
	jr := group.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		InstanceID:           req.InstanceID,
		ClientHost:           clientHost(r.conn),
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ProtocolType:         req.ProtocolType,
		RequireKnownMemberID: req.Version >= 4,
	}
	if r.hdr.clientID != nil {
		jr.ClientID = *r.hdr.clientID
	}
	if req.Version < 1 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	f := s.groups.Join(jr)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		resp.ErrorCode = errorCode(res.Err)
		resp.Generation = res.Generation
		if res.Err != nil && res.Generation == 0 {
			resp.Generation = -1
		}
		resp.LeaderID = res.Leader
		resp.MemberID = res.MemberID
		resp.SkipAssignment = res.SkipAssignment
		if res.Protocol != "" || req.Version < 7 {
			p := res.Protocol
			resp.Protocol = &p
		}
		if res.ProtocolType != "" {
			pt := res.ProtocolType
			resp.ProtocolType = &pt
		}
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return &response{msg: resp}
	}}
}
