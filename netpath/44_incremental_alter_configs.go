package netpath

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
//   - TOPIC resources change the topic's dynamic configs; BROKER resources
//     (a broker id, or "" for the cluster-wide default) change the dynamic
//     broker configs (engine.DynamicBrokerKeys: the cluster-wide topic
//     defaults). Other types get INVALID_REQUEST.
//   - SET, DELETE, and APPEND/SUBTRACT for list configs (cleanup.policy);
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
		dup := duplicateResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
			return req.Resources[i].ResourceType, req.Resources[i].ResourceName
		})
		for i, rr := range req.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			var cerr *configErr
			if dup[i] {
				cerr = cfgErr(kerr.InvalidRequest.Code, "resource named more than once in the request")
			} else {
				ops := make([]configOp, 0, len(rr.Configs))
				for _, c := range rr.Configs {
					ops = append(ops, configOp{name: c.Name, op: c.Op, value: c.Value})
				}
				cerr = s.alterConfigResource(r, rr.ResourceType, rr.ResourceName, ops, false, req.ValidateOnly, 0)
			}
			if cerr != nil {
				sr.ErrorCode, sr.ErrorMessage = cerr.code, &cerr.msg
			}
			resp.Resources = append(resp.Resources, sr)
		}
		return &response{msg: resp}
	}}
}

// duplicateResources marks the resources named more than once.
func duplicateResources(n int, at func(int) (kmsg.ConfigResourceType, string)) []bool {
	type key struct {
		t    kmsg.ConfigResourceType
		name string
	}
	count := map[key]int{}
	for i := 0; i < n; i++ {
		t, name := at(i)
		count[key{t, name}]++
	}
	out := make([]bool, n)
	for i := range out {
		t, name := at(i)
		out[i] = count[key{t, name}] > 1
	}
	return out
}
