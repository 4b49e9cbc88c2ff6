package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateAcls: v0-3
//
// Behavior:
//   - Adds ACL bindings through the controller; an existing identical
//     binding is not duplicated. Each creation gets its own result: an
//     invalid binding (unknown enum, a principal not "User:<name>", a
//     cluster resource not named kafka-cluster, a pattern other than
//     literal/prefixed) is INVALID_REQUEST.
//   - Needs ALTER on the cluster when the authorizer is on.
//   - Runs in resolve: the controller write does not block the reader.

func init() { register(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	allowed := s.authorizeCluster(r, metadata.OpAlter)
	return reply{resolve: func(<-chan struct{}) *response {
		acls := make([]metadata.ACL, len(req.Creations))
		for i, c := range req.Creations {
			acls[i] = metadata.ACL{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: int8(c.ResourcePatternType),
				Principal: c.Principal, Host: c.Host, Operation: int8(c.Operation), Permission: int8(c.PermissionType)}
		}
		var errs []error
		var err error
		if allowed && len(acls) > 0 {
			ctx, cancel := s.adminContext(0)
			errs, err = s.node.CreateACLs(ctx, acls)
			cancel()
		}
		for i := range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			e := err
			if e == nil && i < len(errs) {
				e = errs[i]
			}
			switch {
			case !allowed:
				res.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case e != nil:
				res.ErrorCode = errorCode(e)
				res.ErrorMessage = errorMessage(e)
			}
			resp.Results = append(resp.Results, res)
		}
		return &response{msg: resp}
	}}
}
