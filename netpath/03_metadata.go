package netpath

import (
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12
//
// Behavior:
//   - One broker (this node) leads every partition, with itself as the only
//     replica and ISR member, until clustering arrives.
//   - A null topic list (v1+; empty in v0) means all topics.
//   - Requested topics that do not exist are created when the request
//     allows it (v4+ flag; always in v0-3) and the broker has
//     auto-creation on; otherwise UNKNOWN_TOPIC_OR_PARTITION.
//   - v10+ carries topic ids; v12 requests may name topics by id only.

func init() { register(3, 0, 12, handleMetadata) }

func handleMetadata(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	host, port := s.advertised(r.conn.l)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = append(resp.Brokers, b)
	clusterID := s.cfg.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = s.cfg.NodeID

	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.engine.Topics() {
			resp.Topics = append(resp.Topics, s.metadataTopic(t))
		}
		return immediate(resp)
	}
	for _, rt := range req.Topics {
		var (
			info engine.TopicInfo
			ok   bool
		)
		if rt.Topic == nil {
			info, ok = s.topicByID(rt.TopicID)
			if !ok {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
		} else {
			name := *rt.Topic
			info, ok = s.engine.Topic(name)
			if !ok {
				st := kmsg.NewMetadataResponseTopic()
				st.Topic = rt.Topic
				if err := engine.ValidateTopicName(name); err != nil {
					st.ErrorCode = errorCode(err)
					resp.Topics = append(resp.Topics, st)
					continue
				}
				if !allowCreate || !s.cfg.AutoCreateTopics || isInternalTopic(name) {
					st.ErrorCode = kerr.UnknownTopicOrPartition.Code
					resp.Topics = append(resp.Topics, st)
					continue
				}
				created, err := s.autoCreate(name)
				if err != nil {
					st.ErrorCode = errorCode(err)
					resp.Topics = append(resp.Topics, st)
					continue
				}
				info = created
			}
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(info))
	}
	return immediate(resp)
}

func (s *Server) metadataTopic(t engine.TopicInfo) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	name := t.Name
	st.Topic = &name
	st.TopicID = t.ID
	st.IsInternal = isInternalTopic(t.Name)
	for p := int32(0); p < t.Partitions; p++ {
		sp := kmsg.NewMetadataResponseTopicPartition()
		sp.Partition = p
		sp.Leader = s.cfg.NodeID
		sp.LeaderEpoch = leaderEpoch
		sp.Replicas = []int32{s.cfg.NodeID}
		sp.ISR = []int32{s.cfg.NodeID}
		sp.OfflineReplicas = []int32{}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
