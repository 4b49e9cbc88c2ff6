package netpath

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat: v0-1
//
// Behavior:
//   - The KIP-848 consumer group protocol: bridged to
//     group.Manager.ConsumerHeartbeat, which joins, reconciles and leaves
//     members (epoch 0 joins, -1 leaves, -2 is a static member's
//     temporary leave). The response waits (in resolve) until the records
//     the heartbeat produced are durable in __consumer_offsets.
//   - v0: the coordinator names a joining member; v1 (regex subscriptions)
//     the client does. franz-go opts into the protocol only when v1 is
//     advertised.
//   - Null fields (subscription, owned partitions, rebalance timeout -1)
//     mean "unchanged"; an empty owned list is "owns nothing" and is kept
//     apart from null.
//   - The assignment is sent only when it changed; it is the member's
//     full assignment, topics ordered by id, partitions ascending.
//   - READ on the group is required (GROUP_AUTHORIZATION_FAILED).
//   - More than maxHeartbeatSubscribed topic names, or a regex longer than
//     maxHeartbeatRegexLen, is INVALID_REQUEST: the decoder bounds arrays
//     by the frame only, and a subscription is kept in memory and in every
//     member record.

func init() { register(68, 0, 1, handleConsumerGroupHeartbeat) }

// Caps on what one member may subscribe to (Kafka has none; a frame of
// the default maximum size could otherwise name millions of topics).
const (
	maxHeartbeatSubscribed = 10_000
	maxHeartbeatRegexLen   = 1_000
)

func handleConsumerGroupHeartbeat(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(err error) reply {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = groupErrorMessage(err, resp.ErrorCode)
		return immediate(resp)
	}
	if err := s.groups.Stale(); err != nil {
		return fail(err)
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group) {
		return fail(errGroupAuthz)
	}
	hr, err := heartbeatRequest(req)
	if err != nil {
		return fail(err)
	}
	if r.hdr.clientID != nil {
		hr.ClientID = *r.hdr.clientID
	}
	hr.ClientHost = clientHost(r.conn)
	f := s.groups.ConsumerHeartbeat(hr)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		fillHeartbeatResponse(resp, res)
		return &response{msg: resp}
	}}
}

// heartbeatRequest copies req into the Manager's request, checking the
// caps; ClientID and ClientHost are the caller's.
func heartbeatRequest(req *kmsg.ConsumerGroupHeartbeatRequest) (group.ConsumerHeartbeatRequest, error) {
	if n := len(req.SubscribedTopicNames); n > maxHeartbeatSubscribed {
		return group.ConsumerHeartbeatRequest{}, fmt.Errorf("%w: %d subscribed topics, at most %d", group.ErrInvalidRequest, n, maxHeartbeatSubscribed)
	}
	if req.SubscribedTopicRegex != nil && len(*req.SubscribedTopicRegex) > maxHeartbeatRegexLen {
		return group.ConsumerHeartbeatRequest{}, fmt.Errorf("%w: subscribed topic regex of %d bytes, at most %d", group.ErrInvalidRequest, len(*req.SubscribedTopicRegex), maxHeartbeatRegexLen)
	}
	hr := group.ConsumerHeartbeatRequest{
		Version:              req.Version,
		Group:                req.Group,
		MemberID:             req.MemberID,
		MemberEpoch:          req.MemberEpoch,
		InstanceID:           req.InstanceID,
		RackID:               req.RackID,
		RebalanceTimeout:     -1,
		SubscribedTopicNames: req.SubscribedTopicNames,
		SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor:       req.ServerAssignor,
	}
	if req.RebalanceTimeoutMillis >= 0 {
		hr.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Topics != nil {
		// Empty but not nil: the member owns nothing (nil is "unchanged").
		hr.Owned = make(group.Assignment, len(req.Topics))
		for _, t := range req.Topics {
			// A topic listed twice is merged; the Assignment invariant
			// (sorted, no duplicates) holds for what the Manager sees.
			ps := append(hr.Owned[group.TopicID(t.TopicID)], t.Partitions...)
			if ps == nil {
				ps = []int32{} // kept: the client named the topic
			}
			slices.Sort(ps)
			hr.Owned[group.TopicID(t.TopicID)] = slices.Compact(ps)
		}
	}
	return hr, nil
}

// fillHeartbeatResponse copies the Manager's answer into resp.
func fillHeartbeatResponse(resp *kmsg.ConsumerGroupHeartbeatResponse, res group.ConsumerHeartbeatResponse) {
	resp.ErrorCode = errorCode(res.Err)
	resp.ErrorMessage = groupErrorMessage(res.Err, resp.ErrorCode)
	if res.MemberID != "" || res.Err == nil {
		id := res.MemberID
		resp.MemberID = &id
	}
	resp.MemberEpoch = res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if !res.HasAssignment {
		return
	}
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(res.Assignment))
	for id, ps := range res.Assignment {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID = id
		t.Partitions = slices.Sorted(slices.Values(ps))
		a.Topics = append(a.Topics, t)
	}
	slices.SortFunc(a.Topics, func(x, y kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic) int {
		return bytes.Compare(x.TopicID[:], y.TopicID[:])
	})
	resp.Assignment = &a
}

// groupErrorMessage is the ErrorMessage of the consumer protocol's
// responses: the coordinator's own error text (it names the group or
// member, never a path), else Kafka's generic text for the code, so a
// storage error does not send file names to clients.
func groupErrorMessage(err error, code int16) *string {
	if err == nil {
		return nil
	}
	if groupErrorCode(err) != 0 || code == kerr.GroupAuthorizationFailed.Code {
		return errorMessage(err)
	}
	if ke := kerr.ErrorForCode(code); ke != nil {
		if e, ok := ke.(*kerr.Error); ok {
			return &e.Message
		}
	}
	return errorMessage(err)
}
