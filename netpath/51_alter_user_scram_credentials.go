package netpath

import (
	"errors"
	"fmt"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/netpath/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterUserScramCredentials: v0
//
// Behavior:
//   - Upserts and deletes SCRAM credentials through the controller; every
//     broker then authenticates against them. The client sends a salt and
//     the salted password, never the password; the broker derives and
//     stores only StoredKey and ServerKey.
//   - Needs ALTER on the cluster when the authorizer is on.
//   - Per user: a (user, mechanism) named twice, or a user both deleted
//     and upserted in one request, is DUPLICATE_RESOURCE,
//     a mechanism other than SCRAM-SHA-256 (1) / SCRAM-SHA-512 (2)
//     UNSUPPORTED_SASL_MECHANISM, iterations outside [4096, 16384] or a
//     bad salted password UNACCEPTABLE_CREDENTIAL, deleting a missing
//     credential RESOURCE_NOT_FOUND.
//   - Runs in resolve: the controller write does not block the reader.

func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

func scramMechanismName(m int8) string {
	switch m {
	case 1:
		return sasl.ScramSHA256
	case 2:
		return sasl.ScramSHA512
	}
	return ""
}

func handleAlterUserScramCredentials(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	allowed := s.authorizeCluster(r, metadata.OpAlter)
	return reply{resolve: func(<-chan struct{}) *response {
		type outcome struct {
			code int16
			msg  string
		}
		results := map[string]*outcome{}
		var order []string
		// A (user, mechanism) named twice, or a user both deleted and
		// upserted, is ambiguous: Kafka refuses it as DUPLICATE_RESOURCE.
		type key struct {
			user string
			mech int8
		}
		seen := map[key]int{}
		deleted, upserted := map[string]bool{}, map[string]bool{}
		for _, d := range req.Deletions {
			seen[key{d.Name, d.Mechanism}]++
			deleted[d.Name] = true
		}
		for _, u := range req.Upsertions {
			seen[key{u.Name, u.Mechanism}]++
			upserted[u.Name] = true
		}
		dup := func(user string, mech int8) bool {
			return seen[key{user, mech}] > 1 || (deleted[user] && upserted[user])
		}
		fail := func(user string, code int16, msg string) {
			if o, ok := results[user]; ok {
				if o.code == 0 {
					o.code, o.msg = code, msg
				}
				return
			}
			results[user] = &outcome{code, msg}
			order = append(order, user)
		}
		var cmd metadata.AlterScramCredentials
		var itemUsers []string
		for _, d := range req.Deletions {
			switch mech := scramMechanismName(d.Mechanism); {
			case !allowed:
				fail(d.Name, kerr.ClusterAuthorizationFailed.Code, "")
			case d.Name == "":
				fail(d.Name, kerr.UnacceptableCredential.Code, "empty user name")
			case dup(d.Name, d.Mechanism):
				fail(d.Name, kerr.DuplicateResource.Code, "user named more than once")
			case mech == "":
				fail(d.Name, kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("mechanism %d", d.Mechanism))
			default:
				cmd.Deletions = append(cmd.Deletions, metadata.ScramKey{User: d.Name, Mechanism: mech})
				itemUsers = append(itemUsers, d.Name)
				fail(d.Name, 0, "")
			}
		}
		deletions := len(itemUsers)
		for _, u := range req.Upsertions {
			mech := scramMechanismName(u.Mechanism)
			switch {
			case !allowed:
				fail(u.Name, kerr.ClusterAuthorizationFailed.Code, "")
				continue
			case u.Name == "":
				fail(u.Name, kerr.UnacceptableCredential.Code, "empty user name")
				continue
			case dup(u.Name, u.Mechanism):
				fail(u.Name, kerr.DuplicateResource.Code, "user named more than once")
				continue
			case mech == "":
				fail(u.Name, kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("mechanism %d", u.Mechanism))
				continue
			}
			cred, err := sasl.CredentialFromSaltedPassword(mech, u.Salt, u.SaltedPassword, int(u.Iterations))
			if err != nil {
				fail(u.Name, kerr.UnacceptableCredential.Code, err.Error())
				continue
			}
			cmd.Upserts = append(cmd.Upserts, metadata.ScramCredential{User: u.Name, Mechanism: mech, Salt: cred.Salt,
				StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations})
			itemUsers = append(itemUsers, u.Name)
			fail(u.Name, 0, "")
		}
		if len(itemUsers) > 0 {
			ctx, cancel := s.adminContext(0)
			errs, err := s.node.AlterScramCredentials(ctx, cmd)
			cancel()
			for i, user := range itemUsers {
				e := err
				if e == nil && i < len(errs) {
					e = errs[i]
				}
				if e == nil {
					continue
				}
				code := errorCode(e)
				if errors.Is(e, metadata.ErrNoScramCredential) {
					code = kerr.ResourceNotFound.Code
				} else if i >= deletions && errors.Is(e, metadata.ErrInvalidCommand) {
					code = kerr.UnacceptableCredential.Code
				}
				results[user].code, results[user].msg = code, e.Error()
			}
		}
		for _, user := range order {
			o := results[user]
			rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			rr.User, rr.ErrorCode = user, o.code
			if o.msg != "" {
				msg := o.msg
				rr.ErrorMessage = &msg
			}
			resp.Results = append(resp.Results, rr)
		}
		return &response{msg: resp}
	}}
}
