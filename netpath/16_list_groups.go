package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5
//
// Behavior:
//   - Lists the groups this broker coordinates (clients ask every broker),
//     filtered by state names on v4 (case-insensitive) and by group type
//     on v5 ("classic", "consumer"; case-insensitive), which also reports
//     each group's type.
//   - COORDINATOR_LOAD_IN_PROGRESS while some owned offsets partition is
//     still loading; the listing then holds the loaded groups.

func init() { register(16, 0, 5, handleListGroups) }

func handleListGroups(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if err := s.groups.Stale(); err != nil {
		resp.ErrorCode = errorCode(err)
		return immediate(resp)
	}
	list, err := s.groups.ListFiltered(req.StatesFilter, req.TypesFilter)
	resp.ErrorCode = errorCode(err)
	clusterOK := s.authorizeCluster(r, metadata.OpDescribe)
	for _, l := range list {
		if !clusterOK && !s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, l.Group) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, l.State, l.GroupType
		resp.Groups = append(resp.Groups, g)
	}
	return immediate(resp)
}
