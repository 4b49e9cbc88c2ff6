package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// startAuthorizedBroker starts a broker, creates the SCRAM users admin (a
// super user) and alice (passwords user+"-pw") and the given topics while
// security is off, then restarts it with SASL on the plaintext listener
// and the authorizer. as returns a client logged in as a user.
func startAuthorizedBroker(t *testing.T, topics []string, extra ...string) (b *brokerProc, as func(user string, opts ...kgo.Opt) *kgo.Client) {
	t.Helper()
	b = startBroker(t, t.TempDir(), extra...)
	for _, u := range []string{"admin", "alice"} {
		runCmd(t, "", 30*time.Second, ringlogBin, "users", "set", "--bootstrap", b.addr, "--password", u+"-pw", u)
	}
	for _, topic := range topics {
		createTopic(t, kadm.NewClient(b.client(t)), topic, 1, 1)
	}
	b.stop()
	b.args = append(b.args, "--sasl-listeners", "plaintext", "--authorizer", "--super-users", "User:admin", "--auth-failure-delay", "100ms")
	b.restart()
	return b, func(user string, opts ...kgo.Opt) *kgo.Client {
		return b.client(t, append([]kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()), kgo.RequestRetries(1)}, opts...)...)
	}
}
