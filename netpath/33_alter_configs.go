package netpath

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behavior:
//   - The legacy, non-incremental form: the configs given become the
//     resource's whole dynamic set (keys not named lose their dynamic
//     value), for TOPIC and BROKER resources as IncrementalAlterConfigs
//     (44_incremental_alter_configs.go), with the same validation and
//     error codes. A null value is INVALID_CONFIG.
//   - validate_only checks and changes nothing.

func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	return reply{resolve: func(<-chan struct{}) *response {
		errs := s.alterConfigResources(r, len(req.Resources), func(i int) (kmsg.ConfigResourceType, string, []configOp) {
			rr := req.Resources[i]
			ops := make([]configOp, 0, len(rr.Configs))
			for _, c := range rr.Configs {
				ops = append(ops, configOp{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value})
			}
			return rr.ResourceType, rr.ResourceName, ops
		}, true, req.ValidateOnly)
		for i, rr := range req.Resources {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			if errs[i] != nil {
				sr.ErrorCode, sr.ErrorMessage = errs[i].code, &errs[i].msg
			}
			resp.Resources = append(resp.Resources, sr)
		}
		return &response{msg: resp}
	}}
}
