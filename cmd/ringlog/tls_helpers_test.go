package main

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

// tlsFiles are the PEM files `ringlog dev certs` writes.
type tlsFiles struct {
	ca, cert, key, clientCert, clientKey string
}

// devCerts runs the real `ringlog dev certs` into a temp dir.
func devCerts(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	runCmd(t, "", 30*time.Second, ringlogBin, "dev", "certs", "--out", dir)
	return tlsFiles{
		ca:         filepath.Join(dir, "ca.pem"),
		cert:       filepath.Join(dir, "server.pem"),
		key:        filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"),
		clientKey:  filepath.Join(dir, "client-key.pem"),
	}
}

// startTLSBroker starts a broker with both a plaintext and a TLS listener;
// with mtls the TLS listener requires client certificates from the dev CA.
func startTLSBroker(t *testing.T, dataDir string, mtls bool, extra ...string) (*brokerProc, tlsFiles) {
	t.Helper()
	certs := devCerts(t)
	tlsAddr := freePort(t)
	args := []string{"--tls-listen", tlsAddr, "--tls-cert", certs.cert, "--tls-key", certs.key}
	if mtls {
		args = append(args, "--tls-client-ca", certs.ca)
	}
	b := startBroker(t, dataDir, append(args, extra...)...)
	b.tlsAddr = tlsAddr
	return b, certs
}

// clientConfig is a client-side TLS config trusting the dev CA, with the
// dev client certificate when withCert.
func (f tlsFiles) clientConfig(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(f.ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate in", f.ca)
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

// kcatSSL are the librdkafka settings for the TLS listener.
func (f tlsFiles) kcatSSL(withCert bool) []string {
	args := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + f.ca}
	if withCert {
		args = append(args, "-X", "ssl.certificate.location="+f.clientCert, "-X", "ssl.key.location="+f.clientKey)
	}
	return args
}

// tlsClient is a franz-go client seeded with the TLS listener.
func (b *brokerProc) tlsClient(t *testing.T, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.tlsAddr), kgo.DialTLSConfig(cfg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metrics scrapes /metrics into "name{labels}" -> value.
func (b *brokerProc) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + b.admin + "/metrics")
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

// fetchBytes returns ringlog_fetch_bytes_total for a listener and path.
func fetchBytes(m map[string]float64, listener, path string) float64 {
	if path == "zero-copy" {
		return fetchBytes(m, listener, "sendfile") + fetchBytes(m, listener, "splice")
	}
	return m[`ringlog_fetch_bytes_total{listener="`+listener+`",path="`+path+`"}`]
}
