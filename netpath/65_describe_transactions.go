package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0
//
// Behavior:
//   - Answered by the transactional id's coordinator from its in-memory
//     state (txn.Manager.Describe): Kafka's state name, timeout, start
//     time (-1 when no transaction is open), producer id and epoch, and
//     the partitions of the open or completing transaction.
//   - Per id: NOT_COORDINATOR when this broker does not coordinate it (or
//     its metadata may be stale), COORDINATOR_LOAD_IN_PROGRESS while its
//     __transaction_state partition loads, TRANSACTIONAL_ID_NOT_FOUND for
//     an id that is unknown, not yet initialized, or expired.
//   - With ACLs on: DESCRIBE on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and the partitions of
//     topics the caller may not DESCRIBE are left out, as in Kafka.

func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	stale := s.txns.Stale()
	for _, id := range req.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		ts.StartTimestamp, ts.ProducerID, ts.ProducerEpoch = -1, -1, -1
		switch {
		case !s.authorize(r, metadata.OpDescribe, metadata.ResourceTransactionalID, id):
			ts.ErrorCode = errorCode(errTxnIDAuthz)
		case stale != nil:
			ts.ErrorCode = errorCode(stale)
		default:
			d, err := s.txns.Describe(id)
			if err != nil {
				ts.ErrorCode = errorCode(err)
				break
			}
			ts.State, ts.TimeoutMillis, ts.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			ts.ProducerID, ts.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			// d.Partitions is sorted by topic: one entry per run.
			for _, tp := range d.Partitions {
				if n := len(ts.Topics); n > 0 && ts.Topics[n-1].Topic == tp.Topic {
					ts.Topics[n-1].Partitions = append(ts.Topics[n-1].Partitions, tp.Partition)
					continue
				}
				if !s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, tp.Topic) {
					continue
				}
				tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
				ts.Topics = append(ts.Topics, tt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return immediate(resp)
}
