package netpath

import (
	"sync"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers: v0-1
//
// Behavior:
//   - Broker to broker only: a transaction coordinator on another broker
//     (broker/txn_markers.go over netpath/peer, client id
//     "ringlog-txn-markers", plaintext listener) sends the commit/abort
//     marker of a transaction to the leader of its partitions. Anything else gets
//     CLUSTER_AUTHORIZATION_FAILED on every partition (Kafka requires
//     CLUSTER_ACTION, which is checked too when ACLs are on; the client id
//     alone guards against misdirected requests, it authenticates nothing).
//   - Each partition gets the marker through the engine's AppendMarker,
//     which checks the producer epoch (PRODUCER_FENCED) and the
//     coordinator epoch (TRANSACTION_COORDINATOR_FENCED) against the
//     partition's producer state and ends the producer's transaction
//     there. It is answered once durable and, on a replicated partition,
//     covered by the high watermark, as acks=all produce: NOT_ENOUGH_REPLICAS
//     before appending when the ISR is below min.insync.replicas,
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT after 30 s,
//     NOT_LEADER_OR_FOLLOWER on a broker that does not lead it. The
//     coordinator retries those.
//   - On a __consumer_offsets partition the group coordinator is told once
//     the marker is durable (CompleteTxn): the transaction's offset
//     commits become visible (commit) or are dropped (abort).
//   - Runs in resolve; all partitions are written and waited for
//     concurrently. v2 (KIP-890 transaction version) is not advertised.

func init() { register(27, 0, 1, handleWriteTxnMarkers) }

// writeMarkersTimeout bounds one marker write (append, flush, ISR); the
// partition gets REQUEST_TIMED_OUT after it.
const writeMarkersTimeout = 30 * time.Second

func handleWriteTxnMarkers(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	fromBroker := r.conn.l.tls == nil && r.hdr.clientID != nil && *r.hdr.clientID == proto.MarkerClientID &&
		s.authorizeCluster(r, metadata.OpClusterAction)
	if !fromBroker {
		for mi := range resp.Markers {
			for ti := range resp.Markers[mi].Topics {
				for pi := range resp.Markers[mi].Topics[ti].Partitions {
					resp.Markers[mi].Topics[ti].Partitions[pi].ErrorCode = kerr.ClusterAuthorizationFailed.Code
				}
			}
		}
		return immediate(resp)
	}
	return reply{resolve: func(done <-chan struct{}) *response {
		deadline := time.Now().Add(writeMarkersTimeout)
		var wg sync.WaitGroup
		for mi, m := range req.Markers {
			mk := producerstate.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
			for ti, t := range m.Topics {
				for pi, p := range t.Partitions {
					rp := &resp.Markers[mi].Topics[ti].Partitions[pi]
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := s.txns.WriteMarker(t.Topic, p, mk, deadline, done); err != nil {
							rp.ErrorCode = replErrorCode(err)
						}
					}()
				}
			}
		}
		wg.Wait()
		select {
		case <-done:
			return nil
		default:
		}
		return &response{msg: resp}
	}}
}
