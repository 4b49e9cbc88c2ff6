package netpath

import (
	"fmt"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterClientQuotas: v0-1
//
// Behavior:
//   - Sets and removes `producer_byte_rate`, `consumer_byte_rate` and
//     `request_percentage` on `user` / `client-id` entities (a null name
//     is the default entity), through the controller; every broker then
//     enforces them (quotas.go, request_quota.go). Each entry succeeds or
//     fails on its own.
//   - INVALID_REQUEST for: an entity type other than user and client-id,
//     one named twice or no component at all, a key named twice, an
//     unknown key, a byte rate that is not a positive whole number, a
//     request_percentage that is not a positive number.
//   - validate_only checks and changes nothing.
//   - Needs ALTER_CONFIGS on the cluster when the authorizer is on
//     (CLUSTER_AUTHORIZATION_FAILED per entry).

func init() { register(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := s.authorizeCluster(r, metadata.OpAlterConfigs)
	return reply{resolve: func(<-chan struct{}) *response {
		var cmd metadata.AlterClientQuotas
		var items []int // response entry of each command entry
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, c := range e.Entity {
				ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
				ee.Type, ee.Name = c.Type, c.Name
				re.Entity = append(re.Entity, ee)
			}
			alt, err := quotaAlteration(e)
			switch {
			case !allowed:
				re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case err != nil:
				msg := err.Error()
				re.ErrorCode, re.ErrorMessage = errorCode(err), &msg
			case !req.ValidateOnly:
				cmd.Entries = append(cmd.Entries, alt)
				items = append(items, len(resp.Entries))
			}
			resp.Entries = append(resp.Entries, re)
		}
		if len(cmd.Entries) == 0 {
			return &response{msg: resp}
		}
		ctx, cancel := s.adminContext(0)
		errs, err := s.node.AlterClientQuotas(ctx, cmd)
		cancel()
		for i, at := range items {
			e := err
			if e == nil && i < len(errs) {
				e = errs[i]
			}
			if e != nil {
				msg := e.Error()
				resp.Entries[at].ErrorCode, resp.Entries[at].ErrorMessage = errorCode(e), &msg
			}
		}
		if err == nil {
			s.log.Info("altered client quotas", "entries", len(cmd.Entries))
		}
		return &response{msg: resp}
	}}
}

// quotaAlteration checks one request entry and turns it into the
// controller's form.
func quotaAlteration(e kmsg.AlterClientQuotasRequestEntry) (metadata.ClientQuotaAlteration, error) {
	var a metadata.ClientQuotaAlteration
	for _, c := range e.Entity {
		var slot *metadata.QuotaName
		switch c.Type {
		case metadata.QuotaEntityUser:
			slot = &a.Entity.User
		case metadata.QuotaEntityClientID:
			slot = &a.Entity.ClientID
		default:
			return a, fmt.Errorf("%w: unsupported entity type %q", metadata.ErrInvalidQuota, c.Type)
		}
		if slot.Set {
			return a, fmt.Errorf("%w: entity type %q named twice", metadata.ErrInvalidQuota, c.Type)
		}
		if c.Name == nil {
			*slot = metadata.DefaultName()
		} else {
			*slot = metadata.Specific(*c.Name)
		}
	}
	seen := map[string]bool{}
	for _, op := range e.Ops {
		if seen[op.Key] {
			return a, fmt.Errorf("%w: key %q named twice", metadata.ErrInvalidQuota, op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			a.Remove = append(a.Remove, op.Key)
			continue
		}
		if a.Set == nil {
			a.Set = map[string]float64{}
		}
		a.Set[op.Key] = op.Value
	}
	return a, metadata.ValidateQuotaAlteration(a)
}
