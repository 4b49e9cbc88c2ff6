package netpath

import (
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/txn"
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
//     answers once its record is durable; see broker/txn.go. The epoch
//     bump fences older producers of the id; an open transaction of
//     theirs is aborted first (CONCURRENT_TRANSACTIONS meanwhile). v0-3 get
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

// initTransactionalProducer answers InitProducerId for a transactional id:
// the coordinator bumps the id's epoch (fencing older producers), aborting
// an open transaction first (CONCURRENT_TRANSACTIONS until that is done).
func (s *Server) initTransactionalProducer(r *request, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) reply {
	fill := func(res txn.InitProducerIDResult) *response {
		resp.ErrorCode = txnErrorCode(res.Err, req.Version >= 4)
		if resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
		}
		return &response{msg: resp}
	}
	if err := s.txns.Stale(); err != nil {
		return reply{resolve: func(<-chan struct{}) *response { return fill(txn.InitProducerIDResult{Err: err}) }}
	}
	if !s.authorize(r, metadata.OpWrite, metadata.ResourceTransactionalID, *req.TransactionalID) {
		return immediate(fill(txn.InitProducerIDResult{Err: errTxnIDAuthz}).msg)
	}
	ir := txn.InitProducerIDRequest{
		TransactionalID:    req.TransactionalID,
		TransactionTimeout: time.Duration(req.TransactionTimeoutMillis) * time.Millisecond,
		ProducerID:         -1,
		ProducerEpoch:      -1,
	}
	if req.Version >= 3 {
		ir.ProducerID, ir.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	f := s.txns.InitProducerID(ir)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		return fill(res)
	}}
}
