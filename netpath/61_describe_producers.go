package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0
//
// Behavior:
//   - For each partition this broker leads, the producers in its producer
//     state (engine/producerstate): id, epoch, last sequence (-1 when no
//     batch in this epoch), last timestamp, the coordinator epoch of the
//     last marker (-1 when none) and the first offset of the open
//     transaction, -1 when none. A transaction that stays open pins the
//     partition's last stable offset at that offset: this is how an
//     operator finds it (KIP-664).
//   - NOT_LEADER_OR_FOLLOWER on a broker that does not lead the partition
//     (clients send each partition to its leader),
//     UNKNOWN_TOPIC_OR_PARTITION when the image has no such partition.
//   - With ACLs on: READ on the topic (TOPIC_AUTHORIZATION_FAILED), as in
//     Kafka.

func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := s.authorize(r, metadata.OpRead, metadata.ResourceTopic, rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			lc := s.leaderPartition(img, fresh, rt.Topic, idx, -1)
			if lc.code != 0 {
				sp.ErrorCode = lc.code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range lc.part.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.Epoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.TxnFirstOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}
