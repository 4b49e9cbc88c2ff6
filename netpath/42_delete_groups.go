package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2
//
// Behavior:
//   - Bridged to group.Manager.DeleteGroups: only Empty groups are deleted
//     (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for unknown ones); the
//     answer waits (in resolve) until the tombstones are durable.
//   - A deleted share group's share-partition state is deleted too: of
//     every partition of the topics its coordinator recorded as
//     initialized (in __share_group_state, wherever it is held), and
//     whatever this broker holds.

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
				s.deleteShareState(d.Group, d.ShareTopics)
			}
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = d.Group, errorCode(d.Err)
			resp.Groups = append(resp.Groups, g)
		}
		return &response{msg: resp}
	}}
}

// deleteShareState drops a deleted share group's state: that of the
// partitions of topics (its initialized topics) wherever it is stored,
// and what this broker holds. The group is gone already, so a failure
// only leaves state a new group of that name would resume from.
func (s *Server) deleteShareState(groupID string, topics []group.TopicID) {
	img := s.node.MetadataImage()
	for _, id := range topics {
		t, ok := img.TopicByID(metadata.UUID(id))
		if !ok {
			continue
		}
		for p := range int32(len(t.Partitions)) {
			_ = s.shares.DeletePartition(share.Key{Group: groupID, TopicID: [16]byte(id), Partition: p})
		}
	}
	s.shares.Delete(groupID, nil)
}
