package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-3
//
// Behavior:
//   - Bridged to txn.Manager.AddOffsets on the transactional id's
//     coordinator: the group's __consumer_offsets partition joins the
//     transaction, so its marker is written there and the group
//     coordinator makes the transaction's TxnOffsetCommits visible (commit)
//     or drops them (abort). The answer waits (in resolve) until the
//     record is durable.
//   - With ACLs on: WRITE on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
//     (GROUP_AUTHORIZATION_FAILED).
//   - NOT_COORDINATOR while this broker's metadata may be stale; v0-1 get
//     INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED (KIP-588).

func init() { register(25, 0, 3, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	knowsFenced := req.Version >= 2
	if err := s.txns.Stale(); err != nil {
		resp.ErrorCode = txnErrorCode(err, knowsFenced)
		return immediate(resp)
	}
	switch {
	case !s.authorize(r, metadata.OpWrite, metadata.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = errorCode(errTxnIDAuthz)
		return immediate(resp)
	case !s.authorize(r, metadata.OpRead, metadata.ResourceGroup, req.Group):
		resp.ErrorCode = errorCode(errGroupAuthz)
		return immediate(resp)
	}
	f := s.txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	return reply{resolve: func(done <-chan struct{}) *response {
		err, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		resp.ErrorCode = txnErrorCode(err, knowsFenced)
		return &response{msg: resp}
	}}
}
