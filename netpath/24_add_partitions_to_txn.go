package netpath

import (
	"fmt"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-3
//
// Behavior:
//   - Bridged to txn.Manager.AddPartitions on the transactional id's
//     coordinator (NOT_COORDINATOR elsewhere, and while this broker's
//     metadata may be stale). The answer waits (in resolve) until the
//     transaction's record is durable in __transaction_state.
//   - With ACLs on: WRITE on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition) and on
//     each topic (TOPIC_AUTHORIZATION_FAILED).
//   - Every partition must exist in the metadata image (a missing topic
//     gets a read barrier first): otherwise the unknown ones are
//     UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED, and the
//     transaction is not touched, as Kafka answers (so are denied topics).
//   - A coordinator error is repeated on every partition; v0-1 get
//     INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED (KIP-588).
//   - v4+ (KIP-890 part 1: batched transactions, verify-only requests from
//     brokers) is not advertised: produce is not verified against the
//     coordinator, as before KIP-890.
//   - While another AddPartitionsToTxn of the same transaction is being
//     written (franz-go sends one per partition leader at once), the
//     coordinator queues this one behind it (txn.Manager) instead of
//     sending the client into its 20 ms CONCURRENT_TRANSACTIONS backoff;
//     while the previous transaction is ending it still answers
//     CONCURRENT_TRANSACTIONS.

func init() { register(24, 0, 3, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	knowsFenced := req.Version >= 2
	fill := func(code func(tp txn.TopicPartition) int16) *response {
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = code(txn.TopicPartition{Topic: t.Topic, Partition: p})
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return &response{msg: resp}
	}
	if err := s.txns.Stale(); err != nil {
		code := txnErrorCode(err, knowsFenced)
		return reply{resolve: func(<-chan struct{}) *response {
			return fill(func(txn.TopicPartition) int16 { return code })
		}}
	}
	if !s.authorize(r, metadata.OpWrite, metadata.ResourceTransactionalID, req.TransactionalID) {
		code := errorCode(errTxnIDAuthz)
		return immediate(fill(func(txn.TopicPartition) int16 { return code }).msg)
	}
	img := s.node.MetadataImage()
	var tps []txn.TopicPartition
	refused := map[txn.TopicPartition]int16{}
	unknownCode := errorCode(fmt.Errorf("%w: not in the metadata", metadata.ErrUnknownTopic))
	for _, t := range req.Topics {
		if !s.authorize(r, metadata.OpWrite, metadata.ResourceTopic, t.Topic) {
			for _, p := range t.Partitions {
				refused[txn.TopicPartition{Topic: t.Topic, Partition: p}] = errorCode(errTopicAuthz)
			}
			continue
		}
		mt, newer, ok := s.cluster.LookupTopic(img, t.Topic)
		img = newer
		for _, p := range t.Partitions {
			tp := txn.TopicPartition{Topic: t.Topic, Partition: p}
			if !ok || p < 0 || int(p) >= len(mt.Partitions) {
				refused[tp] = unknownCode
			}
			tps = append(tps, tp)
		}
	}
	if len(refused) > 0 {
		return reply{resolve: func(<-chan struct{}) *response {
			return fill(func(tp txn.TopicPartition) int16 {
				if code, ok := refused[tp]; ok {
					return code
				}
				return kerr.OperationNotAttempted.Code
			})
		}}
	}
	areq := txn.AddPartitionsRequest{
		TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Partitions: tps,
	}
	f := s.txns.AddPartitions(areq)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		codes := make(map[txn.TopicPartition]int16, len(res))
		for _, pr := range res {
			codes[pr.TopicPartition] = txnErrorCode(pr.Err, knowsFenced)
		}
		return fill(func(tp txn.TopicPartition) int16 { return codes[tp] })
	}}
}
