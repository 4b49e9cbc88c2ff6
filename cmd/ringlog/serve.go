//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:   "serve",
		Usage:  "run a broker",
		Flags:  append(serveFlags(broker.DefaultConfig()), profilingFlags()...),
		Action: runServe,
	}
}

// serveFlags are serve's flags; their defaults are d's (broker.DefaultConfig),
// so --help shows the values the broker really starts with.
func serveFlags(d broker.Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "listen", Value: d.Listen, Usage: "Kafka listener host:port", EnvVars: env("listen")},
		&cli.StringFlag{Name: "advertised-addr", Usage: "host:port clients are told to use (default: the listener address)", EnvVars: env("advertised-addr")},
		&cli.StringFlag{Name: "tls-listen", Usage: "TLS Kafka listener host:port; empty disables (fetch copies through user space there)", EnvVars: env("tls-listen")},
		&cli.StringFlag{Name: "tls-advertised-addr", Usage: "host:port clients of the TLS listener are told to use (default: its address)", EnvVars: env("tls-advertised-addr")},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM server certificate (chain) for --tls-listen", EnvVars: env("tls-cert")},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key for --tls-cert", EnvVars: env("tls-key")},
		&cli.StringFlag{Name: "tls-client-ca", Usage: "PEM CA bundle; when set, clients of --tls-listen must present a certificate it signed (mutual TLS)", EnvVars: env("tls-client-ca")},
		&cli.StringFlag{Name: "data-dir", Value: d.DataDir, Usage: "directory for segments and metadata", EnvVars: env("data-dir")},
		&cli.IntFlag{Name: "node-id", Value: int(d.NodeID), Usage: "this broker's node id", EnvVars: env("node-id")},
		&cli.StringFlag{Name: "controller-voters", Usage: "static controller quorum \"1@host:port,2@host:port,3@host:port\"; empty: this node is a single-voter quorum of its own (no port opened)", EnvVars: env("controller-voters")},
		&cli.StringFlag{Name: "controller-listen", Usage: "host:port for raft and the controller RPC (default: this node's address in --controller-voters); required for brokers that are not voters", EnvVars: env("controller-listen")},
		&cli.DurationFlag{Name: "replica-lag-time-max", Value: d.Replication.ReplicaLagTimeMax, Usage: "replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR", EnvVars: env("replica-lag-time-max")},
		&cli.DurationFlag{Name: "controller-election-timeout", Value: d.Controller.ElectionTimeout, Usage: "a controller voter that hears nothing from the active controller for this long (randomized up to twice it) stands for election; the active controller steps down after half of it out of touch with a quorum", EnvVars: env("controller-election-timeout")},
		&cli.DurationFlag{Name: "broker-session-timeout", Value: d.Controller.BrokerSessionTimeout, Usage: "the controller fences a broker whose heartbeats stop for this long and moves its partition leaderships", EnvVars: env("broker-session-timeout")},
		&cli.DurationFlag{Name: "leader-rebalance-interval", Value: d.Controller.LeaderRebalanceInterval, Usage: "auto.leader.rebalance.enable with leader.imbalance.check.interval.seconds: how often the active controller moves leaderships back to preferred replicas that are unfenced and in sync (0: never)", EnvVars: env("leader-rebalance-interval")},
		&cli.IntFlag{Name: "leader-imbalance-percent", Value: d.Controller.LeaderImbalancePercent, Usage: "leader.imbalance.per.broker.percentage: rebalance a broker's partitions when more than this share of those it is preferred leader of are led elsewhere", EnvVars: env("leader-imbalance-percent")},
		&cli.BoolFlag{Name: "unclean-leader-election", Value: d.Controller.UncleanLeaderElection, Usage: "unclean.leader.election.enable cluster default (topics override it): when no in-sync replica of a partition is alive, the controller elects any live replica and acknowledged records may be lost", EnvVars: env("unclean-leader-election")},
		&cli.DurationFlag{Name: "controlled-shutdown-timeout", Value: d.ControlledShutdownTimeout, Usage: "on SIGTERM/SIGINT, wait this long for the controller to move this broker's leaderships away before closing (0: skip)", EnvVars: env("controlled-shutdown-timeout")},
		&cli.StringFlag{Name: "rack", Usage: "this broker's rack, for rack-aware replica placement", EnvVars: env("rack")},
		&cli.StringFlag{Name: "cluster-id", Usage: "cluster id to create or insist on (default: the data dir's, else the cluster's, else a new random one)", EnvVars: env("cluster-id")},
		&cli.IntFlag{Name: "default-replication-factor", Value: int(d.Wire.DefaultReplicationFactor), Usage: "replication factor of auto-created topics and of CreateTopics asking for -1", EnvVars: env("default-replication-factor")},
		&cli.StringFlag{Name: "admin-listen", Value: d.AdminListen, Usage: "HTTP admin listener (/healthz); empty disables", EnvVars: env("admin-listen")},
		&cli.StringFlag{Name: "fsync", Value: d.Engine.Fsync.String(), Usage: "when to flush: always (ack after fdatasync, group commit) | interval | never", EnvVars: env("fsync")},
		&cli.DurationFlag{Name: "fsync-interval", Value: d.Engine.FsyncInterval, Usage: "flush period with --fsync interval", EnvVars: env("fsync-interval")},
		&cli.BoolFlag{Name: "journal", Value: d.Engine.Journal, Usage: "with --fsync always, make each round durable with one write+fdatasync of a broker-wide journal instead of one fdatasync per dirty partition (--journal=false: per partition)", EnvVars: env("journal")},
		&cli.BoolFlag{Name: "journal-direct", Value: !d.Engine.JournalBuffered, Usage: "write the journal O_DIRECT with RWF_DSYNC: each write is its own durability barrier, completed in the kernel without a worker thread; --journal-direct=false (or a file system refusing O_DIRECT) writes it through the page cache and fdatasyncs it", EnvVars: env("journal-direct")},
		&cli.Int64Flag{Name: "journal-bytes", Value: d.Engine.JournalBytes, Usage: "size of the preallocated journal file (data-dir/journal/journal.log); a checkpoint starts after 1 MiB (or an eighth, if less) was written", EnvVars: env("journal-bytes")},
		&cli.StringFlag{Name: "io", Value: d.Engine.IOMode, Usage: "write path: auto | uring | sync", EnvVars: env("io")},
		&cli.BoolFlag{Name: "fault-injection", Usage: "TESTING ONLY: serve /debug/ringlog/faults on the admin listener (loopback clients) to inject disk errors and fsync delays (cmd/ringlog/faults.go)", EnvVars: env("fault-injection")},
		&cli.BoolFlag{Name: "auto-create-topics", Value: d.Wire.AutoCreateTopics, Usage: "create unknown topics on metadata and produce requests", EnvVars: env("auto-create-topics")},
		&cli.IntFlag{Name: "default-partitions", Value: int(d.Wire.DefaultPartitions), Usage: "partitions of auto-created topics", EnvVars: env("default-partitions")},
		&cli.Int64Flag{Name: "segment-bytes", Value: d.Engine.Defaults.SegmentBytes, Usage: "default segment.bytes", EnvVars: env("segment-bytes")},
		&cli.DurationFlag{Name: "retention", Value: time.Duration(d.Engine.Defaults.RetentionMs) * time.Millisecond, Usage: "default retention.ms as a duration", EnvVars: env("retention")},
		&cli.Int64Flag{Name: "retention-bytes", Value: d.Engine.Defaults.RetentionBytes, Usage: "default retention.bytes per partition (-1: unlimited)", EnvVars: env("retention-bytes")},
		&cli.DurationFlag{Name: "retention-check-interval", Value: d.Engine.RetentionCheckInterval, Usage: "how often retention runs", EnvVars: env("retention-check-interval")},
		&cli.Int64Flag{Name: "disk-min-free-bytes", Value: d.Engine.MinFreeBytes, Usage: "refuse produce (KAFKA_STORAGE_ERROR) while the data directory's file system has less free space than this or --disk-min-free-percent, whichever is more; the rest is reserved for metadata, checkpoints and group offsets (docs/disk-full.md); 0 with percent 0 disables", EnvVars: env("disk-min-free-bytes")},
		&cli.Float64Flag{Name: "disk-min-free-percent", Value: d.Engine.MinFreePercent, Usage: "free-space threshold as a percentage of the data directory's file system (see --disk-min-free-bytes)", EnvVars: env("disk-min-free-percent")},
		&cli.DurationFlag{Name: "disk-check-interval", Value: d.Engine.DiskCheckInterval, Usage: "how often the data directory's free space is sampled (also after deletions and when appends reach the threshold)", EnvVars: env("disk-check-interval")},
		&cli.DurationFlag{Name: "log-cleaner-interval", Value: d.Engine.CleanerInterval, Usage: "how often the log cleaner looks for compacted partitions (cleanup.policy compact) to clean (log.cleaner.backoff.ms)", EnvVars: env("log-cleaner-interval")},
		&cli.IntFlag{Name: "max-request-bytes", Value: int(d.Wire.MaxRequestBytes), Usage: "socket.request.max.bytes: largest request frame", EnvVars: env("max-request-bytes")},
		&cli.BoolFlag{Name: "fetch-copy", Value: d.Wire.FetchCopy, Usage: "send fetch data through user space instead of sendfile (for comparison)", EnvVars: env("fetch-copy")},
		&cli.IntFlag{Name: "offsets-topic-partitions", Value: d.Groups.OffsetsTopicPartitions, Usage: "partitions of __consumer_offsets when it is created (never change it afterwards)", EnvVars: env("offsets-topic-partitions")},
		&cli.IntFlag{Name: "offsets-replication-factor", Value: int(d.OffsetsReplicationFactor), Usage: "replication factor of __consumer_offsets when it is created; 0: min(3, live brokers)", EnvVars: env("offsets-replication-factor")},
		&cli.Int64Flag{Name: "offsets-topic-segment-bytes", Value: d.OffsetsTopicSegmentBytes, Usage: "segment.bytes of __consumer_offsets when it is created (offsets.topic.segment.bytes); only sealed segments are compacted", EnvVars: env("offsets-topic-segment-bytes")},
		&cli.IntFlag{Name: "transaction-state-partitions", Value: d.Transactions.TransactionLogPartitions, Usage: "partitions of __transaction_state when it is created (never change it afterwards)", EnvVars: env("transaction-state-partitions")},
		&cli.IntFlag{Name: "transaction-state-replication-factor", Value: int(d.TransactionStateReplicationFactor), Usage: "replication factor of __transaction_state when it is created; 0: min(3, live brokers)", EnvVars: env("transaction-state-replication-factor")},
		&cli.Int64Flag{Name: "transaction-state-segment-bytes", Value: d.TransactionStateSegmentBytes, Usage: "segment.bytes of __transaction_state when it is created (transaction.state.log.segment.bytes)", EnvVars: env("transaction-state-segment-bytes")},
		&cli.DurationFlag{Name: "transaction-max-timeout", Value: d.Transactions.MaxTransactionTimeout, Usage: "largest transaction timeout a producer may ask for (transaction.max.timeout.ms)", EnvVars: env("transaction-max-timeout")},
		&cli.DurationFlag{Name: "offsets-retention", Value: d.Groups.OffsetsRetention, Usage: "offsets.retention.minutes as a duration: an empty group's committed offsets are deleted this long after it became empty (live groups keep theirs)", EnvVars: env("offsets-retention")},
		&cli.DurationFlag{Name: "offsets-retention-check-interval", Value: d.Groups.OffsetsRetentionCheckInterval, Usage: "how often expired offsets are looked for (offsets.retention.check.interval.ms); capped at --offsets-retention", EnvVars: env("offsets-retention-check-interval")},
		&cli.DurationFlag{Name: "group-initial-rebalance-delay", Value: d.Groups.InitialRebalanceDelay, Usage: "delay of an empty group's first rebalance (group.initial.rebalance.delay.ms)", EnvVars: env("group-initial-rebalance-delay")},
		&cli.DurationFlag{Name: "group-min-session-timeout", Value: d.Groups.MinSessionTimeout, Usage: "smallest session timeout a group member may ask for (group.min.session.timeout.ms)", EnvVars: env("group-min-session-timeout")},
		&cli.DurationFlag{Name: "group-consumer-session-timeout", Value: d.Groups.ConsumerSessionTimeout, Usage: "group.consumer.session.timeout.ms as a duration: a consumer-protocol (KIP-848) member without a heartbeat for this long is removed and its partitions reassigned", EnvVars: env("group-consumer-session-timeout")},
		&cli.DurationFlag{Name: "group-consumer-heartbeat-interval", Value: d.Groups.ConsumerHeartbeatInterval, Usage: "group.consumer.heartbeat.interval.ms as a duration: how often consumer-protocol members heartbeat, so how soon they learn of a new assignment; below --group-consumer-session-timeout", EnvVars: env("group-consumer-heartbeat-interval")},
		&cli.IntFlag{Name: "group-consumer-max-size", Value: d.Groups.ConsumerMaxSize, Usage: "group.consumer.max.size: members one consumer-protocol group may hold (GROUP_MAX_SIZE_REACHED beyond)", EnvVars: env("group-consumer-max-size")},
		&cli.StringSliceFlag{Name: "group-consumer-assignors", Value: cli.NewStringSlice(d.Groups.ConsumerAssignors...), Usage: "group.consumer.assignors: server-side assignors consumer-protocol members may name (uniform, range); the first is the default", EnvVars: env("group-consumer-assignors")},
		&cli.StringFlag{Name: "group-consumer-migration-policy", Value: d.Groups.MigrationPolicy, Usage: "group.consumer.migration.policy: which empty groups convert between the classic and consumer protocols: bidirectional | upgrade (classic to consumer) | downgrade (consumer to classic) | disabled", EnvVars: env("group-consumer-migration-policy")},
		&cli.IntFlag{Name: "max-connections", Value: d.Wire.MaxConnections, Usage: "max.connections: connections over this are closed at accept (0: no cap)", EnvVars: env("max-connections")},
		&cli.IntFlag{Name: "max-connections-per-ip", Value: d.Wire.MaxConnectionsPerIP, Usage: "max.connections.per.ip (0: no cap)", EnvVars: env("max-connections-per-ip")},
		&cli.DurationFlag{Name: "connections-max-idle", Value: d.Wire.IdleTimeout, Usage: "connections.max.idle.ms: close connections with no request for this long (0: never)", EnvVars: env("connections-max-idle")},
		&cli.DurationFlag{Name: "request-read-timeout", Value: d.Wire.RequestReadTimeout, Usage: "a request body must arrive within this once its length prefix has (slow clients are dropped)", EnvVars: env("request-read-timeout")},
		&cli.Int64Flag{Name: "queued-max-request-bytes", Value: d.Wire.QueuedMaxRequestBytes, Usage: "queued.max.request.bytes: memory for large request frames in flight across all connections", EnvVars: env("queued-max-request-bytes")},
		&cli.IntFlag{Name: "max-incremental-fetch-session-cache-slots", Value: d.Wire.FetchSessionSlots, Usage: "incremental fetch sessions (KIP-227) kept for consumers and followers; 0 disables them (every fetch lists all its partitions)", EnvVars: env("max-incremental-fetch-session-cache-slots")},
		&cli.DurationFlag{Name: "min-incremental-fetch-session-eviction", Value: d.Wire.FetchSessionEvictionAge, Usage: "min.incremental.fetch.session.eviction.ms as a duration: a fetch session used within it is evicted only for a stronger one (a follower's, or one with more partitions)", EnvVars: env("min-incremental-fetch-session-eviction")},
		&cli.IntFlag{Name: "quota-window-num", Value: d.Wire.QuotaWindow.Samples, Usage: "quota.window.num: samples client quota rates are measured over", EnvVars: env("quota-window-num")},
		&cli.DurationFlag{Name: "quota-window-size", Value: d.Wire.QuotaWindow.Size, Usage: "quota.window.size.seconds as a duration: the span of one quota sample; a greedy client can burst about (num-1) x size of its quota, so shorter samples throttle more smoothly", EnvVars: env("quota-window-size")},
		&cli.StringSliceFlag{Name: "sasl-listeners", Usage: "listeners requiring SASL authentication: plaintext, tls (default: none)", EnvVars: env("sasl-listeners")},
		&cli.StringSliceFlag{Name: "sasl-mechanisms", Value: cli.NewStringSlice(d.Wire.Security.Mechanisms...), Usage: "SASL mechanisms offered: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (PLAIN only on TLS listeners unless --sasl-plain-over-plaintext)", EnvVars: env("sasl-mechanisms")},
		&cli.BoolFlag{Name: "sasl-plain-over-plaintext", Value: d.Wire.Security.PlainOverPlaintext, Usage: "allow SASL PLAIN on a listener without TLS (passwords cross the network in clear text)", EnvVars: env("sasl-plain-over-plaintext")},
		&cli.IntFlag{Name: "pre-auth-max-request-bytes", Value: int(d.Wire.Security.PreAuthMaxRequestBytes), Usage: "largest request frame accepted before SASL authentication", EnvVars: env("pre-auth-max-request-bytes")},
		&cli.DurationFlag{Name: "auth-failure-delay", Value: d.Wire.Security.AuthFailureDelay, Usage: "delay before answering a failed SASL authentication (connection.failed.authentication.delay.ms)", EnvVars: env("auth-failure-delay")},
		&cli.BoolFlag{Name: "authorizer", Value: d.Wire.Security.Authorizer, Usage: "enforce ACLs: deny every operation no ACL allows (super users excepted)", EnvVars: env("authorizer")},
		&cli.StringSliceFlag{Name: "super-users", Usage: "principals (User:name) that bypass ACLs", EnvVars: env("super-users")},
		&cli.StringFlag{Name: "inter-broker-user", Usage: "SCRAM-SHA-512 user this broker authenticates as to other brokers (needed when --sasl-listeners includes plaintext)", EnvVars: env("inter-broker-user")},
		&cli.StringSliceFlag{Name: "bootstrap-user", Usage: "SCRAM user to create at start when the cluster has none of that name, the first administrator of a cluster with --authorizer (list it in --super-users too); the password comes from RINGLOG_BOOTSTRAP_PASSWORD_<NAME> (upper case, other characters than letters and digits as _)", EnvVars: env("bootstrap-user")},
		&cli.StringFlag{Name: "inter-broker-password", Usage: "password of --inter-broker-user (prefer the RINGLOG_INTER_BROKER_PASSWORD variable)", EnvVars: env("inter-broker-password")},
		&cli.StringFlag{Name: "object-store-endpoint", Usage: "tiered storage: host:port (or http(s):// URL) of an S3-compatible object store; empty: tiered storage off, and topics cannot set remote.storage.enable (docs/TIERED.md)", EnvVars: env("object-store-endpoint")},
		&cli.StringFlag{Name: "object-store-bucket", Value: d.Tiered.S3.Bucket, Usage: "bucket holding the remote tier's objects", EnvVars: env("object-store-bucket")},
		&cli.StringFlag{Name: "object-store-region", Value: d.Tiered.S3.Region, Usage: "region signed into object store requests", EnvVars: env("object-store-region")},
		&cli.StringFlag{Name: "object-store-access-key", Usage: "object store access key", EnvVars: append(env("object-store-access-key"), "AWS_ACCESS_KEY_ID")},
		&cli.StringFlag{Name: "object-store-secret-key", Usage: "object store secret key (prefer the environment variables; never logged)", EnvVars: append(env("object-store-secret-key"), "AWS_SECRET_ACCESS_KEY")},
		&cli.BoolFlag{Name: "object-store-tls", Usage: "connect to the object store over TLS (an https:// endpoint implies it)", EnvVars: env("object-store-tls")},
		&cli.StringFlag{Name: "object-store-ca-file", Usage: "PEM CA bundle trusted for the object store's TLS certificate, besides the system roots", EnvVars: env("object-store-ca-file")},
		&cli.BoolFlag{Name: "object-store-create-bucket", Usage: "create the bucket at start if missing (the only object store call made at start; off: the broker starts while the store is down)", EnvVars: env("object-store-create-bucket")},
		&cli.StringFlag{Name: "remote-cache-dir", Usage: "chunk cache of remote-tier reads (default: <data-dir>/remote-cache)", EnvVars: env("remote-cache-dir")},
		&cli.Int64Flag{Name: "remote-cache-bytes", Value: d.Tiered.CacheBytes, Usage: "disk bytes the chunk cache of remote-tier reads may use", EnvVars: env("remote-cache-bytes")},
		&cli.DurationFlag{Name: "remote-upload-interval", Value: d.Tiered.Upload.Interval, Usage: "how often each led partition of a remote-storage topic looks for sealed segments to upload and applies remote retention", EnvVars: env("remote-upload-interval")},
		&cli.Int64Flag{Name: "remote-upload-max-rate", Value: d.Tiered.Upload.MaxRate, Usage: "bytes per second this broker uploads at most, over all partitions (0: no cap); keep it above the broker's share of the ingest rate", EnvVars: env("remote-upload-max-rate")},
		&cli.IntFlag{Name: "remote-upload-concurrency", Value: d.Tiered.Upload.Concurrency, Usage: "segments this broker uploads at once", EnvVars: env("remote-upload-concurrency")},
		&cli.IntFlag{Name: "max-procs", Usage: "GOMAXPROCS: threads running Go code at once (0: Go's default, the CPUs this process may use, cgroup limits included; the GOMAXPROCS variable, when set, wins); brokers sharing a machine should split its cores, or every idle scheduler thread is woken and put back to sleep on each request (ringlog bench and dev cluster do, BENCHMARKS.md section 21)", EnvVars: env("max-procs")},
		&cli.IntFlag{Name: "gc-percent", Value: defaultGCPercent, Usage: "Go GC target (as GOGC, which overrides it when set): heap growth over the live heap before a collection; produce bodies are short-lived garbage, and at 100 (Go's default) collecting them cost a quarter of the broker's CPU at 100k msg/s (BENCHMARKS.md section 13); -1 disables the GC", EnvVars: env("gc-percent")},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug | info | warn | error", EnvVars: env("log-level")},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text | json", EnvVars: env("log-format")},
	}
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// setGCPercent applies --gc-percent unless GOGC is set: the variable is
// Go's own knob, and whoever set it meant it.
func setGCPercent(pct int, log *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Info("GOGC is set; --gc-percent ignored", "GOGC", v)
		return
	}
	debug.SetGCPercent(pct)
}

// setMaxProcs applies --max-procs unless GOMAXPROCS is set.
func setMaxProcs(n int, log *slog.Logger) error {
	switch {
	case n < 0:
		return fmt.Errorf("--max-procs %d: want 0 (Go's default) or more", n)
	case n == 0:
		return nil
	}
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		log.Info("GOMAXPROCS is set; --max-procs ignored", "GOMAXPROCS", v)
		return nil
	}
	runtime.GOMAXPROCS(n)
	return nil
}

func runServe(c *cli.Context) error {
	cfg, err := configFromFlags(c)
	if err != nil {
		return err
	}
	log := cfg.Logger
	slog.SetDefault(log)
	setGCPercent(c.Int("gc-percent"), log)
	if err := setMaxProcs(c.Int("max-procs"), log); err != nil {
		return err
	}
	// Checked before the data dir is touched.
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Engine.FS != nil {
		log.Warn("fault injection on (--fault-injection): a test facility, do not use in production")
	}
	b, err := broker.New(cfg)
	if errors.Is(err, engine.ErrIOUringUnusable) {
		return fmt.Errorf("--io uring: %w (use --io auto to fall back to the pwrite/fdatasync path, or --io sync)", err)
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runErr := b.Start(ctx)
	switch {
	case runErr == nil:
		<-ctx.Done()
	case ctx.Err() != nil && errors.Is(runErr, ctx.Err()):
		runErr = nil // a signal while joining: a clean stop
	}
	log.Info("shutting down")
	b.Drain(context.Background())
	if err := b.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr == nil {
		log.Info("clean shutdown complete")
	}
	return runErr
}

// configFromFlags builds the broker's config from serve's flags; flags
// left unset keep broker.DefaultConfig's values, which are their defaults.
// The profiling and fault-injection endpoints are handed to the broker
// as admin handlers.
func configFromFlags(c *cli.Context) (broker.Config, error) {
	cfg := broker.DefaultConfig()
	log, err := newLogger(c.String("log-level"), c.String("log-format"))
	if err != nil {
		return cfg, err
	}
	cfg.Logger = log
	cfg.Version = fmt.Sprintf("%s (%s)", version, commit)
	cfg.Commit = commit
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
		v := bootstrapPasswordVar(name)
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
	cfg.OffsetsReplicationFactor = int16(c.Int("offsets-replication-factor"))
	cfg.OffsetsTopicSegmentBytes = c.Int64("offsets-topic-segment-bytes")
	cfg.Transactions.TransactionLogPartitions = c.Int("transaction-state-partitions")
	cfg.Transactions.MaxTransactionTimeout = c.Duration("transaction-max-timeout")
	cfg.TransactionStateReplicationFactor = int16(c.Int("transaction-state-replication-factor"))
	cfg.TransactionStateSegmentBytes = c.Int64("transaction-state-segment-bytes")

	tieredFlags(c, &cfg.Tiered)

	cfg.AdminHandlers = func(mux *http.ServeMux, b *broker.Broker) {
		setupProfiling(c, mux, cfg.NodeID, b, log)
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

// bootstrapPasswordVar is the environment variable holding a bootstrap
// user's password: RINGLOG_BOOTSTRAP_PASSWORD_ and the name in upper case,
// every character but a letter or digit as _.
func bootstrapPasswordVar(name string) string {
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
