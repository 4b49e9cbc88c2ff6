package netpath

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate: v0-2
//
// Behavior:
//   - Carries one step of the mechanism chosen by SaslHandshake; runs on
//     the connection's reader, so the next request is read only once the
//     outcome is known.
//   - Success sets the connection's principal ("User:<name>"). Failure is
//     answered SASL_AUTHENTICATION_FAILED after AuthFailureDelay, without
//     saying why (no user enumeration), and the connection is closed.
//   - Before a handshake, or after success (re-authentication, KIP-368,
//     is not supported), the answer is ILLEGAL_SASL_STATE and the
//     connection closes.
//   - v1+ reports session_lifetime_ms 0 (sessions do not expire).

func init() { register(36, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	a := &r.conn.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exchange == nil || a.principal != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{resolve: immediate(resp).resolve, closeAfter: true}
	}
	out, err := a.exchange.Step(req.SASLAuthBytes)
	if err != nil {
		s.stats.authFailures.Add(1)
		s.log.Info("sasl authentication failed", "remote", r.conn.nc.RemoteAddr().String(), "mechanism", a.mechanism, "user", a.exchange.User(), "err", err)
		a.exchange = nil
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "authentication failed"
		resp.ErrorMessage = &msg
		delay := s.cfg.Security.AuthFailureDelay
		return reply{closeAfter: true, resolve: func(done <-chan struct{}) *response {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-done:
				return nil
			}
			return &response{msg: resp}
		}}
	}
	resp.SASLAuthBytes = out
	if a.exchange.Done() {
		a.principal = "User:" + a.exchange.User()
		a.exchange = nil
		a.ok.Store(true)
		s.log.Debug("sasl authenticated", "remote", r.conn.nc.RemoteAddr().String(), "principal", a.principal, "mechanism", a.mechanism)
	}
	return immediate(resp)
}
