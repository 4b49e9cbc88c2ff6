package netpath

import (
	"errors"
	"fmt"

	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behavior:
//   - num_partitions -1 (v4+) uses the broker default; replication factor
//     -1 or 1 is accepted; anything larger is INVALID_REPLICATION_FACTOR
//     until clustering exists. Manual replica assignments must name only
//     this broker.
//   - Configs are validated by the engine (INVALID_CONFIG on unknown keys
//     or bad values) and stored with the topic.
//   - validate_only checks everything and creates nothing.
//   - A topic named twice in one request gets INVALID_REQUEST.
//   - v5+ responses list the effective configs; v7 the topic id.

func init() { register(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 1 {
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
		}
		if seen[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, "topic named more than once in the request")
			continue
		}
		if err := engine.ValidateTopicName(rt.Topic); err != nil {
			fail(errorCode(err), err.Error())
			continue
		}
		if isInternalTopic(rt.Topic) {
			fail(kerr.InvalidRequest.Code, "names starting with __ are reserved for internal topics")
			continue
		}
		partitions := rt.NumPartitions
		if partitions == -1 {
			partitions = s.cfg.DefaultPartitions
		}
		if len(rt.ReplicaAssignment) > 0 {
			if msg := s.checkAssignment(rt.ReplicaAssignment); msg != "" {
				fail(kerr.InvalidReplicaAssignment.Code, msg)
				continue
			}
			partitions = int32(len(rt.ReplicaAssignment))
		}
		if rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1 {
			fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d exceeds the 1 available broker", rt.ReplicationFactor))
			continue
		}
		if partitions < 1 {
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d must be >= 1", partitions))
			continue
		}
		configs := make(map[string]string, len(rt.Configs))
		for _, c := range rt.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		var info engine.TopicInfo
		if req.ValidateOnly {
			if _, exists := s.engine.Topic(rt.Topic); exists {
				fail(kerr.TopicAlreadyExists.Code, "topic already exists")
				continue
			}
			cfg, err := engine.ParseTopicConfig(engine.DefaultTopicConfig(), configs)
			if err != nil {
				fail(errorCode(err), err.Error())
				continue
			}
			info = engine.TopicInfo{Name: rt.Topic, Partitions: partitions, Config: cfg}
		} else {
			created, err := s.engine.CreateTopic(rt.Topic, partitions, configs)
			if err != nil {
				if !errors.Is(err, engine.ErrTopicExists) {
					s.log.Warn("create topic failed", "topic", rt.Topic, "err", err)
				}
				fail(errorCode(err), err.Error())
				continue
			}
			info = created
			s.log.Info("created topic", "topic", rt.Topic, "partitions", partitions)
		}
		st.TopicID = info.ID
		st.NumPartitions = info.Partitions
		st.ReplicationFactor = 1
		for _, e := range info.Config.Entries() {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name = e.Name
			v := e.Value
			c.Value = &v
			c.ReadOnly = e.ReadOnly
			c.IsSensitive = e.Sensitive
			c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
			if e.IsDefault {
				c.Source = int8(kmsg.ConfigSourceDefaultConfig)
			}
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}

// checkAssignment accepts manual assignments only if every replica is this
// broker, one replica per partition, partitions numbered 0..n-1.
func (s *Server) checkAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) string {
	for i, a := range as {
		if a.Partition != int32(i) {
			return fmt.Sprintf("assignment partitions must be 0..%d in order", len(as)-1)
		}
		if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
			return fmt.Sprintf("partition %d: replicas must be exactly [%d] on a single broker", a.Partition, s.cfg.NodeID)
		}
	}
	return ""
}
