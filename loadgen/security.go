package loadgen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how every connection of a run reaches the cluster: TLS,
// SASL, both or neither (the zero value: plaintext).
type Security struct {
	// TLS turns TLS on with the system roots; any of the TLS file or
	// server name options turns it on too.
	TLS           bool
	TLSCA         string // PEM CA bundle to trust instead of the system roots
	TLSCert       string // PEM client certificate (mutual TLS), with TLSKey
	TLSKey        string
	TLSServerName string // overrides the name verified (default: the host dialed)
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty with
	// SASLUser set means SCRAM-SHA-512.
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
}

// Mechanism names, as the SaslHandshake sends them.
const (
	mechPlain     = "PLAIN"
	mechScram256  = "SCRAM-SHA-256"
	mechScram512  = "SCRAM-SHA-512"
	defaultMech   = mechScram512
	redactedValue = "[redacted]"
)

// TLSEnabled reports whether connections use TLS.
func (s Security) TLSEnabled() bool {
	return s.TLS || s.TLSCA != "" || s.TLSCert != "" || s.TLSKey != "" || s.TLSServerName != ""
}

// Mechanism is the SASL mechanism in effect ("" without SASL).
func (s Security) Mechanism() string {
	if m := strings.ToUpper(strings.TrimSpace(s.SASLMechanism)); m != "" {
		return m
	}
	if s.SASLUser != "" {
		return defaultMech
	}
	return ""
}

// Validate checks the options against each other; it does not read files.
func (s Security) Validate() error {
	switch {
	case (s.TLSCert == "") != (s.TLSKey == ""):
		return errors.New("--tls-cert and --tls-key go together (mutual TLS needs both)")
	case s.Mechanism() != "" && s.Mechanism() != mechPlain && s.Mechanism() != mechScram256 && s.Mechanism() != mechScram512:
		return fmt.Errorf("--sasl-mechanism %q: need PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism)
	case s.Mechanism() != "" && s.SASLUser == "":
		return fmt.Errorf("--sasl-mechanism %s needs --sasl-user", s.Mechanism())
	case s.SASLUser != "" && s.SASLPassword == "":
		return errors.New("--sasl-user needs a password: set RINGLOG_SASL_PASSWORD (or --sasl-password)")
	case s.SASLPassword != "" && s.SASLUser == "":
		return errors.New("a SASL password without --sasl-user")
	}
	return nil
}

// Warnings lists settings that work but are probably a mistake.
func (s Security) Warnings() []string {
	if s.Mechanism() == mechPlain && !s.TLSEnabled() {
		return []string{"SASL PLAIN without TLS sends the password in clear text on every connection (add --tls or --tls-ca)"}
	}
	return nil
}

// String describes the options without the password, so that a config
// printed with %v never shows it.
func (s Security) String() string {
	var parts []string
	if s.TLSEnabled() {
		t := "tls"
		if s.TLSCA != "" {
			t += " ca=" + s.TLSCA
		}
		if s.TLSCert != "" {
			t += " cert=" + s.TLSCert
		}
		if s.TLSServerName != "" {
			t += " server-name=" + s.TLSServerName
		}
		parts = append(parts, t)
	}
	if m := s.Mechanism(); m != "" {
		parts = append(parts, fmt.Sprintf("sasl %s user=%s password=%s", m, s.SASLUser, redactedValue))
	}
	if len(parts) == 0 {
		return "plaintext"
	}
	return strings.Join(parts, ", ")
}

// GoString keeps %#v from printing the password too.
func (s Security) GoString() string { return "loadgen.Security{" + s.String() + "}" }

// tlsConfig loads the TLS files (nil without TLS). ServerName stays empty
// unless overridden: kgo and dialLeanConn fill in the host dialed.
func (s Security) tlsConfig() (*tls.Config, error) {
	if !s.TLSEnabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLSServerName}
	if s.TLSCA != "" {
		pem, err := os.ReadFile(s.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", s.TLSCA)
		}
		cfg.RootCAs = pool
	}
	if s.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// saslMechanism is franz-go's client side of the mechanism (nil without
// SASL); kgo and the lean client both drive it.
func (s Security) saslMechanism() sasl.Mechanism {
	switch s.Mechanism() {
	case mechPlain:
		return plain.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsMechanism()
	case mechScram256:
		return scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha256Mechanism()
	case mechScram512:
		return scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}

// kgoOpts are the connection options of every franz-go client a run
// builds: seeds, client id, TLS and SASL.
func (c Config) kgoOpts(id string) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...), kgo.ClientID(id)}
	tc, err := c.Security.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.Security.saslMechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// wrapErr adds who we tried to be to TLS and SASL failures, which
// franz-go reports without the user or mechanism.
func (s Security) wrapErr(err error) error {
	if err == nil {
		return nil
	}
	var (
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		certErr     *tls.CertificateVerificationError
		recErr      tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed),
		errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("SASL %s authentication as %q failed: %w", s.Mechanism(), s.SASLUser, err)
	case errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &certErr):
		return fmt.Errorf("TLS: broker certificate not accepted (see --tls-ca, --tls-server-name): %w", err)
	case errors.As(err, &recErr) && s.TLSEnabled():
		return fmt.Errorf("TLS: the broker did not answer with TLS (plaintext listener?): %w", err)
	}
	return err
}

// dialSecure dials addr for the lean client and, as configured, runs the
// TLS handshake and the SASL exchange. tc and mech are built once per run.
func dialSecure(addr string, tc *tls.Config, mech sasl.Mechanism, user string, timeout time.Duration) (net.Conn, error) {
	raw, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
		tcp.SetWriteBuffer(4 << 20)
		tcp.SetReadBuffer(1 << 20)
	}
	conn := raw
	deadline := time.Now().Add(timeout)
	conn.SetDeadline(deadline)
	if tc != nil {
		cfg := tc
		if cfg.ServerName == "" {
			// Verify the name we dialed, as kgo does.
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				raw.Close()
				return nil, err
			}
			cfg = tc.Clone()
			cfg.ServerName = host
		}
		tlsConn := tls.Client(raw, cfg)
		if err := tlsConn.Handshake(); err != nil {
			raw.Close()
			return nil, fmt.Errorf("%s: TLS handshake: %w", addr, err)
		}
		conn = tlsConn
	}
	if mech != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := saslAuthenticate(ctx, conn, mech, user, addr)
		cancel()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// errSASLClosed: some brokers close the connection on a failed
// exchange instead of answering SASL_AUTHENTICATION_FAILED.
var errSASLClosed = errors.New("broker closed the connection")

// saslFormatter frames the SASL requests (non-flexible v1 headers).
var saslFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))

// saslAuthenticate runs SaslHandshake v1 and then SaslAuthenticate v1
// rounds until the session is done, on a connection nothing else uses yet.
// The connection's deadline bounds it.
func saslAuthenticate(ctx context.Context, conn net.Conn, mech sasl.Mechanism, user, addr string) error {
	corr := int32(0)
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := conn.Write(saslFormatter.AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		body, err := readFrame(conn, nil)
		if err != nil {
			return err
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr {
			return fmt.Errorf("correlation id %d, want %d", got, corr)
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(body[4:])
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(hs, hsResp); err != nil {
		return fmt.Errorf("sasl handshake: %w", err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("sasl handshake %s (broker offers %s): %w", mech.Name(), strings.Join(hsResp.SupportedMechanisms, ", "), err)
	}
	sess, msg, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	// Every SaslAuthenticate gets a response (KIP-152), also a final
	// message sent after the session is done; a few rounds suffice for
	// SCRAM (2) and PLAIN (1).
	done := false
	for round := 0; !done || len(msg) > 0; round++ {
		if round == 8 {
			return fmt.Errorf("sasl %s: exchange did not finish in %d rounds", mech.Name(), round)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(req, resp); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return fmt.Errorf("%w during SASL %s authentication as %q (wrong user or password?)", errSASLClosed, mech.Name(), user)
			}
			return fmt.Errorf("sasl authenticate: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
				return fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		msg = nil
		if !done {
			if done, msg, err = sess.Challenge(resp.SASLAuthBytes); err != nil {
				return err
			}
		}
	}
	return nil
}
