package core

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func TestSASLScramOverTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test")
	}
	b, certs := harness.StartSASLBroker(t)
	list := harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, "users", "list", "--bootstrap", b.Addr)
	if !strings.Contains(list, "alice  SCRAM-SHA-256  8192") || !strings.Contains(list, "alice  SCRAM-SHA-512  8192") {
		t.Fatalf("users list:\n%s", list)
	}
	const topic = "sasl-t"
	harness.CreateTopic(t, kadm.NewClient(b.Client(t)), topic, 1, 1)

	for _, mech := range []struct {
		name string
		opt  kgo.Opt
	}{
		{"SCRAM-SHA-256", kgo.SASL(scram.Auth{User: "alice", Pass: "wonder land"}.AsSha256Mechanism())},
		{"SCRAM-SHA-512", kgo.SASL(scram.Auth{User: "alice", Pass: "wonder land"}.AsSha512Mechanism())},
		{"PLAIN", kgo.SASL(plain.Auth{User: "alice", Pass: "wonder land"}.AsMechanism())},
	} {
		t.Run(mech.name, func(t *testing.T) {
			cl := b.TlsClient(t, certs.ClientConfig(t, false), mech.opt)
			ctx := harness.Context(t, 20*time.Second)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(mech.name)}).FirstErr(); err != nil {
				t.Fatalf("produce as alice with %s: %v", mech.name, err)
			}
		})
	}

	// Wrong password and unknown user: refused, after the failure delay.
	for _, auth := range []scram.Auth{{User: "alice", Pass: "wonderland"}, {User: "mallory", Pass: "x"}} {
		cl := b.TlsClient(t, certs.ClientConfig(t, false), kgo.SASL(auth.AsSha512Mechanism()), kgo.RequestRetries(0))
		start := time.Now()
		err := cl.Ping(harness.Context(t, 20*time.Second))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s with a bad password: %v, want SASL_AUTHENTICATION_FAILED", auth.User, err)
		}
		if d := time.Since(start); d < 400*time.Millisecond {
			t.Fatalf("failed authentication answered after %v, before the 500ms delay", d)
		}
	}

	// No SASL at all: the first non-SASL request closes the connection.
	cfg := certs.ClientConfig(t, false)
	cl := b.TlsClient(t, cfg, kgo.RequestRetries(0))
	if err := cl.Ping(harness.Context(t, 20*time.Second)); err == nil {
		t.Fatal("metadata without authentication answered on a SASL listener")
	}

	// PLAIN is not offered on the plaintext listener (no TLS), which
	// does not require SASL here anyway: a SaslHandshake there is refused.
	pl := b.Client(t, kgo.SASL(plain.Auth{User: "alice", Pass: "wonder land"}.AsMechanism()), kgo.RequestRetries(0))
	if err := pl.Ping(harness.Context(t, 20*time.Second)); err == nil {
		t.Fatal("SASL handshake accepted on a listener without SASL")
	}

	// librdkafka: kcat and confluent_kafka over SASL_SSL with SCRAM.
	harness.NeedTool(t, "/usr/bin/kcat")
	kcatRoundTrip(t, b.TLSAddr, "sasl-kcat", append(certs.KcatSSL(false),
		"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password=wonder land"))
	harness.NeedTool(t, "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import confluent_kafka").Run(); err != nil {
		t.Fatal("python3-confluent-kafka not installed")
	}
	harness.CreateTopic(t, kadm.NewClient(b.Client(t)), "sasl-py", 1, 1)
	out := harness.RunCmd(t, "", 120*time.Second, "/usr/bin/python3", "testdata/confluent_sasl.py", b.TLSAddr, "sasl-py", "300", certs.Ca, "SCRAM-SHA-512", "alice", "wonder land")
	if !strings.Contains(out, "OK 300") {
		t.Fatalf("python over SASL_SSL: %s", out)
	}
	out = harness.RunCmd(t, "", 120*time.Second, "/usr/bin/python3", "testdata/confluent_sasl.py", b.TLSAddr, "sasl-py", "1", certs.Ca, "SCRAM-SHA-512", "alice", "bad")
	if !strings.Contains(out, "AUTH_FAILED") {
		t.Fatalf("python with a bad password: %s", out)
	}
}

// TestPreAuthRequestLimit sends a 1 MiB frame before authenticating: the
// broker must close the connection without reading (or allocating) it.
func TestPreAuthRequestLimit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test")
	}
	b, certs := harness.StartSASLBroker(t)
	conn, err := tls.Dial("tcp", b.TLSAddr, certs.ClientConfig(t, false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<20)
	if _, err := conn.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("oversized pre-auth frame: read %v, want EOF", err)
	}
}
