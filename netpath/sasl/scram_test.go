package sasl

import (
	"context"
	"errors"
	"strings"
	"testing"

	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type store map[string]Credential

func (s store) lookup(user, mech string) (Credential, bool) {
	c, ok := s[user+"/"+mech]
	return c, ok
}

func newStore(t *testing.T, user, pass string) store {
	t.Helper()
	s := store{}
	for _, m := range []string{ScramSHA256, ScramSHA512} {
		c, err := NewCredential(m, pass, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		s[user+"/"+m] = c
	}
	return s
}

// run drives franz-go's client side (an independent implementation)
// against ours until both sides finish or one fails.
func run(t *testing.T, mech franzsasl.Mechanism, s store) (string, error) {
	t.Helper()
	ex, err := NewExchange(mech.Name(), s.lookup, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, msg, err := mech.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		reply, err := ex.Step(msg)
		if err != nil {
			return "", err
		}
		done, next, err := sess.Challenge(reply)
		if err != nil {
			return "", err
		}
		if done {
			if !ex.Done() {
				t.Fatal("client finished, server did not")
			}
			return ex.User(), nil
		}
		msg = next
	}
	t.Fatal("exchange did not finish")
	return "", nil
}

func TestScramWithFranzClient(t *testing.T) {
	s := newStore(t, "alice", "s3cret,=pw")
	for _, tc := range []struct {
		name string
		mech franzsasl.Mechanism
		ok   bool
	}{
		{"sha256", scram.Auth{User: "alice", Pass: "s3cret,=pw"}.AsSha256Mechanism(), true},
		{"sha512", scram.Auth{User: "alice", Pass: "s3cret,=pw"}.AsSha512Mechanism(), true},
		{"wrong password", scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(), false},
		{"unknown user", scram.Auth{User: "mallory", Pass: "x"}.AsSha256Mechanism(), false},
		{"plain", plain.Auth{User: "alice", Pass: "s3cret,=pw"}.AsMechanism(), true},
		{"plain wrong password", plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism(), false},
		{"plain unknown user", plain.Auth{User: "bob", Pass: "s3cret,=pw"}.AsMechanism(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := run(t, tc.mech, s)
			if tc.ok && (err != nil || user != "alice") {
				t.Fatalf("want success as alice, got %q %v", user, err)
			}
			if !tc.ok && (err == nil || !errors.Is(err, ErrAuthentication)) {
				t.Fatalf("want ErrAuthentication, got %q %v", user, err)
			}
		})
	}
}

func TestScramRejectsTampering(t *testing.T) {
	s := newStore(t, "alice", "pw")
	start := func() (*scramExchange, string) {
		ex, _ := NewExchange(ScramSHA256, s.lookup, nil)
		reply, err := ex.Step([]byte("n,,n=alice,r=abcdef"))
		if err != nil {
			t.Fatal(err)
		}
		return ex.(*scramExchange), string(reply)
	}
	// Client nonce replaced in the final message: refused.
	ex, sf := start()
	nonce := strings.TrimPrefix(strings.Split(sf, ",")[0], "r=")
	if _, err := ex.Step([]byte("c=biws,r=" + nonce + "x,p=AAAA")); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("nonce mismatch: %v", err)
	}
	// Only librdkafka's form (client nonce again in front) may differ.
	ex, sf = start()
	nonce = strings.TrimPrefix(strings.Split(sf, ",")[0], "r=")
	if _, err := ex.Step([]byte("c=biws,r=zz" + nonce + ",p=AAAA")); !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("foreign nonce prefix: %v", err)
	}
	// Channel binding not matching the gs2 header: refused.
	ex, sf = start()
	nonce = strings.TrimPrefix(strings.Split(sf, ",")[0], "r=")
	if _, err := ex.Step([]byte("c=eSws,r=" + nonce + ",p=AAAA")); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("channel binding: %v", err)
	}
	// A third message after the exchange: refused.
	if _, err := ex.Step([]byte("x")); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("extra message: %v", err)
	}
	// Malformed first messages.
	for _, m := range []string{"", "p=tls-unique,,n=alice,r=x", "n,,r=x", "n,,n=al=ice,r=x", "n,a=bob,n=alice,r=x", "n,,n=alice,r=a,b", "n,,m=ext,n=alice,r=x", strings.Repeat("n", 5000)} {
		ex, _ := NewExchange(ScramSHA256, s.lookup, nil)
		if _, err := ex.Step([]byte(m)); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("client-first %q: %v", truncate(m), err)
		}
	}
	// Unknown users get a salt and iteration count like real ones, stable
	// across attempts.
	ex1, _ := NewExchange(ScramSHA256, s.lookup, nil)
	r1, _ := ex1.Step([]byte("n,,n=ghost,r=abc"))
	ex2, _ := NewExchange(ScramSHA256, s.lookup, nil)
	r2, _ := ex2.Step([]byte("n,,n=ghost,r=abc"))
	salt := func(r []byte) string { return strings.Split(string(r), ",")[1] }
	if salt(r1) != salt(r2) || !strings.HasSuffix(string(r1), ",i=4096") {
		t.Fatalf("unknown user replies differ or look different: %q %q", r1, r2)
	}
}

func TestCredentialValidation(t *testing.T) {
	if _, err := CredentialFromSaltedPassword(ScramSHA256, []byte("salt"), make([]byte, 32), 100); err == nil {
		t.Fatal("100 iterations accepted")
	}
	if _, err := CredentialFromSaltedPassword(ScramSHA256, []byte("salt"), make([]byte, 31), MinIterations); err == nil {
		t.Fatal("short salted password accepted")
	}
	if _, err := CredentialFromSaltedPassword("SCRAM-MD5", []byte("salt"), make([]byte, 16), MinIterations); err == nil {
		t.Fatal("unknown mechanism accepted")
	}
}

// FuzzExchange feeds arbitrary client messages to the SCRAM and PLAIN
// servers, as an unauthenticated client may: no panic, and no success
// without the password.
func FuzzExchange(f *testing.F) {
	f.Add("SCRAM-SHA-256", []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add("SCRAM-SHA-512", []byte("y,a=alice,n=alice,r=x=y"), []byte("c=eSxhPWFsaWNlLA==,r=x=yzz,p="))
	f.Add("PLAIN", []byte("\x00alice\x00pw"), []byte{})
	f.Add("PLAIN", []byte("alice\x00alice\x00"), []byte("x"))
	cred, _ := NewCredential(ScramSHA256, "the password", MinIterations)
	cred512, _ := NewCredential(ScramSHA512, "the password", MinIterations)
	lookup := func(user, mech string) (Credential, bool) {
		if user != "alice" {
			return Credential{}, false
		}
		if mech == ScramSHA512 {
			return cred512, true
		}
		return cred, true
	}
	f.Fuzz(func(t *testing.T, mech string, first, final []byte) {
		ex, err := NewExchange(mech, lookup, nil)
		if err != nil {
			return
		}
		if _, err := ex.Step(first); err != nil {
			return
		}
		if ex.Done() && string(first) != "\x00alice\x00the password" && string(first) != "alice\x00alice\x00the password" {
			t.Fatalf("PLAIN accepted %q", first)
		}
		if _, err := ex.Step(final); err == nil && ex.Done() && mech != Plain {
			t.Fatalf("SCRAM accepted a forged client-final %q", final)
		}
	})
}
