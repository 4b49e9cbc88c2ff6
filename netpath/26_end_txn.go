package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-3
//
// Behavior:
//   - Bridged to txn.Manager.EndTxn on the transactional id's coordinator:
//     an Ongoing transaction moves to PrepareCommit/PrepareAbort, and the
//     answer comes (in resolve) once that record is durable. The markers
//     (broker/txn_markers.go) and the Complete record follow in the background;
//     until they are done the id answers CONCURRENT_TRANSACTIONS, which
//     clients retry. Consumers reading read_committed see the outcome as
//     each partition's marker lands.
//   - Unlike Kafka, a successful answer waits (up to txn.Config.EndTxnWait,
//     2 s) for the markers and the Complete record too: clients start the next
//     transaction at once, and franz-go's and Java's fixed 20 ms backoff on
//     CONCURRENT_TRANSACTIONS would otherwise cost several backoffs per
//     transaction (measured: 70 ms per transaction instead of 11 ms,
//     BENCHMARKS.md section 10). The outcome is already decided when the
//     wait starts, so a timeout still answers success.
//   - Retrying a completed commit (abort) succeeds; the other outcome is
//     INVALID_TXN_STATE.
//   - With ACLs on: WRITE on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//   - NOT_COORDINATOR while this broker's metadata may be stale; v0-1 get
//     INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED (KIP-588).
//   - v4+ (KIP-890 part 2: an epoch bump per transaction) is not
//     advertised.

func init() { register(26, 0, 3, handleEndTxn) }

func handleEndTxn(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	knowsFenced := req.Version >= 2
	if err := s.txns.Stale(); err != nil {
		resp.ErrorCode = txnErrorCode(err, knowsFenced)
		return immediate(resp)
	}
	if !s.authorize(r, metadata.OpWrite, metadata.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = errorCode(errTxnIDAuthz)
		return immediate(resp)
	}
	f := s.txns.EndTxn(txn.EndTxnRequest{
		TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Commit: req.Commit,
	})
	return reply{resolve: func(done <-chan struct{}) *response {
		err, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		resp.ErrorCode = txnErrorCode(err, knowsFenced)
		return &response{msg: resp}
	}}
}
