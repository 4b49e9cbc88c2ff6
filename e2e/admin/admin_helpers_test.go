package admin

import (
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// startAuthorizedBroker starts a broker, creates the SCRAM users admin (a
// super user) and alice (passwords user+"-pw") and the given topics while
// security is off, then restarts it with SASL on the plaintext listener
// and the authorizer. as returns a client logged in as a user.
func startAuthorizedBroker(t *testing.T, topics []string, extra ...string) (b *harness.BrokerProc, as func(user string, opts ...kgo.Opt) *kgo.Client) {
	t.Helper()
	b = harness.StartBroker(t, t.TempDir(), extra...)
	for _, u := range []string{"admin", "alice"} {
		harness.RunCmd(t, "", 30*time.Second, harness.RinglogBin, "users", "set", "--bootstrap", b.Addr, "--password", u+"-pw", u)
	}
	for _, topic := range topics {
		harness.CreateTopic(t, kadm.NewClient(b.Client(t)), topic, 1, 1)
	}
	b.Stop()
	b.Args = append(b.Args, "--sasl-listeners", "plaintext", "--authorizer", "--super-users", "User:admin", "--auth-failure-delay", "100ms")
	b.Restart()
	return b, func(user string, opts ...kgo.Opt) *kgo.Client {
		return b.Client(t, append([]kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()), kgo.RequestRetries(1)}, opts...)...)
	}
}
