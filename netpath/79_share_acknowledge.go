package netpath

import (
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareAcknowledge: v1-2
//
// Behavior:
//   - Acknowledges records outside a fetch, through the member's share
//     session (78_share_fetch.go): the epoch must be the session's
//     (epoch 0 is INVALID_SHARE_SESSION_EPOCH: there is nothing to
//     acknowledge in a new session); -1 applies the acknowledgements,
//     closes the session and releases what the member still holds.
//   - Per partition, all or nothing: accept, release (delivered again,
//     or archived at the delivery count limit), reject, gap, and renew
//     (v2, is_renew_ack: the lock is extended by the group's lock
//     duration, returned in AcquisitionLockTimeoutMillis).
//   - READ on the group and on each topic.

func init() { register(79, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return immediate(resp)
	}
	if !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, *req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return immediate(resp)
	}
	if req.ShareSessionEpoch == share.OpenEpoch {
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return immediate(resp)
	}
	// Applied on the writer, in request order with the connection's
	// fetches.
	return reply{resolve: func(<-chan struct{}) *response {
		s.shareAcknowledge(r, req, resp)
		return &response{msg: resp}
	}}
}

func (s *Server) shareAcknowledge(r *request, req *kmsg.ShareAcknowledgeRequest, resp *kmsg.ShareAcknowledgeResponse) {
	group, member := *req.GroupID, *req.MemberID
	now := time.Now()
	sess, err := s.shares.Session(share.SessionRequest{Group: group, Member: member, Epoch: req.ShareSessionEpoch}, now)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = errorMessage(err)
		return
	}
	resp.AcquisitionLockTimeoutMillis = int32(s.shares.LockDuration(group).Milliseconds())
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			tg := s.shareTargetOf(r, img, fresh, group, t.TopicID, p.Partition)
			switch {
			case tg.code != 0:
				rp.ErrorCode = tg.code
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = tg.leader, tg.epoch
			case len(p.AcknowledgementBatches) > maxShareAckBatches:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				if err := s.shares.Acknowledge(tg.key, member, shareAcks(p.AcknowledgementBatches), now); err != nil {
					rp.ErrorCode = errorCode(err)
					rp.ErrorMessage = errorMessage(err)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if sess.Final {
		s.shares.CloseSession(group, member, sess.Partitions)
	}
}
