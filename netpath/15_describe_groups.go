package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-6
//
// Behavior:
//   - Bridged to group.Manager.Describe, one result per requested group; a
//     group that does not exist is described as Dead with no error, a group
//     coordinated elsewhere gets NOT_COORDINATOR.
//   - Member metadata and assignments are filled only while Stable.
//   - Consumer (KIP-848) groups are described by the Manager too (their
//     members have no classic metadata or assignment bytes); v6 adds the
//     error message next to a group's error code.
//   - Authorized operations (v3+) are not computed: the field stays at
//     Kafka's "not requested" value.

func init() { register(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	var descs []group.GroupDescription
	if err := s.groups.Stale(); err != nil {
		for _, id := range req.Groups {
			descs = append(descs, group.GroupDescription{Group: id, Err: err})
		}
	} else {
		for _, id := range req.Groups {
			if s.authorize(r, metadata.OpDescribe, metadata.ResourceGroup, id) {
				descs = append(descs, s.groups.Describe([]string{id})...)
			} else {
				descs = append(descs, group.GroupDescription{Group: id, Err: errGroupAuthz})
			}
		}
	}
	for _, d := range descs {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ErrorCode = d.Group, errorCode(d.Err)
		g.ErrorMessage = groupErrorMessage(d.Err, g.ErrorCode)
		g.State, g.ProtocolType, g.Protocol = d.State, d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
			if gm.ProtocolMetadata == nil {
				gm.ProtocolMetadata = []byte{}
			}
			if gm.MemberAssignment == nil {
				gm.MemberAssignment = []byte{}
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return immediate(resp)
}
