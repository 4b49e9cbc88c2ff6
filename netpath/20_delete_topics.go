package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behavior:
//   - v0-5 name topics; v6 names them or gives their ids.
//   - The topic is deleted through the active controller; every broker
//     removes its local logs when its image applies the deletion (this one
//     before answering). Fetches already holding file ranges finish first
//     (the engine keeps files open until released).
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
	return reply{resolve: func(<-chan struct{}) *response {
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
			img := s.node.MetadataImage()
			var name string
			if t.name != nil {
				name = *t.name
			} else {
				info, ok := img.TopicByID(metadata.UUID(t.id))
				if !ok {
					fail(kerr.UnknownTopicID.Code, "unknown topic id")
					continue
				}
				name = info.Name
				st.Topic = &info.Name
			}
			if info, ok := img.Topic(name); ok {
				st.TopicID = info.ID
			}
			if !s.authorize(r, metadata.OpDelete, metadata.ResourceTopic, name) {
				fail(kerr.TopicAuthorizationFailed.Code, "not authorized to delete the topic")
				continue
			}
			if isInternalTopic(name) {
				fail(kerr.InvalidRequest.Code, "internal topics cannot be deleted")
				continue
			}
			ctx, cancel := s.adminContext(req.TimeoutMillis)
			err := s.node.DeleteTopic(ctx, name)
			cancel()
			if err != nil {
				fail(errorCode(err), err.Error())
				continue
			}
			if err := s.cluster.Reconcile(); err != nil {
				s.log.Warn("reconcile after delete", "err", err)
			}
			s.log.Info("deleted topic", "topic", name)
			resp.Topics = append(resp.Topics, st)
		}
		return &response{msg: resp}
	}}
}
