package netpath

import (
	"slices"

	"github.com/ringlog/ringlog/netpath/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1
//
// Behavior:
//   - Picks the mechanism for the SaslAuthenticate requests that follow;
//     the response lists the mechanisms this listener offers. PLAIN is
//     offered only on TLS listeners unless explicitly allowed.
//   - v0 (raw SASL tokens after the handshake, outside Kafka framing) is
//     answered UNSUPPORTED_VERSION. It is still advertised because
//     librdkafka enables SASL only when the advertised range includes v0,
//     although it then uses v1 and SaslAuthenticate.
//   - On a listener that does not require SASL, or once authenticated,
//     the answer is ILLEGAL_SASL_STATE.

func init() { register(17, 0, 1, handleSaslHandshake) }

// mechanismsFor lists what listener l offers.
func (s *Server) mechanismsFor(l *listener) []string {
	var out []string
	for _, m := range s.cfg.Security.Mechanisms {
		if m == sasl.Plain && l.tls == nil && !s.cfg.Security.PlainOverPlaintext {
			continue
		}
		out = append(out, m)
	}
	return out
}

func handleSaslHandshake(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	offered := s.mechanismsFor(r.conn.l)
	resp.SupportedMechanisms = offered
	a := &r.conn.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case req.Version == 0:
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	case !a.required || a.principal != "" || a.exchange != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !slices.Contains(offered, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		ex, err := sasl.NewExchange(req.Mechanism, s.scramLookup, nil)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			break
		}
		a.mechanism, a.exchange = req.Mechanism, ex
	}
	return immediate(resp)
}
