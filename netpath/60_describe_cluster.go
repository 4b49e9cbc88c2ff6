package netpath

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1
//
// Behavior:
//   - Lists this broker as the only broker and as the controller.
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
	resp.ClusterID = s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID
	host, port := s.advertised(r.conn.l)
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = append(resp.Brokers, b)
	return immediate(resp)
}
