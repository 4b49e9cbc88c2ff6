package harness

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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

// TlsClient is a franz-go client seeded with the TLS listener.
func (b *BrokerProc) TlsClient(t *testing.T, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.TLSAddr), kgo.DialTLSConfig(cfg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Metrics scrapes /metrics into "name{labels}" -> value.
func (b *BrokerProc) Metrics(t *testing.T) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + b.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
