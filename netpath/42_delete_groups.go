package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2
//
// Behavior:
//   - Bridged to group.Manager.DeleteGroups: only Empty groups are deleted
//     (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for unknown ones); the
//     answer waits (in resolve) until the tombstones are durable.

func init() { register(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if err := s.groups.Stale(); err != nil {
		for _, id := range req.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, errorCode(err)
			resp.Groups = append(resp.Groups, g)
		}
		return immediate(resp)
	}
	var allowed []string
	for _, id := range req.Groups {
		if s.authorize(r, metadata.OpDelete, metadata.ResourceGroup, id) {
			allowed = append(allowed, id)
		} else {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, errorCode(errGroupAuthz)
			resp.Groups = append(resp.Groups, g)
		}
	}
	f := s.groups.DeleteGroups(allowed)
	return reply{resolve: func(done <-chan struct{}) *response {
		res, ok := waitFuture(r, f, done)
		if !ok {
			return nil
		}
		for _, d := range res {
			if d.Err == nil {
				s.shares.Delete(d.Group, nil) // a share group's partition state
			}
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = d.Group, errorCode(d.Err)
			resp.Groups = append(resp.Groups, g)
		}
		return &response{msg: resp}
	}}
}
