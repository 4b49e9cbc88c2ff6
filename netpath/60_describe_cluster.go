package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1
//
// Behavior:
//   - Lists the live (unfenced) brokers with their endpoint for the
//     listener the request came in on, and the active controller.
//   - A broker whose metadata may be stale answers LEADER_NOT_AVAILABLE.
//   - v1: only endpoint type 1 (brokers) is served; 2 (controllers) gets
//     UNSUPPORTED_ENDPOINT_TYPE.

func init() { register(60, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return immediate(resp)
	}
	if !s.authorizeCluster(r, metadata.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return immediate(resp)
	}
	img := s.node.MetadataImage()
	resp.ClusterID = img.ClusterID()
	resp.ControllerID = -1
	if err := s.node.Fresh(); err != nil {
		resp.ErrorCode = kerr.LeaderNotAvailable.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return immediate(resp)
	}
	resp.ControllerID = s.node.Controller()
	for _, be := range s.liveBrokers(img, r.conn.l) {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = be.id, be.host, be.port, be.rack
		resp.Brokers = append(resp.Brokers, b)
	}
	return immediate(resp)
}
