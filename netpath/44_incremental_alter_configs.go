package netpath

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
//   - TOPIC resources change the topic's dynamic configs; BROKER resources
//     (a broker id, or "" for the cluster-wide default) change the dynamic
//     broker configs (engine.DynamicBrokerKeys: the cluster-wide topic
//     defaults and the replication throttle rates); GROUP resources the
//     share-group settings (share.GroupConfigKeys). Other types get
//     INVALID_REQUEST.
//   - SET, DELETE, and APPEND/SUBTRACT for list configs (cleanup.policy,
//     leader/follower.replication.throttled.replicas);
//     the result is validated as a whole before it is proposed to the
//     controller: unknown keys and bad values are INVALID_CONFIG with a
//     message, unknown topics UNKNOWN_TOPIC_OR_PARTITION, read-only broker
//     configs INVALID_REQUEST, a key given twice INVALID_REQUEST.
//   - Resources are independent: each succeeds or fails alone; a resource
//     named twice in one request fails both times (INVALID_REQUEST).
//   - validate_only checks and changes nothing.
//   - Every broker applies the change live from the metadata log.

func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	return reply{resolve: func(<-chan struct{}) *response {
		errs := s.alterConfigResources(r, len(req.Resources), func(i int) (kmsg.ConfigResourceType, string, []configOp) {
			rr := req.Resources[i]
			ops := make([]configOp, 0, len(rr.Configs))
			for _, c := range rr.Configs {
				ops = append(ops, configOp{name: c.Name, op: c.Op, value: c.Value})
			}
			return rr.ResourceType, rr.ResourceName, ops
		}, false, req.ValidateOnly)
		for i, rr := range req.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			if errs[i] != nil {
				sr.ErrorCode, sr.ErrorMessage = errs[i].code, &errs[i].msg
			}
			resp.Resources = append(resp.Resources, sr)
		}
		return &response{msg: resp}
	}}
}
