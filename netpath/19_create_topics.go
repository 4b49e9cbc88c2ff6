package netpath

import (
	"errors"
	"fmt"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behavior:
//   - Topics are created through the active controller (any broker
//     forwards); the response is sent once this broker's image has the
//     topic. Other brokers create their local logs as their images catch up.
//   - num_partitions -1 (v4+) uses the broker default; replication factor
//     -1 uses --default-replication-factor. Replicas are placed over the
//     live (unfenced) brokers, rack-aware, preferred leaders balanced; a
//     factor above the live broker count is INVALID_REPLICATION_FACTOR.
//   - Manual replica assignments are accepted when they list partitions
//     0..n-1 in order, name registered brokers, and have equal lengths
//     (INVALID_REPLICA_ASSIGNMENT otherwise).
//   - Configs are validated by the engine (INVALID_CONFIG on unknown keys
//     or bad values) and stored with the topic in the metadata log.
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
	// The controller round trips can take a while: answer on the writer
	// goroutine so later pipelined requests keep being read.
	return reply{resolve: func(<-chan struct{}) *response {
		for _, rt := range req.Topics {
			resp.Topics = append(resp.Topics, s.createTopic(r, req, rt, seen[rt.Topic] > 1))
		}
		return &response{msg: resp}
	}}
}

func (s *Server) createTopic(r *request, req *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic, dup bool) kmsg.CreateTopicsResponseTopic {
	st := kmsg.NewCreateTopicsResponseTopic()
	st.Topic = rt.Topic
	st.NumPartitions, st.ReplicationFactor = -1, -1
	fail := func(code int16, msg string) kmsg.CreateTopicsResponseTopic {
		st.ErrorCode = code
		if req.Version >= 1 {
			st.ErrorMessage = &msg
		}
		return st
	}
	if !s.authorizeCluster(r, metadata.OpCreate) && !s.authorize(r, metadata.OpCreate, metadata.ResourceTopic, rt.Topic) {
		return fail(kerr.TopicAuthorizationFailed.Code, "not authorized to create the topic")
	}
	if dup {
		return fail(kerr.InvalidRequest.Code, "topic named more than once in the request")
	}
	if err := engine.ValidateTopicName(rt.Topic); err != nil {
		return fail(errorCode(err), err.Error())
	}
	if isInternalTopic(rt.Topic) {
		return fail(kerr.InvalidRequest.Code, "names starting with __ are reserved for internal topics")
	}
	partitions := rt.NumPartitions
	if partitions == -1 {
		partitions = s.cfg.DefaultPartitions
	}
	rf := rt.ReplicationFactor
	if rf == -1 {
		rf = s.cfg.DefaultReplicationFactor
	}
	var assignment [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) {
				return fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("assignment partitions must be 0..%d in order", len(rt.ReplicaAssignment)-1))
			}
			assignment = append(assignment, a.Replicas)
		}
		partitions, rf = int32(len(assignment)), int16(len(assignment[0]))
	}
	if partitions < 1 {
		return fail(kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d must be >= 1", partitions))
	}
	if rf < 1 {
		return fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d must be >= 1", rf))
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value != nil {
			configs[c.Name] = *c.Value
		}
	}
	cfg, err := s.engine.ParseConfig(configs)
	if err != nil {
		return fail(errorCode(err), err.Error())
	}
	if cerr := s.checkRemoteStorage(cfg, nil); cerr != nil {
		return fail(cerr.code, cerr.msg)
	}
	var id [16]byte
	if req.ValidateOnly {
		img := s.node.MetadataImage()
		if _, exists := img.Topic(rt.Topic); exists {
			return fail(kerr.TopicAlreadyExists.Code, "topic already exists")
		}
		if live := len(s.liveIDs(img)); assignment == nil && int(rf) > live {
			return fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d exceeds the %d available brokers", rf, live))
		}
	} else {
		if err := s.engine.DiskFull(); err != nil {
			return fail(errorCode(err), "not creating topics while "+err.Error())
		}
		ctx, cancel := s.adminContext(req.TimeoutMillis)
		t, err := s.node.CreateTopic(ctx, controller.CreateTopicRequest{
			Name: rt.Topic, Partitions: partitions, ReplicationFactor: rf, Assignment: assignment, Configs: configs,
		})
		cancel()
		if err != nil {
			if !errors.Is(err, metadata.ErrTopicExists) {
				s.log.Warn("create topic failed", "topic", rt.Topic, "err", err)
			}
			return fail(errorCode(err), err.Error())
		}
		id = t.ID
		if rerr := s.cluster.Reconcile(); rerr != nil {
			s.log.Warn("reconcile after create", "err", rerr)
			if err := s.cluster.RollbackCreate(t, rerr); err != nil {
				return fail(errorCode(err), err.Error())
			}
		}
		s.log.Info("created topic", "topic", rt.Topic, "partitions", len(t.Partitions), "replication_factor", rf)
	}
	st.TopicID = id
	st.NumPartitions = partitions
	st.ReplicationFactor = rf
	for _, e := range cfg.Entries() {
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
	return st
}

// liveIDs returns the ids of the unfenced brokers.
func (s *Server) liveIDs(img *metadata.Image) []int32 {
	var out []int32
	for _, b := range img.Brokers() {
		if !b.Fenced {
			out = append(out, b.ID)
		}
	}
	return out
}
