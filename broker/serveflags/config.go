//go:build linux

package serveflags

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/urfave/cli/v2"
)

// Options are what serve's command line does not say.
type Options struct {
	// Version and Commit are the build's, reported by the broker.
	Version, Commit string
	// LogOutput receives the broker's log (nil: standard error).
	LogOutput io.Writer
	// SharedProcess: the broker shares its process with others (the
	// end-to-end harness's in-process brokers). Flags that set
	// process-wide state (ProcessFlags) are refused, and the profile
	// rates are left as they are.
	SharedProcess bool
}

// ProcessFlags are the flags that set process-wide state: the runtime's
// GOMAXPROCS and GC target and the threads' scheduling policy (applied by
// the binary's serve command, not by Config) and the always-on mutex and
// block profile rates.
var ProcessFlags = []string{"max-procs", "gc-percent", "sched-policy", "mutex-profile-fraction", "block-profile-rate"}

// Parse parses serve's command line (the arguments after "serve"; the
// RINGLOG_* environment included, as the binary reads it) and builds the
// broker's config with Config, without starting anything.
func Parse(args []string, opts Options) (broker.Config, error) {
	var cfg broker.Config
	parsed := false
	parse := &cli.Command{Name: "serve", Flags: Flags(broker.DefaultConfig())}
	parse.Action = func(c *cli.Context) (err error) {
		parsed = true
		cfg, err = Config(c, opts)
		return err
	}
	// Flag errors come back as the error, not as a help page.
	parse.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return err }
	app := &cli.App{
		Name:     "ringlog",
		Commands: []*cli.Command{parse},
		Writer:   io.Discard, ErrWriter: io.Discard,
		OnUsageError: parse.OnUsageError,
	}
	if err := app.Run(append([]string{"ringlog", "serve"}, args...)); err != nil {
		return cfg, err
	}
	if !parsed {
		return cfg, fmt.Errorf("serve %s: no broker configured (a help flag?)", strings.Join(args, " "))
	}
	return cfg, nil
}

// EnvNames are the environment variables serve's flags read.
func EnvNames() []string {
	var out []string
	for _, f := range Flags(broker.DefaultConfig()) {
		out = append(out, EnvVars(f.Names()[0])...)
		// Flags read other variables too (AWS_* for the object store).
		if ef, ok := f.(interface{ GetEnvVars() []string }); ok {
			out = append(out, ef.GetEnvVars()...)
		}
	}
	return out
}

// newLogger is --log-level and --log-format's logger, writing to w.
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// Config builds the broker's config from serve's flags in c; flags left
// unset keep broker.DefaultConfig's values, which are their defaults. The
// profiling and fault-injection endpoints are handed to the broker as
// admin handlers. With opts.SharedProcess, a flag that sets process-wide
// state is refused.
func Config(c *cli.Context, opts Options) (broker.Config, error) {
	cfg := broker.DefaultConfig()
	if opts.SharedProcess {
		for _, f := range ProcessFlags {
			if c.IsSet(f) {
				return cfg, fmt.Errorf("--%s sets process-wide state: run this broker as a process of its own", f)
			}
		}
	}
	out := opts.LogOutput
	if out == nil {
		out = os.Stderr
	}
	log, err := newLogger(c.String("log-level"), c.String("log-format"), out)
	if err != nil {
		return cfg, err
	}
	cfg.Logger = log
	cfg.Version = fmt.Sprintf("%s (%s)", opts.Version, opts.Commit)
	cfg.Commit = opts.Commit
	cfg.NodeID = int32(c.Int("node-id"))
	cfg.DataDir = c.String("data-dir")
	cfg.Listen = c.String("listen")
	cfg.TLS = broker.TLSConfig{
		Listen:       c.String("tls-listen"),
		CertFile:     c.String("tls-cert"),
		KeyFile:      c.String("tls-key"),
		ClientCAFile: c.String("tls-client-ca"),
	}
	cfg.AdminListen = c.String("admin-listen")
	cfg.ControlledShutdownTimeout = c.Duration("controlled-shutdown-timeout")

	ctl := &cfg.Controller
	if ctl.Voters, err = controller.ParseVoters(c.String("controller-voters")); err != nil {
		return cfg, fmt.Errorf("--controller-voters: %w", err)
	}
	ctl.ControllerListen = c.String("controller-listen")
	ctl.ClusterID = c.String("cluster-id") // broker.New checks it against the data dir's
	ctl.Rack = c.String("rack")
	ctl.BrokerSessionTimeout = c.Duration("broker-session-timeout")
	ctl.ElectionTimeout = c.Duration("controller-election-timeout")
	ctl.UncleanLeaderElection = c.Bool("unclean-leader-election")
	ctl.LeaderRebalanceInterval = c.Duration("leader-rebalance-interval")
	ctl.LeaderImbalancePercent = c.Int("leader-imbalance-percent")

	// A shorter lag window shortens the follower's long poll and backoff
	// with it, which must stay well inside the window.
	rep := &cfg.Replication
	rep.ReplicaLagTimeMax = c.Duration("replica-lag-time-max")
	rep.FetchMaxWait = min(rep.FetchMaxWait, rep.ReplicaLagTimeMax/2)
	rep.FetchBackoff = min(rep.FetchBackoff, rep.ReplicaLagTimeMax/4)
	rep.MetadataLagBackoff = min(rep.MetadataLagBackoff, rep.FetchBackoff)

	eng := &cfg.Engine
	if eng.Fsync, err = engine.ParseFsyncPolicy(c.String("fsync")); err != nil {
		return cfg, fmt.Errorf("--fsync: %w", err)
	}
	eng.FsyncInterval = c.Duration("fsync-interval")
	switch eng.IOMode = c.String("io"); eng.IOMode {
	case "auto", "uring", "sync":
	default:
		return cfg, fmt.Errorf("--io %q: want auto, uring or sync", eng.IOMode)
	}
	eng.Journal = c.Bool("journal")
	eng.JournalBytes = c.Int64("journal-bytes")
	eng.JournalBuffered = !c.Bool("journal-direct")
	eng.JournalCommitInterval = c.Duration("journal-commit-interval")
	eng.RetentionCheckInterval = c.Duration("retention-check-interval")
	eng.CleanerInterval = c.Duration("log-cleaner-interval")
	eng.Defaults.SegmentBytes = c.Int64("segment-bytes")
	eng.Defaults.RetentionMs = c.Duration("retention").Milliseconds()
	eng.Defaults.RetentionBytes = c.Int64("retention-bytes")
	eng.MinFreeBytes = c.Int64("disk-min-free-bytes")
	eng.MinFreePercent = c.Float64("disk-min-free-percent")
	eng.DiskCheckInterval = c.Duration("disk-check-interval")
	var faults *vfs.ErrorFS
	if c.Bool("fault-injection") {
		faults = vfs.Wrap(vfs.Default)
		eng.FS = faults
	}

	w := &cfg.Wire
	w.DefaultReplicationFactor = int16(c.Int("default-replication-factor"))
	w.AdvertisedAddr = c.String("advertised-addr")
	w.TLSAdvertisedAddr = c.String("tls-advertised-addr")
	w.AutoCreateTopics = c.Bool("auto-create-topics")
	w.DefaultPartitions = int32(c.Int("default-partitions"))
	w.MaxRequestBytes = int32(c.Int("max-request-bytes"))
	w.FetchCopy = c.Bool("fetch-copy")
	w.FetchCopyBelow = c.Int("fetch-copy-below")
	w.MaxConnections = c.Int("max-connections")
	w.MaxConnectionsPerIP = c.Int("max-connections-per-ip")
	w.IdleTimeout = c.Duration("connections-max-idle")
	w.RequestReadTimeout = c.Duration("request-read-timeout")
	w.QueuedMaxRequestBytes = c.Int64("queued-max-request-bytes")
	w.FetchSessionSlots = c.Int("max-incremental-fetch-session-cache-slots")
	w.FetchSessionEvictionAge = c.Duration("min-incremental-fetch-session-eviction")
	w.QuotaWindow.Samples = c.Int("quota-window-num")
	w.QuotaWindow.Size = c.Duration("quota-window-size")
	sec := &w.Security
	sec.SASLListeners = c.StringSlice("sasl-listeners")
	sec.Mechanisms = c.StringSlice("sasl-mechanisms")
	sec.PlainOverPlaintext = c.Bool("sasl-plain-over-plaintext")
	sec.PreAuthMaxRequestBytes = int32(c.Int("pre-auth-max-request-bytes"))
	sec.AuthFailureDelay = c.Duration("auth-failure-delay")
	sec.Authorizer = c.Bool("authorizer")
	sec.SuperUsers = c.StringSlice("super-users")
	sec.InterBrokerUser = c.String("inter-broker-user")
	sec.InterBrokerPassword = c.String("inter-broker-password")
	for _, name := range c.StringSlice("bootstrap-user") {
		v := BootstrapPasswordVar(name)
		pass := os.Getenv(v)
		if name == "" || pass == "" {
			return cfg, fmt.Errorf("--bootstrap-user %q: set its password in %s", name, v)
		}
		cfg.BootstrapUsers = append(cfg.BootstrapUsers, broker.BootstrapUser{Name: name, Password: pass})
	}

	cfg.Groups.OffsetsTopicPartitions = c.Int("offsets-topic-partitions")
	cfg.Groups.InitialRebalanceDelay = c.Duration("group-initial-rebalance-delay")
	cfg.Groups.OffsetsRetention = c.Duration("offsets-retention")
	cfg.Groups.OffsetsRetentionCheckInterval = min(c.Duration("offsets-retention-check-interval"), c.Duration("offsets-retention"))
	cfg.Groups.MinSessionTimeout = c.Duration("group-min-session-timeout")
	if err := consumerGroupFlags(c, &cfg.Groups); err != nil {
		return cfg, err
	}
	if err := shareGroupFlags(c, &cfg.Shares); err != nil {
		return cfg, err
	}
	cfg.OffsetsReplicationFactor = int16(c.Int("offsets-replication-factor"))
	cfg.OffsetsTopicSegmentBytes = c.Int64("offsets-topic-segment-bytes")
	cfg.Transactions.TransactionLogPartitions = c.Int("transaction-state-partitions")
	cfg.Transactions.MaxTransactionTimeout = c.Duration("transaction-max-timeout")
	cfg.TransactionStateReplicationFactor = int16(c.Int("transaction-state-replication-factor"))
	cfg.TransactionStateSegmentBytes = c.Int64("transaction-state-segment-bytes")

	tieredFlags(c, &cfg.Tiered)

	cfg.AdminHandlers = func(mux *http.ServeMux, b *broker.Broker) {
		setupProfiling(c, mux, cfg, b, !opts.SharedProcess)
		if faults != nil {
			mux.Handle("/debug/ringlog/faults", faultHandler(faults, log))
		}
	}
	return cfg, nil
}

// tieredFlags reads the object store and remote-tier flags into t; an
// empty --object-store-endpoint leaves tiered storage off.
func tieredFlags(c *cli.Context, t *broker.TieredConfig) {
	t.S3.Endpoint = c.String("object-store-endpoint")
	t.S3.Bucket = c.String("object-store-bucket")
	t.S3.Region = c.String("object-store-region")
	t.S3.AccessKey = c.String("object-store-access-key")
	t.S3.SecretKey = c.String("object-store-secret-key")
	t.S3.Secure = c.Bool("object-store-tls")
	t.S3.CAFile = c.String("object-store-ca-file")
	t.S3.CreateBucket = c.Bool("object-store-create-bucket")
	t.CacheDir = c.String("remote-cache-dir")
	t.CacheBytes = c.Int64("remote-cache-bytes")
	t.Upload.Interval = c.Duration("remote-upload-interval")
	t.Upload.Concurrency = c.Int("remote-upload-concurrency")
	t.Upload.MaxRate = c.Int64("remote-upload-max-rate")
}

// consumerFlagNames renames group.Config's consumer fields to their flags
// in its validation errors, so a bad value is reported by flag name.
var consumerFlagNames = strings.NewReplacer(
	"ConsumerSessionTimeout", "--group-consumer-session-timeout",
	"ConsumerHeartbeatInterval", "--group-consumer-heartbeat-interval",
	"ConsumerMaxSize", "--group-consumer-max-size",
	"ConsumerAssignors", "--group-consumer-assignors",
	"consumer assignor", "--group-consumer-assignors value",
	"MigrationPolicy", "--group-consumer-migration-policy",
)

// consumerGroupFlags reads the KIP-848 consumer group flags into g and
// validates the group settings.
func consumerGroupFlags(c *cli.Context, g *group.Config) error {
	g.ConsumerSessionTimeout = c.Duration("group-consumer-session-timeout")
	g.ConsumerHeartbeatInterval = c.Duration("group-consumer-heartbeat-interval")
	g.ConsumerMaxSize = c.Int("group-consumer-max-size")
	g.ConsumerAssignors = nil
	for _, a := range c.StringSlice("group-consumer-assignors") {
		if a = strings.TrimSpace(a); a != "" {
			g.ConsumerAssignors = append(g.ConsumerAssignors, a)
		}
	}
	g.MigrationPolicy = c.String("group-consumer-migration-policy")
	if err := g.Validate(); err != nil {
		return errors.New(consumerFlagNames.Replace(err.Error()))
	}
	return nil
}

// shareFlagNames renames share.Config's fields to their flags in its
// validation errors.
var shareFlagNames = strings.NewReplacer(
	"RecordLockDuration", "--group-share-record-lock-duration",
	"DeliveryCountLimit", "--group-share-delivery-count-limit",
	"MaxRecordLocks", "--group-share-partition-max-record-locks",
	"MaxSessions", "--group-share-max-sessions",
)

// shareGroupFlags reads the share group (KIP-932) flags into s and
// validates them.
func shareGroupFlags(c *cli.Context, s *share.Config) error {
	s.RecordLockDuration = c.Duration("group-share-record-lock-duration")
	s.DeliveryCountLimit = c.Int("group-share-delivery-count-limit")
	s.MaxRecordLocks = c.Int("group-share-partition-max-record-locks")
	s.MaxSessions = c.Int("group-share-max-sessions")
	// An idle session is closed after some minutes; never before a lock
	// it holds could have expired.
	s.SessionIdle = max(s.SessionIdle, 2*s.RecordLockDuration)
	if err := s.Validate(); err != nil {
		return errors.New(shareFlagNames.Replace(err.Error()))
	}
	return nil
}

// BootstrapPasswordVar is the environment variable holding a bootstrap
// user's password: RINGLOG_BOOTSTRAP_PASSWORD_ and the name in upper case,
// every character but a letter or digit as _.
func BootstrapPasswordVar(name string) string {
	return "RINGLOG_BOOTSTRAP_PASSWORD_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
}
