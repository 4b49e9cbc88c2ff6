package netpath

import (
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12
//
// Behavior:
//   - Answered from this broker's copy of the controller's metadata image:
//     the live (unfenced) brokers with their registered endpoint for the
//     listener the request came in on, the active controller, and per
//     partition the leader, leader epoch, replicas, ISR and offline
//     replicas (fenced brokers', and replicas their broker reported
//     offline after a disk error). A partition without a leader gets
//     LEADER_NOT_AVAILABLE.
//   - A broker whose image may be stale (see cluster.go) lists the brokers
//     it knows, controller -1, and LEADER_NOT_AVAILABLE with no partitions
//     for every topic, so clients retry rather than act on old leaders.
//   - A null topic list (v1+; empty in v0) means all topics.
//   - Requested topics that do not exist are created through the
//     controller when the request allows it (v4+ flag; always in v0-3) and
//     the broker has auto-creation on; otherwise UNKNOWN_TOPIC_OR_PARTITION.
//   - v10+ carries topic ids; v12 requests may name topics by id only.
//   - With the authorizer on, listing all topics shows only those the
//     principal may DESCRIBE; a named topic it may not is
//     TOPIC_AUTHORIZATION_FAILED, and auto-creation also needs CREATE on
//     the cluster or the topic.

func init() { register(3, 0, 12, handleMetadata) }

func handleMetadata(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	clusterID := img.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = -1
	if fresh == nil {
		resp.ControllerID = s.node.Controller()
	}

	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var topics []kmsg.MetadataResponseTopic
	if all {
		for _, t := range img.Topics() {
			if s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, t.Name) {
				topics = append(topics, s.metadataTopic(img, t, fresh))
			}
		}
	}
	denied := func(name string) (kmsg.MetadataResponseTopic, bool) {
		if s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, name) {
			return kmsg.MetadataResponseTopic{}, false
		}
		st := kmsg.NewMetadataResponseTopic()
		st.Topic = &name
		st.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return st, true
	}
	for _, rt := range req.Topics {
		if all {
			break
		}
		if rt.Topic == nil {
			t, ok := img.TopicByID(metadata.UUID(rt.TopicID))
			if !ok {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.UnknownTopicID.Code
				topics = append(topics, st)
				continue
			}
			if st, no := denied(t.Name); no {
				st.TopicID = rt.TopicID
				topics = append(topics, st)
				continue
			}
			topics = append(topics, s.metadataTopic(img, t, fresh))
			continue
		}
		name := *rt.Topic
		if st, no := denied(name); no {
			topics = append(topics, st)
			continue
		}
		t, ok := img.Topic(name)
		if !ok && fresh == nil && engine.ValidateTopicName(name) == nil {
			t, img, ok = s.cluster.LookupTopic(img, name)
		}
		if !ok {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = rt.Topic
			if err := engine.ValidateTopicName(name); err != nil {
				st.ErrorCode = errorCode(err)
				topics = append(topics, st)
				continue
			}
			if fresh != nil {
				// We may just not know it yet.
				st.ErrorCode = kerr.LeaderNotAvailable.Code
				topics = append(topics, st)
				continue
			}
			if !allowCreate || !s.cfg.AutoCreateTopics || isInternalTopic(name) ||
				!(s.authorizeCluster(r, metadata.OpCreate) || s.authorize(r, metadata.OpCreate, metadata.ResourceTopic, name)) {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				topics = append(topics, st)
				continue
			}
			created, err := s.autoCreate(name)
			if err == nil {
				img = created
				t, ok = img.Topic(name)
			}
			if !ok {
				st.ErrorCode = errorCode(err)
				if err == nil {
					st.ErrorCode = kerr.LeaderNotAvailable.Code
				}
				topics = append(topics, st)
				continue
			}
		}
		topics = append(topics, s.metadataTopic(img, t, fresh))
	}
	// Brokers last: auto-creation may have advanced the image.
	for _, be := range s.liveBrokers(img, r.conn.l) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = be.id, be.host, be.port, be.rack
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.Topics = topics
	return immediate(resp)
}

func (s *Server) metadataTopic(img *metadata.Image, t metadata.Topic, fresh error) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	name := t.Name
	st.Topic = &name
	st.TopicID = t.ID
	st.IsInternal = isInternalTopic(t.Name)
	if fresh != nil {
		st.ErrorCode = kerr.LeaderNotAvailable.Code
		return st
	}
	for i, p := range t.Partitions {
		sp := kmsg.NewMetadataResponseTopicPartition()
		sp.Partition = int32(i)
		sp.Leader = p.Leader
		sp.LeaderEpoch = p.LeaderEpoch
		if p.Leader == metadata.NoLeader {
			sp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		sp.Replicas = append([]int32{}, p.Replicas...)
		sp.ISR = append([]int32{}, p.ISR...)
		sp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if b, ok := img.Broker(r); !ok || b.Fenced || slices.Contains(p.Offline, r) {
				sp.OfflineReplicas = append(sp.OfflineReplicas, r)
			}
		}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
