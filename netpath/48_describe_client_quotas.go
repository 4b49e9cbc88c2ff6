package netpath

import (
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeClientQuotas: v0-1
//
// Behavior:
//   - Answers from this broker's metadata image with the quotas set on
//     `user` and `client-id` entities (specific or default, alone or
//     combined), filtered as KIP-546 says: each component matches a name
//     exactly, the default, or any; strict leaves out entities with a
//     component the filter does not name. No components and not strict:
//     every entity.
//   - An unknown entity type, an entity type named twice, an exact match
//     without a name or an unknown match type is INVALID_REQUEST.
//   - Needs DESCRIBE_CONFIGS on the cluster when the authorizer is on
//     (CLUSTER_AUTHORIZATION_FAILED otherwise).

func init() { register(48, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) reply {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return immediate(resp)
	}
	if !s.authorizeCluster(r, metadata.OpDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "not authorized to describe client quotas")
	}
	filter := make([]metadata.QuotaFilterComponent, 0, len(req.Components))
	for _, c := range req.Components {
		filter = append(filter, metadata.QuotaFilterComponent{EntityType: c.EntityType, MatchType: int8(c.MatchType), Match: c.Match})
	}
	quotas, err := s.node.MetadataImage().DescribeClientQuotas(filter, req.Strict)
	if err != nil {
		return fail(errorCode(err), err.Error())
	}
	for _, q := range quotas {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, comp := range quotaEntityComponents(q.Entity) {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = comp.typ, comp.name
			e.Entity = append(e.Entity, ee)
		}
		for _, k := range []string{metadata.QuotaConsumerByteRate, metadata.QuotaProducerByteRate, metadata.QuotaRequestPercentage} {
			if v, ok := q.Values[k]; ok {
				ev := kmsg.NewDescribeClientQuotasResponseEntryValue()
				ev.Key, ev.Value = k, v
				e.Values = append(e.Values, ev)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	return immediate(resp)
}

type quotaComponent struct {
	typ  string
	name *string // nil: the default
}

// quotaEntityComponents is the wire form of an entity: user first, then
// client-id, a nil name for a default.
func quotaEntityComponents(e metadata.QuotaEntity) []quotaComponent {
	var out []quotaComponent
	add := func(typ string, n metadata.QuotaName) {
		if !n.Set {
			return
		}
		c := quotaComponent{typ: typ}
		if !n.Default {
			name := n.Name
			c.name = &name
		}
		out = append(out, c)
	}
	add(metadata.QuotaEntityUser, e.User)
	add(metadata.QuotaEntityClientID, e.ClientID)
	return out
}
