package netpath

import (
	"fmt"
	"github.com/ringlog/ringlog/controller/metadata"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
//   - count is the new total; it must exceed the current count
//     (INVALID_PARTITIONS otherwise).
//   - New partitions are placed through the active controller with the
//     topic's replication factor over the live brokers, or as the manual
//     assignment says (one replica list per new partition, registered
//     brokers, the topic's replication factor).
//   - validate_only checks and changes nothing.

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	return reply{resolve: func(<-chan struct{}) *response {
		for _, rt := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic = rt.Topic
			fail := func(code int16, msg string) {
				st.ErrorCode = code
				st.ErrorMessage = &msg
			}
			t, ok := s.node.MetadataImage().Topic(rt.Topic)
			var assignment [][]int32
			for _, a := range rt.Assignment {
				assignment = append(assignment, a.Replicas)
			}
			switch {
			case !s.authorize(r, metadata.OpAlter, metadata.ResourceTopic, rt.Topic):
				fail(kerr.TopicAuthorizationFailed.Code, "not authorized to alter the topic")
			case !ok:
				fail(kerr.UnknownTopicOrPartition.Code, "unknown topic")
			case isInternalTopic(rt.Topic):
				fail(kerr.InvalidRequest.Code, "internal topics cannot be changed")
			case rt.Count <= int32(len(t.Partitions)):
				fail(kerr.InvalidPartitions.Code, fmt.Sprintf("topic has %d partitions; the new count %d must be larger", len(t.Partitions), rt.Count))
			case assignment != nil && len(assignment) != int(rt.Count)-len(t.Partitions):
				fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("%d assignments for %d new partitions", len(assignment), int(rt.Count)-len(t.Partitions)))
			case req.ValidateOnly:
			case s.engine.DiskFull() != nil:
				err := s.engine.DiskFull()
				fail(errorCode(err), "not adding partitions while "+err.Error())
			default:
				ctx, cancel := s.adminContext(req.TimeoutMillis)
				_, err := s.node.CreatePartitions(ctx, rt.Topic, rt.Count, assignment)
				cancel()
				if err != nil {
					fail(errorCode(err), err.Error())
					break
				}
				if err := s.cluster.Reconcile(); err != nil {
					s.log.Warn("reconcile after create partitions", "err", err)
				}
				s.log.Info("added partitions", "topic", rt.Topic, "partitions", rt.Count)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return &response{msg: resp}
	}}
}
