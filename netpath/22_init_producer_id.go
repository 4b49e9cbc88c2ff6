package netpath

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-4
//
// Behavior:
//   - Without a transactional id (idempotent producers): a fresh producer
//     id from this broker's block (controller-allocated, unique in the
//     cluster) with epoch 0. Any broker answers. A client re-initializing
//     with its current id and epoch (KIP-360, v3+) gets a new id too: the
//     partitions' state accepts an unknown producer at any sequence.
//   - With a transactional id: the transaction coordinator (the leader of
//     the id's __transaction_state partition; NOT_COORDINATOR elsewhere)
//     answers once its record is durable; see txn.go. The epoch bump fences
//     older producers of the id; an open transaction of theirs is aborted
//     first (CONCURRENT_TRANSACTIONS meanwhile). v0-3 get
//     INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED (KIP-588).
//   - Runs in resolve: fetching an id block waits for the controller
//     without blocking the connection's reads.

func init() { register(22, 0, 4, handleInitProducerID) }

func handleInitProducerID(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return s.initTransactionalProducer(r, req, resp)
	}
	return reply{resolve: func(<-chan struct{}) *response {
		ctx, cancel := s.adminContext(0)
		defer cancel()
		id, err := s.pids.Wait(ctx)
		if err != nil {
			// Retriable for the client: the controller may be moving.
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			s.log.Debug("InitProducerId without an id block", "err", err)
			return &response{msg: resp}
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return &response{msg: resp}
	}}
}
