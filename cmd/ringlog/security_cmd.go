package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"
)

// `ringlog users` and `ringlog acls`: credential and ACL management over
// the Kafka protocol (AlterUserScramCredentials, CreateAcls, ...), so they
// work against any broker of the cluster and through any listener.

// clientFlags are the connection options of the admin commands.
func clientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "bootstrap", Value: cli.NewStringSlice("127.0.0.1:9092"), Usage: "broker addresses", EnvVars: env("bootstrap")},
		&cli.StringFlag{Name: "tls-ca", Usage: "PEM CA bundle: connect with TLS and trust these CAs", EnvVars: env("tls-ca")},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM client certificate (mutual TLS)", EnvVars: env("tls-cert")},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM key of --tls-cert", EnvVars: env("tls-key")},
		&cli.StringFlag{Name: "sasl-mechanism", Value: "SCRAM-SHA-512", Usage: "SCRAM-SHA-256 | SCRAM-SHA-512 | PLAIN (with --sasl-user)", EnvVars: env("sasl-mechanism")},
		&cli.StringFlag{Name: "sasl-user", Usage: "authenticate as this user", EnvVars: env("sasl-user")},
		&cli.StringFlag{Name: "sasl-password", Usage: "password of --sasl-user (prefer RINGLOG_SASL_PASSWORD)", EnvVars: env("sasl-password")},
	}
}

// adminClient builds a kadm client from clientFlags.
func adminClient(c *cli.Context) (*kadm.Client, *kgo.Client, error) {
	opts, err := clientOpts(c)
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// clientOpts are the kgo options clientFlags ask for: seeds, TLS, SASL.
func clientOpts(c *cli.Context) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.StringSlice("bootstrap")...)}
	if ca := c.String("tls-ca"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", ca)
		}
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cert := c.String("tls-cert"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, c.String("tls-key"))
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if user := c.String("sasl-user"); user != "" {
		pass := c.String("sasl-password")
		switch strings.ToUpper(c.String("sasl-mechanism")) {
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		default:
			return nil, fmt.Errorf("--sasl-mechanism %q", c.String("sasl-mechanism"))
		}
	}
	return opts, nil
}

func usersCommand() *cli.Command {
	return &cli.Command{
		Name:  "users",
		Usage: "manage SCRAM credentials (stored by the controller; salted, never the password)",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "create or change a user's SCRAM-SHA-256 and SCRAM-SHA-512 credentials",
				ArgsUsage: "USER",
				Flags: append(clientFlags(),
					&cli.StringFlag{Name: "password", Usage: "the user's password (prefer RINGLOG_USER_PASSWORD)", EnvVars: []string{"RINGLOG_USER_PASSWORD"}},
					&cli.StringSliceFlag{Name: "mechanism", Value: cli.NewStringSlice("SCRAM-SHA-256", "SCRAM-SHA-512"), Usage: "mechanisms to set"},
					&cli.IntFlag{Name: "iterations", Value: 8192, Usage: "PBKDF2 iterations (4096-16384)"}),
				Action: func(c *cli.Context) error {
					user := c.Args().First()
					if user == "" || c.String("password") == "" {
						return errors.New("usage: ringlog users set --password PASS [options] USER (options before the user name)")
					}
					var ups []kadm.UpsertSCRAM
					for _, m := range c.StringSlice("mechanism") {
						mech, err := scramMechanism(m)
						if err != nil {
							return err
						}
						ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: mech, Iterations: int32(c.Int("iterations")), Password: c.String("password")})
					}
					return alterUsers(c, nil, ups)
				},
			},
			{
				Name:      "delete",
				Usage:     "delete a user's SCRAM credentials",
				ArgsUsage: "USER",
				Flags: append(clientFlags(),
					&cli.StringSliceFlag{Name: "mechanism", Value: cli.NewStringSlice("SCRAM-SHA-256", "SCRAM-SHA-512"), Usage: "mechanisms to delete"}),
				Action: func(c *cli.Context) error {
					user := c.Args().First()
					if user == "" {
						return errors.New("usage: ringlog users delete [options] USER")
					}
					var dels []kadm.DeleteSCRAM
					for _, m := range c.StringSlice("mechanism") {
						mech, err := scramMechanism(m)
						if err != nil {
							return err
						}
						dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: mech})
					}
					return alterUsers(c, dels, nil)
				},
			},
			{
				Name:  "list",
				Usage: "list users and their SCRAM mechanisms",
				Flags: clientFlags(),
				Action: func(c *cli.Context) error {
					adm, cl, err := adminClient(c)
					if err != nil {
						return err
					}
					defer cl.Close()
					ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
					defer cancel()
					described, err := adm.DescribeUserSCRAMs(ctx)
					if err != nil {
						return err
					}
					w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
					for _, u := range described.Sorted() {
						if u.Err != nil {
							fmt.Fprintf(w, "%s\terror: %v\t\n", u.User, u.Err)
							continue
						}
						for _, ci := range u.CredInfos {
							fmt.Fprintf(w, "%s\t%s\t%d\n", u.User, ci.Mechanism, ci.Iterations)
						}
					}
					return w.Flush()
				},
			},
		},
	}
}

func scramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

func alterUsers(c *cli.Context, dels []kadm.DeleteSCRAM, ups []kadm.UpsertSCRAM) error {
	adm, cl, err := adminClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, dels, ups)
	if err != nil {
		return bootstrapHint(err)
	}
	var errs []error
	for _, r := range res.Sorted() {
		if r.Err != nil {
			errs = append(errs, bootstrapHint(fmt.Errorf("%s: %w", r.User, r.Err)))
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s: ok\n", r.User)
	}
	return errors.Join(errs...)
}

// bootstrapHint tells a user refused by the authorizer how a cluster gets
// its first administrator.
func bootstrapHint(err error) error {
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return err
	}
	return fmt.Errorf("%w; changing users needs a super user authenticated with --sasl-user (the broker runs with --authorizer); "+
		"to create the first one, start the brokers with --super-users User:NAME --bootstrap-user NAME and the password in "+
		"RINGLOG_BOOTSTRAP_PASSWORD_NAME (docs/SECURITY.md)", err)
}

func aclsCommand() *cli.Command {
	selector := []cli.Flag{
		&cli.StringSliceFlag{Name: "topic", Usage: "topic names (prefixes with --prefixed; * for all)"},
		&cli.StringSliceFlag{Name: "group", Usage: "group names"},
		&cli.StringSliceFlag{Name: "transactional-id", Usage: "transactional ids"},
		&cli.BoolFlag{Name: "cluster", Usage: "the cluster resource"},
		&cli.BoolFlag{Name: "prefixed", Usage: "resource names are prefixes"},
		&cli.StringSliceFlag{Name: "allow", Usage: "principals to allow (User:name)"},
		&cli.StringSliceFlag{Name: "deny", Usage: "principals to deny (User:name)"},
		&cli.StringSliceFlag{Name: "operation", Value: cli.NewStringSlice("all"), Usage: "read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write, all"},
		&cli.StringFlag{Name: "host", Value: "*", Usage: "client host the ACL applies to"},
	}
	build := func(c *cli.Context) (*kadm.ACLBuilder, error) {
		b := kadm.NewACLs()
		if len(c.StringSlice("allow")) > 0 {
			b = b.Allow(c.StringSlice("allow")...).AllowHosts(c.String("host"))
		}
		if len(c.StringSlice("deny")) > 0 {
			b = b.Deny(c.StringSlice("deny")...).DenyHosts(c.String("host"))
		}
		b = b.Topics(c.StringSlice("topic")...).Groups(c.StringSlice("group")...).TransactionalIDs(c.StringSlice("transactional-id")...)
		if c.Bool("cluster") {
			b = b.Clusters()
		}
		var ops []kadm.ACLOperation
		for _, o := range c.StringSlice("operation") {
			op, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(o), "-", "_"))
			if err != nil {
				return nil, fmt.Errorf("--operation %q: %w", o, err)
			}
			ops = append(ops, op)
		}
		b = b.Operations(ops...)
		if c.Bool("prefixed") {
			b = b.ResourcePatternType(kadm.ACLPatternPrefixed)
		}
		return b, nil
	}
	run := func(f func(context.Context, *kadm.Client, *kadm.ACLBuilder, *cli.Context) error) cli.ActionFunc {
		return func(c *cli.Context) error {
			b, err := build(c)
			if err != nil {
				return err
			}
			adm, cl, err := adminClient(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
			defer cancel()
			return f(ctx, adm, b, c)
		}
	}
	flags := append(clientFlags(), selector...)
	return &cli.Command{
		Name:  "acls",
		Usage: "manage ACLs (enforced by brokers started with --authorizer)",
		Subcommands: []*cli.Command{
			{
				Name:  "add",
				Usage: "add ACLs, e.g. --allow User:alice --topic orders --operation write",
				Flags: flags,
				Action: run(func(ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder, c *cli.Context) error {
					res, err := adm.CreateACLs(ctx, b)
					if err != nil {
						return err
					}
					var errs []error
					for _, r := range res {
						if r.Err != nil {
							errs = append(errs, fmt.Errorf("%s %s %s %s: %w", r.Principal, r.Type, r.Name, r.Operation, r.Err))
							continue
						}
						fmt.Fprintf(c.App.Writer, "added: %s %s %s %s %s %s\n", r.Permission, r.Principal, r.Operation, r.Type, r.Pattern, r.Name)
					}
					return errors.Join(errs...)
				}),
			},
			{
				Name:  "list",
				Usage: "list ACLs matching the selection (everything by default)",
				Flags: flags,
				Action: run(func(ctx context.Context, adm *kadm.Client, _ *kadm.ACLBuilder, c *cli.Context) error {
					b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
					if len(c.StringSlice("topic"))+len(c.StringSlice("group"))+len(c.StringSlice("transactional-id")) > 0 || c.Bool("cluster") {
						b = kadm.NewACLs().Topics(c.StringSlice("topic")...).Groups(c.StringSlice("group")...).
							TransactionalIDs(c.StringSlice("transactional-id")...).ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
						if c.Bool("cluster") {
							b = b.Clusters()
						}
					}
					res, err := adm.DescribeACLs(ctx, b)
					if err != nil {
						return err
					}
					w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "PERMISSION\tPRINCIPAL\tHOST\tOPERATION\tRESOURCE\tPATTERN\tNAME")
					for _, r := range res {
						if r.Err != nil {
							return r.Err
						}
						for _, d := range r.Described {
							fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Permission, d.Principal, d.Host, d.Operation, d.Type, d.Pattern, d.Name)
						}
					}
					return w.Flush()
				}),
			},
			{
				Name:  "remove",
				Usage: "remove the ACLs matching the selection",
				Flags: flags,
				Action: run(func(ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder, c *cli.Context) error {
					res, err := adm.DeleteACLs(ctx, b)
					if err != nil {
						return err
					}
					n := 0
					for _, r := range res {
						if r.Err != nil {
							return r.Err
						}
						n += len(r.Deleted)
					}
					fmt.Fprintf(c.App.Writer, "removed %d ACLs\n", n)
					return nil
				}),
			},
		},
	}
}
