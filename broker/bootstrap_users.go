package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/netpath/sasl"
)

// BootstrapUser is a SCRAM user the broker creates when the cluster has
// none of that name: the first administrator of a cluster started with the
// authorizer on, who could not otherwise be created (AlterUserScramCredentials
// needs ALTER on the cluster, which only an authenticated super user has).
type BootstrapUser struct {
	Name, Password string
}

// bootstrapIterations is the PBKDF2 iteration count of bootstrap
// credentials, `ringlog users set`'s default.
const bootstrapIterations = 8192

// createBootstrapUsers gives every bootstrap user that has no credential
// of a mechanism one, through the controller like any credential change.
// An existing credential is never replaced: once the user exists, its
// password is changed with `ringlog users set`, and a restart with the old
// environment must not undo that.
func (b *Broker) createBootstrapUsers(ctx context.Context) error {
	var cmd metadata.AlterScramCredentials
	img := b.node.MetadataImage()
	for _, u := range b.cfg.BootstrapUsers {
		for _, mech := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
			if _, ok := img.ScramCredential(u.Name, mech); ok {
				continue
			}
			cred, err := sasl.NewCredential(mech, u.Password, bootstrapIterations)
			if err != nil {
				return fmt.Errorf("bootstrap user %s: %w", u.Name, err)
			}
			cmd.Upserts = append(cmd.Upserts, metadata.ScramCredential{User: u.Name, Mechanism: mech,
				Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations})
		}
	}
	if len(cmd.Upserts) == 0 {
		return nil
	}
	errs, err := b.node.AlterScramCredentials(ctx, cmd)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return fmt.Errorf("creating bootstrap users: %w", err)
	}
	for _, u := range cmd.Upserts {
		b.log.Info("created bootstrap SCRAM credential", "user", u.User, "mechanism", u.Mechanism)
	}
	return nil
}
