package netpath

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
//   - count is the new total; it must exceed the current count
//     (INVALID_PARTITIONS otherwise).
//   - Manual assignments must name only this broker.
//   - validate_only checks and changes nothing.

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = &msg
		}
		info, ok := s.engine.Topic(rt.Topic)
		switch {
		case !ok:
			fail(kerr.UnknownTopicOrPartition.Code, "unknown topic")
		case isInternalTopic(rt.Topic):
			fail(kerr.InvalidRequest.Code, "internal topics cannot be changed")
		case rt.Count <= info.Partitions:
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("topic has %d partitions; the new count %d must be larger", info.Partitions, rt.Count))
		case !assignmentIsLocal(rt.Assignment, s.cfg.NodeID):
			fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("replicas must be exactly [%d] on a single broker", s.cfg.NodeID))
		case req.ValidateOnly:
		default:
			if err := s.engine.CreatePartitions(rt.Topic, rt.Count); err != nil {
				fail(errorCode(err), err.Error())
			} else {
				s.log.Info("added partitions", "topic", rt.Topic, "partitions", rt.Count)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}

func assignmentIsLocal(as []kmsg.CreatePartitionsRequestTopicAssignment, node int32) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != node {
			return false
		}
	}
	return true
}
