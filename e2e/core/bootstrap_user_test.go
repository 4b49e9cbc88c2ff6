package core

import (
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
)

// TestBootstrapUserWithAuthorizer: a broker started with the authorizer on
// and --bootstrap-user creates that super user's credentials itself, so
// the first administrator exists without a restart with the authorizer off;
// an anonymous `users set` is refused with the way to do it; and a restart
// with another bootstrap password leaves the existing credential alone.
func TestBootstrapUserWithAuthorizer(t *testing.T) {
	harness.Processes(t) // restarted
	t.Setenv("RINGLOG_BOOTSTRAP_PASSWORD_ADMIN", "first secret")
	b, certs := harness.StartTLSBroker(t, t.TempDir(), false, "--sasl-listeners", "tls",
		"--sasl-mechanisms", "SCRAM-SHA-512", "--authorizer", "--super-users", "User:admin", "--bootstrap-user", "admin")

	usersSet := func(as ...string) (string, int) {
		args := append([]string{"users", "set"}, as...)
		args = append(args, "--password", "bob's", "bob")
		return harness.RunRinglogCode(t, harness.Context(t, 30*time.Second), args...)
	}
	out, code := usersSet("--bootstrap", b.Addr)
	if code == 0 || !strings.Contains(out, "CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(out, "--bootstrap-user") {
		t.Fatalf("anonymous users set: exit %d, output %q: want CLUSTER_AUTHORIZATION_FAILED with the bootstrap hint", code, out)
	}
	asAdmin := func(pass string) []string {
		return []string{"--bootstrap", b.TLSAddr, "--tls-ca", certs.Ca, "--sasl-user", "admin", "--sasl-password", pass}
	}
	if out, code := usersSet(asAdmin("first secret")...); code != 0 || !strings.Contains(out, "bob: ok") {
		t.Fatalf("users set as the bootstrap admin: exit %d %q", code, out)
	}

	// A restart with another bootstrap password keeps the first.
	b.Stop()
	t.Setenv("RINGLOG_BOOTSTRAP_PASSWORD_ADMIN", "second secret")
	b.Restart()
	if out, code := usersSet(asAdmin("first secret")...); code != 0 || !strings.Contains(out, "bob: ok") {
		t.Fatalf("after a restart, the first password: exit %d %q", code, out)
	}
	if out, code := usersSet(asAdmin("second secret")...); code == 0 || !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("after a restart, the second password must not work: exit %d %q", code, out)
	}
}
