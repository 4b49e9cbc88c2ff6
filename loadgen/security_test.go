package loadgen

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSecurityValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       Security
		wantErr string
		mech    string
		tls     bool
		warn    bool
	}{
		{name: "plaintext"},
		{name: "tls system roots", s: Security{TLS: true}, tls: true},
		{name: "ca implies tls", s: Security{TLSCA: "ca.pem"}, tls: true},
		{name: "server name implies tls", s: Security{TLSServerName: "kafka"}, tls: true},
		{name: "mtls", s: Security{TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem"}, tls: true},
		{name: "cert without key", s: Security{TLSCert: "c.pem"}, wantErr: "--tls-cert and --tls-key"},
		{name: "key without cert", s: Security{TLS: true, TLSKey: "k.pem"}, wantErr: "--tls-cert and --tls-key"},
		{name: "user defaults to scram-512", s: Security{SASLUser: "alice", SASLPassword: "pw"}, mech: "SCRAM-SHA-512"},
		{name: "mechanism case", s: Security{SASLMechanism: "scram-sha-256", SASLUser: "alice", SASLPassword: "pw"}, mech: "SCRAM-SHA-256"},
		{name: "plain over tls", s: Security{TLS: true, SASLMechanism: "PLAIN", SASLUser: "alice", SASLPassword: "pw"}, mech: "PLAIN", tls: true},
		{name: "plain without tls warns", s: Security{SASLMechanism: "PLAIN", SASLUser: "alice", SASLPassword: "pw"}, mech: "PLAIN", warn: true},
		{name: "unknown mechanism", s: Security{SASLMechanism: "GSSAPI", SASLUser: "alice", SASLPassword: "pw"}, wantErr: "GSSAPI"},
		{name: "mechanism without user", s: Security{SASLMechanism: "PLAIN"}, wantErr: "needs --sasl-user"},
		{name: "user without password", s: Security{SASLUser: "alice"}, wantErr: "RINGLOG_SASL_PASSWORD"},
		{name: "password without user", s: Security{SASLPassword: "pw"}, wantErr: "without --sasl-user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want an error about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := tc.s.Mechanism(); got != tc.mech {
				t.Errorf("Mechanism() = %q, want %q", got, tc.mech)
			}
			if got := tc.s.TLSEnabled(); got != tc.tls {
				t.Errorf("TLSEnabled() = %v, want %v", got, tc.tls)
			}
			if got := len(tc.s.Warnings()) > 0; got != tc.warn {
				t.Errorf("Warnings() = %q", tc.s.Warnings())
			}
			if (tc.s.saslMechanism() != nil) != (tc.mech != "") {
				t.Errorf("saslMechanism() = %v for mechanism %q", tc.s.saslMechanism(), tc.mech)
			}
			// Config.Validate checks the security options too.
			cfg := DefaultConfig()
			cfg.Security = tc.s
			if err := cfg.Validate(); err != nil {
				t.Errorf("Config.Validate() = %v", err)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Security = Security{TLSKey: "k.pem"}
	if err := cfg.Validate(); err == nil {
		t.Error("Config.Validate() accepted --tls-key without --tls-cert")
	}
}

// TestSecurityNeverShowsPassword: printing the config, recording the
// workload in result.json and describing failures leave the password out.
func TestSecurityNeverShowsPassword(t *testing.T) {
	const pw = "s3cret-Pa55"
	cfg := DefaultConfig()
	cfg.Security = Security{TLSCA: "ca.pem", SASLUser: "alice", SASLPassword: pw}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), cfg.Security.String()} {
		if strings.Contains(s, pw) {
			t.Fatalf("password printed: %s", s)
		}
	}
	if !strings.Contains(cfg.Security.String(), "user=alice") {
		t.Errorf("String() = %q", cfg.Security.String())
	}
	w := cfg.workload()
	raw, _ := json.Marshal(w)
	if bytes.Contains(raw, []byte(pw)) {
		t.Fatalf("workload records the password: %s", raw)
	}
	if w["tls"] != "true" || w["sasl_mechanism"] != "SCRAM-SHA-512" || w["sasl_user"] != "alice" {
		t.Errorf("workload security fields: %s", raw)
	}
	if plain := DefaultConfig().workload(); plain["tls"] != "" || plain["sasl_mechanism"] != "" {
		t.Errorf("plaintext workload has security fields: %v", plain)
	}
	err := cfg.Security.wrapErr(kerr.SaslAuthenticationFailed)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), `"alice"`) {
		t.Errorf("wrapped auth error: %v", err)
	}
}

// TestExecuteSecurityChecks: a security setting that cannot work is a
// UsageError before any connection, and PLAIN without TLS warns on stderr
// (cmd/ringlog tests the flags and the exit status).
func TestExecuteSecurityChecks(t *testing.T) {
	var ue *UsageError
	o := DefaultOptions()
	o.Config.Bootstrap = []string{"127.0.0.1:1"} // never dialed
	o.Config.Security = Security{TLSKey: "k.pem"}
	if err := Execute(context.Background(), o, io.Discard, io.Discard); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("TLSKey alone: %v", err)
	}
	var stderr bytes.Buffer
	o.NullSink = true
	o.Config.Security = Security{SASLMechanism: "PLAIN", SASLUser: "bob", SASLPassword: "x"}
	err := Execute(context.Background(), o, io.Discard, &stderr)
	if !strings.Contains(stderr.String(), "warning: SASL PLAIN without TLS") {
		t.Errorf("no PLAIN warning:\n%s", stderr.String())
	}
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "null-sink") {
		t.Fatalf("NullSink with SASL: %v", err)
	}
}

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA.
type testPKI struct {
	dir                            string
	ca, clientCert, clientKey      string
	serverTLS                      *tls.Config
	caPool                         *x509.CertPool
	serverName, wrongCA, wrongName string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	sign := func(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) *x509.Certificate {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	writePEM := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey) {
		k := newKey()
		return sign(&x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign}, nil, &k.PublicKey, k), k
	}
	ca, caKey := newCA("loadgen test CA")
	other, _ := newCA("some other CA")
	srvKey := newKey()
	srv := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "broker"}, DNSNames: []string{"broker.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		ca, &srvKey.PublicKey, caKey)
	cliKey := newKey()
	cli := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "loadgen"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		ca, &cliKey.PublicKey, caKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	return testPKI{
		dir:        dir,
		ca:         writePEM("ca.pem", "CERTIFICATE", ca.Raw),
		wrongCA:    writePEM("other-ca.pem", "CERTIFICATE", other.Raw),
		clientCert: writePEM("client.pem", "CERTIFICATE", cli.Raw),
		clientKey:  writePEM("client-key.pem", "EC PRIVATE KEY", keyDER(cliKey)),
		serverTLS: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srv.Raw}, PrivateKey: srvKey}},
			MinVersion:   tls.VersionTLS12,
		},
		caPool:     pool,
		serverName: "broker.test",
		wrongName:  "not-the-broker.test",
	}
}

// TestRunTLSSASLAgainstKfake runs both clients, with a consumer, against
// a kfake cluster that requires mutual TLS and SASL, for every mechanism.
func TestRunTLSSASLAgainstKfake(t *testing.T) {
	pki := newTestPKI(t)
	srvTLS := pki.serverTLS.Clone()
	srvTLS.ClientAuth, srvTLS.ClientCAs = tls.RequireAndVerifyClientCert, pki.caPool
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.TLS(srvTLS), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "alice", "wonder land"),
		kfake.Superuser("SCRAM-SHA-256", "alice", "wonder land"),
		kfake.Superuser("PLAIN", "alice", "wonder land"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := Security{TLSCA: pki.ca, TLSCert: pki.clientCert, TLSKey: pki.clientKey, SASLUser: "alice", SASLPassword: "wonder land"}
	for _, tc := range []struct {
		client, mech string
	}{
		{"lean", ""}, // SCRAM-SHA-512 by default
		{"lean", "SCRAM-SHA-256"},
		{"lean", "PLAIN"},
		{"kgo", "SCRAM-SHA-512"},
	} {
		t.Run(tc.client+"-"+tc.mech, func(t *testing.T) {
			cfg := testConfig(c.ListenAddrs())
			cfg.Topic = "lg-sec-" + tc.client + tc.mech
			cfg.Client, cfg.Consumers, cfg.Duration = tc.client, 1, time.Second
			cfg.Security = base
			cfg.Security.SASLMechanism = tc.mech
			run, err := Run(context.Background(), cfg, progressOut(t))
			if err != nil {
				t.Fatal(err)
			}
			r := run.Result
			want := int64(cfg.Rate * cfg.Duration.Seconds())
			if r.Errors != 0 || r.MessagesAcked < want-2 || r.MessagesConsumed != r.MessagesAcked {
				t.Fatalf("acked %d (want %d), consumed %d, errors %d (%s)", r.MessagesAcked, want, r.MessagesConsumed, r.Errors, r.FirstError)
			}
			if r.Workload["tls"] != "true" || r.Workload["sasl_user"] != "alice" {
				t.Errorf("workload: %v", r.Workload)
			}
		})
	}

	// Failures end the run at once with an error that says what failed.
	for _, tc := range []struct {
		name   string
		client string
		mod    func(*Security)
		want   string
	}{
		// (kfake closes the connection on a wrong password, which franz-go
		// retries; the ringlog test in cmd/ringlog covers that case.)
		{"untrusted CA", "lean", func(s *Security) { s.TLSCA = pki.wrongCA }, "broker certificate not accepted"},
		{"wrong server name", "lean", func(s *Security) { s.TLSServerName = pki.wrongName }, "broker certificate not accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(c.ListenAddrs())
			cfg.Client = tc.client
			cfg.Security = base
			tc.mod(&cfg.Security)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			_, err := Run(ctx, cfg, progressOut(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("failure took %v", d)
			}
			if strings.Contains(err.Error(), "wonder") {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

// TestLeanDialSASL drives the lean client's own SASL exchange, which the
// runs above only reach once kgo has authenticated: a wrong password is
// refused with SASL_AUTHENTICATION_FAILED, an unknown mechanism with the
// broker's list.
func TestLeanDialSASL(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "alice", "wonder land"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	good := Security{SASLMechanism: "SCRAM-SHA-256", SASLUser: "alice", SASLPassword: "wonder land"}
	conn, err := dialSecure(addr, nil, good.saslMechanism(), good.SASLUser, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Authenticated: the connection now serves ordinary requests.
	if _, err := negotiateProduceVersion(conn, CodecNone); err != nil {
		t.Fatalf("ApiVersions after SASL: %v", err)
	}
	conn.Close()

	bad := good
	bad.SASLPassword = "nope"
	// kfake closes the connection instead of answering
	// SASL_AUTHENTICATION_FAILED (ringlog and Kafka answer first).
	if _, err := dialSecure(addr, nil, bad.saslMechanism(), bad.SASLUser, 5*time.Second); !errors.Is(err, errSASLClosed) {
		t.Fatalf("wrong password: %v", err)
	}
	// Kafka and ringlog answer SASL_AUTHENTICATION_FAILED (with a message)
	// before closing.
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("authentication failed")
		return resp, nil, true
	})
	_, err = dialSecure(addr, nil, bad.saslMechanism(), bad.SASLUser, 5*time.Second)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("SASL_AUTHENTICATION_FAILED answer: %v", err)
	}
	if wrapped := bad.wrapErr(err); !strings.Contains(wrapped.Error(), `SASL SCRAM-SHA-256 authentication as "alice" failed`) {
		t.Fatalf("wrapped: %v", wrapped)
	}
	other := good
	other.SASLMechanism = "SCRAM-SHA-512"
	_, err = dialSecure(addr, nil, other.saslMechanism(), other.SASLUser, 5*time.Second)
	if !errors.Is(err, errSASLClosed) || !strings.Contains(err.Error(), "SCRAM-SHA-512") {
		t.Fatalf("mechanism without credentials: %v", err)
	}
}
