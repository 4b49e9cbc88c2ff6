package core

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatRoundTrip produces n lines to topic with kcat and reads them back.
func kcatRoundTrip(t *testing.T, addr, topic string, ssl []string) {
	t.Helper()
	var in strings.Builder
	const n = 200
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "k%d:tls message %d %s\n", i%3, i, strings.Repeat("y", i%40))
	}
	harness.RunCmd(t, in.String(), 60*time.Second, "/usr/bin/kcat", append([]string{"-b", addr, "-t", topic, "-P", "-K:", "-X", "acks=all"}, ssl...)...)
	out := harness.RunCmd(t, "", 60*time.Second, "/usr/bin/kcat", append([]string{"-b", addr, "-t", topic, "-C", "-e", "-q", "-o", "beginning", "-f", "%k:%s|%o\n"}, ssl...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("kcat read %d lines, want %d:\n%s", len(lines), n, out)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("k%d:tls message %d %s|%d", i%3, i, strings.Repeat("y", i%40), i); l != want {
			t.Fatalf("line %d: %q, want %q", i, l, want)
		}
	}
}

func TestTLSListenerKcat(t *testing.T) {
	t.Parallel()
	harness.NeedTool(t, "/usr/bin/kcat")
	// The TLS listener advertises its own address, here under a DNS name
	// the dev certificate covers, so librdkafka's hostname check applies.
	tlsAddr := harness.FreePort(t)
	_, port, _ := strings.Cut(tlsAddr, ":")
	advertised := "localhost:" + port
	certs := harness.DevCerts(t)
	b := harness.StartBroker(t, t.TempDir(), "--tls-listen", tlsAddr, "--tls-cert", certs.Cert, "--tls-key", certs.Key,
		"--tls-advertised-addr", advertised)
	b.TLSAddr = tlsAddr

	out := harness.RunCmd(t, "", 30*time.Second, "/usr/bin/kcat", append([]string{"-b", b.TLSAddr, "-L"}, certs.KcatSSL(false)...)...)
	if !strings.Contains(out, "broker 1 at "+advertised) {
		t.Fatalf("TLS metadata does not advertise %s:\n%s", advertised, out)
	}
	out = harness.RunCmd(t, "", 30*time.Second, "/usr/bin/kcat", "-b", b.Addr, "-L")
	if !strings.Contains(out, "broker 1 at "+b.Addr) {
		t.Fatalf("plaintext metadata does not advertise %s:\n%s", b.Addr, out)
	}
	kcatRoundTrip(t, b.TLSAddr, "kcat-tls", certs.KcatSSL(false))
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	harness.NeedTool(t, "/usr/bin/kcat")
	b, certs := harness.StartTLSBroker(t, t.TempDir(), true)

	t.Run("kcat", func(t *testing.T) {
		kcatRoundTrip(t, b.TLSAddr, "kcat-mtls", certs.KcatSSL(true))
	})

	t.Run("franz-go", func(t *testing.T) {
		ctx := harness.Context(t, 60*time.Second)
		const topic = "franz-mtls"
		if _, err := kadm.NewClient(b.TlsClient(t, certs.ClientConfig(t, true))).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		prod := b.TlsClient(t, certs.ClientConfig(t, true), kgo.DefaultProduceTopic(topic))
		var recs []*kgo.Record
		for i := 0; i < 300; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: testValue(i)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got := harness.ConsumeAll(ctx, t, b.TLSAddr, topic, len(recs), kgo.DialTLSConfig(certs.ClientConfig(t, true)))
		for _, r := range got {
			var i int
			fmt.Sscan(string(r.Key), &i)
			if err := sameRecord(recs[i], r); err != nil {
				t.Fatalf("record %s: %v", r.Key, err)
			}
		}
	})

	t.Run("refused-without-cert", func(t *testing.T) {
		before := b.Metrics(t)["ringlog_tls_handshake_errors_total"]
		// franz-go: the handshake fails, so no request ever succeeds.
		cl := b.TlsClient(t, certs.ClientConfig(t, false), kgo.RetryTimeout(2*time.Second), kgo.RequestRetries(1))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("client without a certificate was served")
		}
		// kcat: metadata never arrives.
		cmd := exec.Command("/usr/bin/kcat", append([]string{"-b", b.TLSAddr, "-L", "-m", "3"}, certs.KcatSSL(false)...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("kcat without a certificate got metadata:\n%s", out)
		}
		if after := b.Metrics(t)["ringlog_tls_handshake_errors_total"]; after <= before {
			t.Fatalf("tls handshake errors %v -> %v, want growth", before, after)
		}
	})
}
