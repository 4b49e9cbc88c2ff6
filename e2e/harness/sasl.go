package harness

import (
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
