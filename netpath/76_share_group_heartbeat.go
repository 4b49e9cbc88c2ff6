package netpath

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupHeartbeat: v1
//
// Behavior:
//   - Share groups (KIP-932): bridged to group.Manager.ShareHeartbeat,
//     which joins (epoch 0, with the client's own member id), leaves (-1)
//     and keeps members. Every member is assigned every partition of the
//     topics it subscribes to: records, not partitions, are divided among
//     them by the partition leaders (78_share_fetch.go).
//   - The assignment is sent when it changed, when the member is behind
//     its epoch, and on a full heartbeat (subscription present).
//   - A leaving member's share sessions on this broker are closed and
//     the records it holds released at once.
//   - The answer waits until the group's records in __consumer_offsets
//     are durable, so members keep their epochs across a coordinator
//     move.
//   - v0 (Kafka 4.0's early access) is not served: franz-go and Kafka
//     4.2 clients use v1.
//   - READ on the group is required (GROUP_AUTHORIZATION_FAILED).

func init() { register(76, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err error) reply {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = groupErrorMessage(err, resp.ErrorCode)
		return immediate(resp)
	}
	if err := s.groups.Stale(); err != nil {
		return fail(err)
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.GroupID) {
		return fail(errGroupAuthz)
	}
	if n := len(req.SubscribedTopicNames); n > maxHeartbeatSubscribed {
		return fail(fmt.Errorf("%w: %d subscribed topics, at most %d", group.ErrInvalidRequest, n, maxHeartbeatSubscribed))
	}
	hr := group.ShareHeartbeatRequest{
		Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		RackID: req.RackID, SubscribedTopicNames: req.SubscribedTopicNames,
		ClientHost: clientHost(r.conn),
	}
	if r.hdr.clientID != nil {
		hr.ClientID = *r.hdr.clientID
	}
	f := s.groups.ShareHeartbeat(hr)
	if req.MemberEpoch == group.LeaveEpoch {
		s.shares.CloseMember(req.GroupID, req.MemberID)
	}
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		shareHeartbeatResponse(resp, res)
		return &response{msg: resp}
	}}
}

func shareHeartbeatResponse(resp *kmsg.ShareGroupHeartbeatResponse, res group.ShareHeartbeatResponse) {
	resp.ErrorCode = errorCode(res.Err)
	resp.ErrorMessage = groupErrorMessage(res.Err, resp.ErrorCode)
	if res.MemberID != "" {
		id := res.MemberID
		resp.MemberID = &id
	}
	resp.MemberEpoch = res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if res.HasAssignment {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = make([]kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition, 0, len(res.Assignment))
		for id, ps := range res.Assignment {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID, t.Partitions = id, slices.Clone(ps)
			a.TopicPartitions = append(a.TopicPartitions, t)
		}
		slices.SortFunc(a.TopicPartitions, func(x, y kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition) int {
			return bytes.Compare(x.TopicID[:], y.TopicID[:])
		})
		resp.Assignment = &a
	}
}
