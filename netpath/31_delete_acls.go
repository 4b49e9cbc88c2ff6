package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteAcls: v0-3
//
// Behavior:
//   - Removes, through the controller, every binding matching each filter
//     and returns them per filter. A filter with an unknown enum value is
//     INVALID_REQUEST and deletes nothing.
//   - Needs ALTER on the cluster when the authorizer is on.
//   - Runs in resolve: the controller write does not block the reader.

func init() { register(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	allowed := s.authorizeCluster(r, metadata.OpAlter)
	return reply{resolve: func(<-chan struct{}) *response {
		var filters []metadata.ACLFilter
		var idx []int // request filter index of each valid filter
		codes := make([]int16, len(req.Filters))
		for i, f := range req.Filters {
			mf := aclFilter(int8(f.ResourceType), f.ResourceName, int8(f.ResourcePatternType), f.Principal, f.Host, int8(f.Operation), int8(f.PermissionType))
			switch {
			case !allowed:
				codes[i] = kerr.ClusterAuthorizationFailed.Code
			case !validFilter(mf):
				codes[i] = kerr.InvalidRequest.Code
			default:
				filters = append(filters, mf)
				idx = append(idx, i)
			}
		}
		deleted := make([][]metadata.ACL, len(req.Filters))
		if len(filters) > 0 {
			ctx, cancel := s.adminContext(0)
			got, err := s.node.DeleteACLs(ctx, filters)
			cancel()
			for j, i := range idx {
				switch {
				case err != nil:
					codes[i] = errorCode(err)
				case j < len(got):
					deleted[i] = got[j]
				}
			}
		}
		for i := range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode = codes[i]
			for _, a := range deleted[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
				m.Principal, m.Host = a.Principal, a.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
			resp.Results = append(resp.Results, res)
		}
		return &response{msg: resp}
	}}
}
