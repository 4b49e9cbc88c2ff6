// Package sasl is the broker side of SASL authentication: SCRAM-SHA-256
// and SCRAM-SHA-512 (RFC 5802, RFC 7677) and PLAIN (RFC 4616), verified
// against SCRAM credentials (the controller stores only salted keys, never
// passwords). It does no I/O: netpath feeds it the SaslAuthenticate
// payloads and sends back what it returns.
package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// Mechanism names as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Iteration bounds (Kafka's): fewer than 4096 is weak, more than 16384
// lets a client make the broker burn CPU on every login.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ErrAuthentication is every failed authentication: wrong password,
// unknown user, malformed or out-of-order messages. Which one it was is
// not told to the client (no user enumeration); the wrapped text is for
// the broker's log.
var ErrAuthentication = errors.New("sasl: authentication failed")

// Credential is a user's stored SCRAM secret for one mechanism.
type Credential struct {
	Mechanism  string
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

func hashFor(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, nil
	case ScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("sasl: unknown SCRAM mechanism %q", mechanism)
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// CredentialFromSaltedPassword derives the stored keys from a salted
// password (what AlterUserScramCredentials carries).
func CredentialFromSaltedPassword(mechanism string, salt, salted []byte, iterations int) (Credential, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("sasl: %d iterations outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(salted) != h().Size() {
		return Credential{}, fmt.Errorf("sasl: salt of %d bytes, salted password of %d (want %d)", len(salt), len(salted), h().Size())
	}
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Mechanism: mechanism, Salt: bytes.Clone(salt), Iterations: iterations,
		StoredKey: stored.Sum(nil), ServerKey: hmacSum(h, salted, []byte("Server Key")),
	}, nil
}

// SaltPassword runs PBKDF2 (Hi in RFC 5802) for mechanism.
func SaltPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return nil, err
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewCredential salts password with a fresh random salt; the `ringlog
// users` command and tests use it.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, 24)
	if _, err := io.ReadFull(rand.Reader, salt); err != nil {
		return Credential{}, err
	}
	salted, err := SaltPassword(mechanism, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSaltedPassword(mechanism, salt, salted, iterations)
}

// Lookup finds a user's credential for a mechanism.
type Lookup func(user, mechanism string) (Credential, bool)

// Exchange is one authentication in progress. Step takes each client
// message and returns the server's reply; Done reports success (User is
// then the authenticated name).
type Exchange interface {
	Step(msg []byte) (reply []byte, err error)
	Done() bool
	User() string
}

// NewExchange starts mechanism's server side. rnd supplies nonces (nil:
// crypto/rand).
func NewExchange(mechanism string, lookup Lookup, rnd io.Reader) (Exchange, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	switch mechanism {
	case Plain:
		return &plainExchange{lookup: lookup}, nil
	case ScramSHA256, ScramSHA512:
		h, _ := hashFor(mechanism)
		return &scramExchange{mech: mechanism, h: h, lookup: lookup, rnd: rnd}, nil
	}
	return nil, fmt.Errorf("sasl: unsupported mechanism %q", mechanism)
}

// scramExchange is the server side of one SCRAM exchange: client-first,
// server-first, client-final, server-final.
type scramExchange struct {
	mech   string
	h      func() hash.Hash
	lookup Lookup
	rnd    io.Reader

	step            int
	user            string
	cred            Credential
	known           bool
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	cnonce, nonce   string
	done            bool
}

func (s *scramExchange) Done() bool   { return s.done }
func (s *scramExchange) User() string { return s.user }

func (s *scramExchange) Step(msg []byte) ([]byte, error) {
	switch s.step {
	case 0:
		s.step = 1
		return s.clientFirst(string(msg))
	case 1:
		s.step = 2
		return s.clientFinal(string(msg))
	}
	return nil, fmt.Errorf("%w: message after the exchange ended", ErrAuthentication)
}

// maxMessage bounds every SCRAM message; real ones are a few hundred bytes.
const maxMessage = 4096

func (s *scramExchange) clientFirst(m string) ([]byte, error) {
	if len(m) > maxMessage {
		return nil, fmt.Errorf("%w: client-first message of %d bytes", ErrAuthentication, len(m))
	}
	// gs2-header: cbind-flag "," [authzid] ","; Kafka has no channel
	// binding, so "n" (client does not support it) or "y" (thinks the
	// server does not) are accepted and "p=..." is refused.
	parts := strings.SplitN(m, ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") {
		return nil, fmt.Errorf("%w: bad gs2 header", ErrAuthentication)
	}
	authzid := parts[1]
	s.gs2Header = parts[0] + "," + authzid + ","
	s.clientFirstBare = parts[2]
	attrs, err := parseAttrs(s.clientFirstBare)
	if err != nil {
		return nil, err
	}
	if _, ok := attrs["m"]; ok {
		return nil, fmt.Errorf("%w: mandatory extension not supported", ErrAuthentication)
	}
	user, err := decodeSaslName(attrs["n"])
	if err != nil || user == "" {
		return nil, fmt.Errorf("%w: bad user name", ErrAuthentication)
	}
	if authzid != "" {
		a, err := decodeSaslName(strings.TrimPrefix(authzid, "a="))
		if err != nil || !strings.HasPrefix(authzid, "a=") || a != user {
			return nil, fmt.Errorf("%w: authorization id %q differs from user", ErrAuthentication, authzid)
		}
	}
	cnonce := attrs["r"]
	if cnonce == "" || !printable(cnonce) {
		return nil, fmt.Errorf("%w: bad client nonce", ErrAuthentication)
	}
	s.user = user
	s.cred, s.known = s.lookup(user, s.mech)
	if !s.known {
		// Answer like for a real user (a fake salt and the default
		// iteration count) so the reply does not reveal who exists; the
		// proof check fails later.
		s.cred = Credential{Salt: fakeSalt(user), Iterations: MinIterations}
	}
	snonce := make([]byte, 24)
	if _, err := io.ReadFull(s.rnd, snonce); err != nil {
		return nil, err
	}
	s.cnonce = cnonce
	s.nonce = cnonce + base64.RawStdEncoding.EncodeToString(snonce)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *scramExchange) clientFinal(m string) ([]byte, error) {
	if len(m) > maxMessage {
		return nil, fmt.Errorf("%w: client-final message of %d bytes", ErrAuthentication, len(m))
	}
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: client-final without proof", ErrAuthentication)
	}
	withoutProof := m[:i]
	proof, err := base64.StdEncoding.DecodeString(m[i+3:])
	if err != nil {
		return nil, fmt.Errorf("%w: proof is not base64", ErrAuthentication)
	}
	attrs, err := parseAttrs(withoutProof)
	if err != nil {
		return nil, err
	}
	if attrs["c"] != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, fmt.Errorf("%w: channel binding does not match the gs2 header", ErrAuthentication)
	}
	// The nonce must be the one this exchange issued: a replayed
	// client-final from another exchange fails here. librdkafka sends its
	// client nonce again in front of the full nonce; Kafka's own server
	// accepts that (it checks only the suffix), so it is allowed in
	// exactly that form.
	r := attrs["r"]
	if subtle.ConstantTimeCompare([]byte(r), []byte(s.nonce)) != 1 &&
		subtle.ConstantTimeCompare([]byte(r), []byte(s.cnonce+s.nonce)) != 1 {
		return nil, fmt.Errorf("%w: nonce mismatch", ErrAuthentication)
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	if !s.known || len(proof) != len(s.cred.StoredKey) {
		return nil, fmt.Errorf("%w: unknown user or bad proof length", ErrAuthentication)
	}
	sig := hmacSum(s.h, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	hk := s.h()
	hk.Write(clientKey)
	if subtle.ConstantTimeCompare(hk.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, fmt.Errorf("%w: invalid proof", ErrAuthentication)
	}
	s.done = true
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(s.h, s.cred.ServerKey, authMessage))), nil
}

// parseAttrs splits "k=v,k=v" (values may contain '='); every key is one
// letter and appears once.
func parseAttrs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if len(kv) < 2 || kv[1] != '=' {
			return nil, fmt.Errorf("%w: bad attribute %q", ErrAuthentication, truncate(kv))
		}
		k := kv[:1]
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: attribute %s repeated", ErrAuthentication, k)
		}
		out[k] = kv[2:]
	}
	return out, nil
}

// decodeSaslName undoes RFC 5802's escaping: "=2C" is ',' and "=3D" is
// '='; any other '=' is an error.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in name", ErrAuthentication)
		}
		i += 2
	}
	return b.String(), nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// fakeSalt is a stable per-name salt for unknown users, so asking twice
// does not reveal that the salt is random.
func fakeSalt(user string) []byte {
	return hmacSum(sha256.New, fakeSaltKey, []byte(user))[:24]
}

var fakeSaltKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// plainExchange is PLAIN: one message "authzid NUL user NUL password",
// checked against the user's SCRAM-SHA-512 (else -256) credential.
type plainExchange struct {
	lookup Lookup
	user   string
	done   bool
	used   bool
}

func (p *plainExchange) Done() bool   { return p.done }
func (p *plainExchange) User() string { return p.user }

func (p *plainExchange) Step(msg []byte) ([]byte, error) {
	if p.used {
		return nil, fmt.Errorf("%w: message after the exchange ended", ErrAuthentication)
	}
	p.used = true
	if len(msg) > maxMessage {
		return nil, fmt.Errorf("%w: PLAIN message of %d bytes", ErrAuthentication, len(msg))
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: PLAIN message needs 3 fields", ErrAuthentication)
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || (authzid != "" && authzid != user) {
		return nil, fmt.Errorf("%w: bad PLAIN user or authorization id", ErrAuthentication)
	}
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		cred, ok := p.lookup(user, mech)
		if !ok {
			continue
		}
		salted, err := SaltPassword(mech, pass, cred.Salt, cred.Iterations)
		if err != nil {
			return nil, err
		}
		want, err := CredentialFromSaltedPassword(mech, cred.Salt, salted, cred.Iterations)
		if err != nil {
			return nil, err
		}
		if subtle.ConstantTimeCompare(want.StoredKey, cred.StoredKey) == 1 {
			p.user, p.done = user, true
			return nil, nil
		}
		return nil, fmt.Errorf("%w: wrong password", ErrAuthentication)
	}
	return nil, fmt.Errorf("%w: unknown user", ErrAuthentication)
}
