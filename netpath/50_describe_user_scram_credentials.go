package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/netpath/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials: v0
//
// Behavior:
//   - Lists users' SCRAM mechanisms and iteration counts (never salts or
//     keys) from this broker's metadata image; a null user list means
//     every user. A named user without credentials is RESOURCE_NOT_FOUND,
//     one named twice DUPLICATE_RESOURCE.
//   - Needs DESCRIBE on the cluster when the authorizer is on.

func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizeCluster(r, metadata.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return immediate(resp)
	}
	byUser := map[string][]metadata.ScramCredential{}
	var users []string
	for _, c := range s.node.MetadataImage().ScramCredentials() {
		if _, ok := byUser[c.User]; !ok {
			users = append(users, c.User)
		}
		byUser[c.User] = append(byUser[c.User], c)
	}
	if req.Users != nil {
		count := map[string]int{}
		for _, u := range req.Users {
			count[u.Name]++
		}
		users = users[:0]
		done := map[string]bool{}
		for _, u := range req.Users {
			if !done[u.Name] {
				users = append(users, u.Name)
				done[u.Name] = true
			}
		}
		for _, name := range users {
			rr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			rr.User = name
			switch {
			case count[name] > 1:
				rr.ErrorCode = kerr.DuplicateResource.Code
			case len(byUser[name]) == 0:
				rr.ErrorCode = kerr.ResourceNotFound.Code
			default:
				rr.CredentialInfos = scramInfos(byUser[name])
			}
			resp.Results = append(resp.Results, rr)
		}
		return immediate(resp)
	}
	for _, name := range users {
		rr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		rr.User = name
		rr.CredentialInfos = scramInfos(byUser[name])
		resp.Results = append(resp.Results, rr)
	}
	return immediate(resp)
}

func scramInfos(cs []metadata.ScramCredential) []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
	var out []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo
	for _, c := range cs {
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism = 1
		if c.Mechanism == sasl.ScramSHA512 {
			ci.Mechanism = 2
		}
		ci.Iterations = int32(c.Iterations)
		out = append(out, ci)
	}
	return out
}
