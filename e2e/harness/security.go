package harness

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StartSASLBroker starts a broker whose TLS listener requires SASL (the
// plaintext one stays open for setup) and creates user alice through the
// real `ringlog users` command.
func StartSASLBroker(t *testing.T, extra ...string) (*BrokerProc, TLSFiles) {
	t.Helper()
	b, certs := StartTLSBroker(t, t.TempDir(), false, append([]string{"--sasl-listeners", "tls",
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN", "--auth-failure-delay", "500ms"}, extra...)...)
	out := RunCmd(t, "", 30*time.Second, RinglogBin, "users", "set", "--bootstrap", b.Addr, "--password", "wonder land", "alice")
	if !strings.Contains(out, "alice: ok") {
		t.Fatalf("ringlog users set: %s", out)
	}
	return b, certs
}

// TLSFiles are the PEM files `ringlog dev certs` writes.
type TLSFiles struct {
	Ca, Cert, Key, clientCert, clientKey string
}

// DevCerts runs the real `ringlog dev certs` into a temp dir.
func DevCerts(t *testing.T) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	RunCmd(t, "", 30*time.Second, RinglogBin, "dev", "certs", "--out", dir)
	return TLSFiles{
		Ca:         filepath.Join(dir, "ca.pem"),
		Cert:       filepath.Join(dir, "server.pem"),
		Key:        filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"),
		clientKey:  filepath.Join(dir, "client-key.pem"),
	}
}

// StartTLSBroker starts a broker with both a plaintext and a TLS listener;
// with mtls the TLS listener requires client certificates from the dev CA.
func StartTLSBroker(t *testing.T, dataDir string, mtls bool, extra ...string) (*BrokerProc, TLSFiles) {
	t.Helper()
	certs := DevCerts(t)
	tlsAddr := FreePort(t)
	args := []string{"--tls-listen", tlsAddr, "--tls-cert", certs.Cert, "--tls-key", certs.Key}
	if mtls {
		args = append(args, "--tls-client-ca", certs.Ca)
	}
	b := StartBroker(t, dataDir, append(args, extra...)...)
	b.TLSAddr = tlsAddr
	return b, certs
}

// ClientConfig is a client-side TLS config trusting the dev CA, with the
// dev client certificate when withCert.
func (f TLSFiles) ClientConfig(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(f.Ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in", f.Ca)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(f.clientCert, f.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// KcatSSL are the librdkafka settings for the TLS listener.
func (f TLSFiles) KcatSSL(withCert bool) []string {
	args := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + f.Ca}
	if withCert {
		args = append(args, "-X", "ssl.certificate.location="+f.clientCert, "-X", "ssl.key.location="+f.clientKey)
	}
	return args
}
