package netpath

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/netpath/sasl"
)

// Authentication and authorization, the broker side.
//
// A listener named in SecurityConfig.SASLListeners accepts only
// ApiVersions, SaslHandshake and SaslAuthenticate until the client has
// authenticated (SCRAM-SHA-256/512 against the controller's credentials,
// or PLAIN checked against the same credentials, on TLS only unless
// PlainOverPlaintext); until then requests are capped at
// PreAuthMaxRequestBytes and anything else closes the connection, as Kafka
// does. A failed authentication is answered after AuthFailureDelay and the
// connection is closed.
//
// With Authorizer set every request is checked against the ACLs in the
// metadata image (metadata.Image.Authorize) for the connection's principal:
// "User:<name>" after SASL, "User:ANONYMOUS" otherwise. Super users pass
// every check. Replica fetches need CLUSTER_ACTION on the cluster (so a
// forged replica id gains nothing: CVE-2018-1288).

// AnonymousPrincipal is the principal of an unauthenticated connection.
const AnonymousPrincipal = "User:ANONYMOUS"

// SecurityConfig configures SASL and ACLs.
type SecurityConfig struct {
	// SASLListeners names the listeners ("plaintext", "tls") that require
	// SASL authentication.
	SASLListeners []string
	// Mechanisms offered (sasl.ScramSHA256, sasl.ScramSHA512, sasl.Plain).
	Mechanisms []string
	// PlainOverPlaintext allows PLAIN on a listener without TLS (the
	// password would cross the network in clear text).
	PlainOverPlaintext bool
	// PreAuthMaxRequestBytes bounds request frames before authentication.
	PreAuthMaxRequestBytes int32
	// AuthFailureDelay delays the answer to a failed authentication
	// (connection.failed.authentication.delay.ms), slowing guessing.
	AuthFailureDelay time.Duration
	// Authorizer enables ACL checks: deny unless an ACL allows.
	Authorizer bool
	// SuperUsers ("User:name") bypass ACLs.
	SuperUsers []string
	// InterBrokerUser/InterBrokerPassword authenticate this broker's own
	// connections to other brokers (replica fetches, transaction markers)
	// with SCRAM-SHA-512 when the plaintext listener requires SASL.
	InterBrokerUser     string
	InterBrokerPassword string
}

// DefaultSecurityConfig has SASL and ACLs off.
func DefaultSecurityConfig() SecurityConfig {
	return SecurityConfig{
		Mechanisms:             []string{sasl.ScramSHA256, sasl.ScramSHA512},
		PreAuthMaxRequestBytes: 512 << 10,
		AuthFailureDelay:       time.Second,
	}
}

// Validate checks the security settings.
func (c SecurityConfig) Validate() error {
	for _, l := range c.SASLListeners {
		if l != "plaintext" && l != "tls" {
			return fmt.Errorf("sasl listener %q: want plaintext or tls", l)
		}
	}
	for _, m := range c.Mechanisms {
		if m != sasl.Plain && m != sasl.ScramSHA256 && m != sasl.ScramSHA512 {
			return fmt.Errorf("sasl mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
	}
	if len(c.SASLListeners) > 0 && len(c.Mechanisms) == 0 {
		return fmt.Errorf("sasl listeners set but no mechanism enabled")
	}
	if c.PreAuthMaxRequestBytes < 1024 {
		return fmt.Errorf("pre-authentication request limit %d must be at least 1024", c.PreAuthMaxRequestBytes)
	}
	for _, u := range c.SuperUsers {
		if len(u) <= len("User:") || u[:len("User:")] != "User:" {
			return fmt.Errorf("super user %q: want User:<name>", u)
		}
	}
	if (c.InterBrokerUser == "") != (c.InterBrokerPassword == "") {
		return fmt.Errorf("inter-broker user and password go together")
	}
	return nil
}

// connAuth is a connection's authentication state.
type connAuth struct {
	mu        sync.Mutex
	required  bool
	mechanism string // chosen by SaslHandshake
	exchange  sasl.Exchange
	principal string
	// ok is set when no authentication is required or it succeeded; the
	// reader checks it on every request, so it is an atomic.
	ok atomic.Bool
}

func (a *connAuth) authenticated() bool { return a.ok.Load() }

func (c *conn) principal() string {
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	if c.auth.principal != "" {
		return c.auth.principal
	}
	return AnonymousPrincipal
}

func (c *conn) remoteHost() string {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return c.nc.RemoteAddr().String()
	}
	return host
}

// saslRequired reports whether listener l requires SASL.
func (s *Server) saslRequired(l *listener) bool {
	return slices.Contains(s.cfg.Security.SASLListeners, l.name)
}

// preAuthAllowed lists the API keys served before authentication.
func preAuthAllowed(key int16) bool {
	return key == 18 || key == 17 || key == 36 // ApiVersions, SaslHandshake, SaslAuthenticate
}

// authorize checks op on a resource for the request's principal.
func (s *Server) authorize(r *request, op, resourceType int8, name string) bool {
	if !s.cfg.Security.Authorizer {
		return true
	}
	p := r.conn.principal()
	if slices.Contains(s.cfg.Security.SuperUsers, p) {
		return true
	}
	ok := s.node.MetadataImage().Authorize(p, r.conn.remoteHost(), op, resourceType, name)
	if !ok {
		s.stats.authzDenied.Add(1)
		s.log.Debug("authorization denied", "principal", p, "operation", op, "resource_type", resourceType, "resource", name)
	}
	return ok
}

// authorizeCluster checks op on the cluster resource.
func (s *Server) authorizeCluster(r *request, op int8) bool {
	return s.authorize(r, op, metadata.ResourceCluster, metadata.ClusterResourceName)
}

// scramLookup reads credentials from the metadata image.
func (s *Server) scramLookup(user, mechanism string) (sasl.Credential, bool) {
	c, ok := s.node.MetadataImage().ScramCredential(user, mechanism)
	if !ok {
		return sasl.Credential{}, false
	}
	return sasl.Credential{Mechanism: c.Mechanism, Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true
}
