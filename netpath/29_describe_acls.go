package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAcls: v0-3
//
// Behavior:
//   - Lists the ACL bindings matching the filter from this broker's
//     metadata image, grouped by resource pattern. v0 filters are literal.
//   - Needs DESCRIBE on the cluster when the authorizer is on. ACLs can be
//     managed with the authorizer off, so they can be set up before it is
//     turned on.

func init() { register(29, 0, 3, handleDescribeACLs) }

func handleDescribeACLs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !s.authorizeCluster(r, metadata.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return immediate(resp)
	}
	f := aclFilter(int8(req.ResourceType), req.ResourceName, int8(req.ResourcePatternType), req.Principal, req.Host, int8(req.Operation), int8(req.PermissionType))
	if !validFilter(f) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return immediate(resp)
	}
	acls := s.node.MetadataImage().ACLs(f)
	for i := 0; i < len(acls); {
		a := acls[i]
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType = kmsg.ACLResourceType(a.ResourceType)
		res.ResourceName = a.ResourceName
		res.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
		for ; i < len(acls) && acls[i].ResourceType == a.ResourceType && acls[i].ResourceName == a.ResourceName && acls[i].PatternType == a.PatternType; i++ {
			e := kmsg.NewDescribeACLsResponseResourceACL()
			e.Principal, e.Host = acls[i].Principal, acls[i].Host
			e.Operation, e.PermissionType = kmsg.ACLOperation(acls[i].Operation), kmsg.ACLPermissionType(acls[i].Permission)
			res.ACLs = append(res.ACLs, e)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return immediate(resp)
}
