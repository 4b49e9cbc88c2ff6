package netpath

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behavior:
//   - v0-5 name topics; v6 names them or gives their ids.
//   - Deleting removes the topic's data; fetches already holding file ranges
//     finish first (the engine keeps files open until released).
//   - Internal topics cannot be deleted.

func init() { register(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			n := n
			targets = append(targets, target{name: &n})
		}
	}
	for _, t := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = t.name, t.id
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 5 {
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
		}
		var name string
		if t.name != nil {
			name = *t.name
		} else {
			info, ok := s.topicByID(t.id)
			if !ok {
				fail(kerr.UnknownTopicID.Code, "unknown topic id")
				continue
			}
			name = info.Name
			st.Topic = &info.Name
		}
		if info, ok := s.engine.Topic(name); ok {
			st.TopicID = info.ID
		}
		if isInternalTopic(name) {
			fail(kerr.InvalidRequest.Code, "internal topics cannot be deleted")
			continue
		}
		if err := s.engine.DeleteTopic(name); err != nil {
			fail(errorCode(err), err.Error())
			continue
		}
		s.log.Info("deleted topic", "topic", name)
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}
