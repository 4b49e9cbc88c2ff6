package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ringlog/ringlog/broker"
	"github.com/ringlog/ringlog/coordinator"
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/vfs"
	"github.com/ringlog/ringlog/replication"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run a broker",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9092", Usage: "Kafka listener host:port", EnvVars: env("listen")},
			&cli.StringFlag{Name: "advertised-addr", Usage: "host:port clients are told to use (default: the listener address)", EnvVars: env("advertised-addr")},
			&cli.StringFlag{Name: "tls-listen", Usage: "TLS Kafka listener host:port; empty disables (fetch copies through user space there)", EnvVars: env("tls-listen")},
			&cli.StringFlag{Name: "tls-advertised-addr", Usage: "host:port clients of the TLS listener are told to use (default: its address)", EnvVars: env("tls-advertised-addr")},
			&cli.StringFlag{Name: "tls-cert", Usage: "PEM server certificate (chain) for --tls-listen", EnvVars: env("tls-cert")},
			&cli.StringFlag{Name: "tls-key", Usage: "PEM private key for --tls-cert", EnvVars: env("tls-key")},
			&cli.StringFlag{Name: "tls-client-ca", Usage: "PEM CA bundle; when set, clients of --tls-listen must present a certificate it signed (mutual TLS)", EnvVars: env("tls-client-ca")},
			&cli.StringFlag{Name: "data-dir", Value: "./data", Usage: "directory for segments and metadata", EnvVars: env("data-dir")},
			&cli.IntFlag{Name: "node-id", Value: 1, Usage: "this broker's node id", EnvVars: env("node-id")},
			&cli.StringFlag{Name: "controller-voters", Usage: "static controller quorum \"1@host:port,2@host:port,3@host:port\"; empty: this node is a single-voter quorum of its own (no port opened)", EnvVars: env("controller-voters")},
			&cli.StringFlag{Name: "controller-listen", Usage: "host:port for raft and the controller RPC (default: this node's address in --controller-voters); required for brokers that are not voters", EnvVars: env("controller-listen")},
			&cli.DurationFlag{Name: "replica-lag-time-max", Value: 30 * time.Second, Usage: "replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR", EnvVars: env("replica-lag-time-max")},
			&cli.DurationFlag{Name: "broker-session-timeout", Value: 9 * time.Second, Usage: "the controller fences a broker whose heartbeats stop for this long and moves its partition leaderships", EnvVars: env("broker-session-timeout")},
			&cli.DurationFlag{Name: "leader-rebalance-interval", Value: 5 * time.Minute, Usage: "auto.leader.rebalance.enable with leader.imbalance.check.interval.seconds: how often the active controller moves leaderships back to preferred replicas that are unfenced and in sync (0: never)", EnvVars: env("leader-rebalance-interval")},
			&cli.IntFlag{Name: "leader-imbalance-percent", Value: 10, Usage: "leader.imbalance.per.broker.percentage: rebalance a broker's partitions when more than this share of those it is preferred leader of are led elsewhere", EnvVars: env("leader-imbalance-percent")},
			&cli.BoolFlag{Name: "unclean-leader-election", Usage: "unclean.leader.election.enable cluster default (topics override it): when no in-sync replica of a partition is alive, the controller elects any live replica and acknowledged records may be lost", EnvVars: env("unclean-leader-election")},
			&cli.DurationFlag{Name: "controlled-shutdown-timeout", Value: 5 * time.Second, Usage: "on SIGTERM/SIGINT, wait this long for the controller to move this broker's leaderships away before closing (0: skip)", EnvVars: env("controlled-shutdown-timeout")},
			&cli.StringFlag{Name: "rack", Usage: "this broker's rack, for rack-aware replica placement", EnvVars: env("rack")},
			&cli.StringFlag{Name: "cluster-id", Usage: "cluster id to create or insist on (default: the data dir's, else the cluster's, else a new random one)", EnvVars: env("cluster-id")},
			&cli.IntFlag{Name: "default-replication-factor", Value: 1, Usage: "replication factor of auto-created topics and of CreateTopics asking for -1", EnvVars: env("default-replication-factor")},
			&cli.StringFlag{Name: "admin-listen", Value: "127.0.0.1:9644", Usage: "HTTP admin listener (/healthz); empty disables", EnvVars: env("admin-listen")},
			&cli.StringFlag{Name: "fsync", Value: "always", Usage: "when to flush: always (ack after fdatasync, group commit) | interval | never", EnvVars: env("fsync")},
			&cli.DurationFlag{Name: "fsync-interval", Value: time.Second, Usage: "flush period with --fsync interval", EnvVars: env("fsync-interval")},
			&cli.StringFlag{Name: "io", Value: "auto", Usage: "write path: auto | uring | sync", EnvVars: env("io")},
			&cli.BoolFlag{Name: "fault-injection", Usage: "TESTING ONLY: serve /debug/ringlog/faults on the admin listener (loopback clients) to inject disk errors and fsync delays (cmd/ringlog/faults.go)", EnvVars: env("fault-injection")},
			&cli.BoolFlag{Name: "auto-create-topics", Value: true, Usage: "create unknown topics on metadata and produce requests", EnvVars: env("auto-create-topics")},
			&cli.IntFlag{Name: "default-partitions", Value: 1, Usage: "partitions of auto-created topics", EnvVars: env("default-partitions")},
			&cli.Int64Flag{Name: "segment-bytes", Value: 1 << 30, Usage: "default segment.bytes", EnvVars: env("segment-bytes")},
			&cli.DurationFlag{Name: "retention", Value: 7 * 24 * time.Hour, Usage: "default retention.ms as a duration", EnvVars: env("retention")},
			&cli.Int64Flag{Name: "retention-bytes", Value: -1, Usage: "default retention.bytes per partition (-1: unlimited)", EnvVars: env("retention-bytes")},
			&cli.DurationFlag{Name: "retention-check-interval", Value: 5 * time.Minute, Usage: "how often retention runs", EnvVars: env("retention-check-interval")},
			&cli.Int64Flag{Name: "disk-min-free-bytes", Value: 8 << 20, Usage: "refuse produce (KAFKA_STORAGE_ERROR) while the data directory's file system has less free space than this or --disk-min-free-percent, whichever is more; the rest is reserved for metadata, checkpoints and group offsets (docs/disk-full.md); 0 with percent 0 disables", EnvVars: env("disk-min-free-bytes")},
			&cli.Float64Flag{Name: "disk-min-free-percent", Value: 5, Usage: "free-space threshold as a percentage of the data directory's file system (see --disk-min-free-bytes)", EnvVars: env("disk-min-free-percent")},
			&cli.DurationFlag{Name: "disk-check-interval", Value: time.Second, Usage: "how often the data directory's free space is sampled (also after deletions and when appends reach the threshold)", EnvVars: env("disk-check-interval")},
			&cli.DurationFlag{Name: "log-cleaner-interval", Value: 15 * time.Second, Usage: "how often the log cleaner looks for compacted partitions (cleanup.policy compact) to clean (log.cleaner.backoff.ms)", EnvVars: env("log-cleaner-interval")},
			&cli.IntFlag{Name: "max-request-bytes", Value: 100 << 20, Usage: "socket.request.max.bytes: largest request frame", EnvVars: env("max-request-bytes")},
			&cli.BoolFlag{Name: "fetch-copy", Usage: "send fetch data through user space instead of sendfile (for comparison)", EnvVars: env("fetch-copy")},
			&cli.IntFlag{Name: "offsets-topic-partitions", Value: 50, Usage: "partitions of __consumer_offsets when it is created (never change it afterwards)", EnvVars: env("offsets-topic-partitions")},
			&cli.IntFlag{Name: "offsets-replication-factor", Value: 0, Usage: "replication factor of __consumer_offsets when it is created; 0: min(3, live brokers)", EnvVars: env("offsets-replication-factor")},
			&cli.Int64Flag{Name: "offsets-topic-segment-bytes", Value: 104857600, Usage: "segment.bytes of __consumer_offsets when it is created (offsets.topic.segment.bytes); only sealed segments are compacted", EnvVars: env("offsets-topic-segment-bytes")},
			&cli.IntFlag{Name: "transaction-state-partitions", Value: 50, Usage: "partitions of __transaction_state when it is created (never change it afterwards)", EnvVars: env("transaction-state-partitions")},
			&cli.IntFlag{Name: "transaction-state-replication-factor", Value: 0, Usage: "replication factor of __transaction_state when it is created; 0: min(3, live brokers)", EnvVars: env("transaction-state-replication-factor")},
			&cli.Int64Flag{Name: "transaction-state-segment-bytes", Value: 104857600, Usage: "segment.bytes of __transaction_state when it is created (transaction.state.log.segment.bytes)", EnvVars: env("transaction-state-segment-bytes")},
			&cli.DurationFlag{Name: "transaction-max-timeout", Value: 15 * time.Minute, Usage: "largest transaction timeout a producer may ask for (transaction.max.timeout.ms)", EnvVars: env("transaction-max-timeout")},
			&cli.DurationFlag{Name: "offsets-retention", Value: 7 * 24 * time.Hour, Usage: "offsets.retention.minutes as a duration: an empty group's committed offsets are deleted this long after it became empty (live groups keep theirs)", EnvVars: env("offsets-retention")},
			&cli.DurationFlag{Name: "offsets-retention-check-interval", Value: 10 * time.Minute, Usage: "how often expired offsets are looked for (offsets.retention.check.interval.ms); capped at --offsets-retention", EnvVars: env("offsets-retention-check-interval")},
			&cli.DurationFlag{Name: "group-initial-rebalance-delay", Value: 3 * time.Second, Usage: "delay of an empty group's first rebalance (group.initial.rebalance.delay.ms)", EnvVars: env("group-initial-rebalance-delay")},
			&cli.DurationFlag{Name: "group-min-session-timeout", Value: 6 * time.Second, Usage: "smallest session timeout a group member may ask for (group.min.session.timeout.ms)", EnvVars: env("group-min-session-timeout")},
			&cli.IntFlag{Name: "max-connections", Value: 10000, Usage: "max.connections: connections over this are closed at accept (0: no cap)", EnvVars: env("max-connections")},
			&cli.IntFlag{Name: "max-connections-per-ip", Value: 1000, Usage: "max.connections.per.ip (0: no cap)", EnvVars: env("max-connections-per-ip")},
			&cli.DurationFlag{Name: "connections-max-idle", Value: 10 * time.Minute, Usage: "connections.max.idle.ms: close connections with no request for this long (0: never)", EnvVars: env("connections-max-idle")},
			&cli.DurationFlag{Name: "request-read-timeout", Value: 30 * time.Second, Usage: "a request body must arrive within this once its length prefix has (slow clients are dropped)", EnvVars: env("request-read-timeout")},
			&cli.Int64Flag{Name: "queued-max-request-bytes", Value: 512 << 20, Usage: "queued.max.request.bytes: memory for large request frames in flight across all connections", EnvVars: env("queued-max-request-bytes")},
			&cli.StringSliceFlag{Name: "sasl-listeners", Usage: "listeners requiring SASL authentication: plaintext, tls (default: none)", EnvVars: env("sasl-listeners")},
			&cli.StringSliceFlag{Name: "sasl-mechanisms", Value: cli.NewStringSlice("SCRAM-SHA-256", "SCRAM-SHA-512"), Usage: "SASL mechanisms offered: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (PLAIN only on TLS listeners unless --sasl-plain-over-plaintext)", EnvVars: env("sasl-mechanisms")},
			&cli.BoolFlag{Name: "sasl-plain-over-plaintext", Usage: "allow SASL PLAIN on a listener without TLS (passwords cross the network in clear text)", EnvVars: env("sasl-plain-over-plaintext")},
			&cli.IntFlag{Name: "pre-auth-max-request-bytes", Value: 512 << 10, Usage: "largest request frame accepted before SASL authentication", EnvVars: env("pre-auth-max-request-bytes")},
			&cli.DurationFlag{Name: "auth-failure-delay", Value: time.Second, Usage: "delay before answering a failed SASL authentication (connection.failed.authentication.delay.ms)", EnvVars: env("auth-failure-delay")},
			&cli.BoolFlag{Name: "authorizer", Usage: "enforce ACLs: deny every operation no ACL allows (super users excepted)", EnvVars: env("authorizer")},
			&cli.StringSliceFlag{Name: "super-users", Usage: "principals (User:name) that bypass ACLs", EnvVars: env("super-users")},
			&cli.StringFlag{Name: "inter-broker-user", Usage: "SCRAM-SHA-512 user this broker authenticates as to other brokers (needed when --sasl-listeners includes plaintext)", EnvVars: env("inter-broker-user")},
			&cli.StringFlag{Name: "inter-broker-password", Usage: "password of --inter-broker-user (prefer the RINGLOG_INTER_BROKER_PASSWORD variable)", EnvVars: env("inter-broker-password")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug | info | warn | error", EnvVars: env("log-level")},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text | json", EnvVars: env("log-format")},
		}, profilingFlags()...),
		Action: runServe,
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

// On shutdown the Kafka listeners drain: a connection closes once it has
// had no new request for drainQuiet (its requests answered), and
// drainTimeout bounds the whole drain.
const (
	drainQuiet   = 100 * time.Millisecond
	drainTimeout = time.Second
)

func runServe(c *cli.Context) error {
	log, err := newLogger(c.String("log-level"), c.String("log-format"))
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	started := time.Now()

	dataDir := c.String("data-dir")
	nodeID := int32(c.Int("node-id"))
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	meta, err := loadOrCreateMeta(dataDir, nodeID)
	if err != nil {
		return err
	}
	if id := c.String("cluster-id"); id != "" {
		if meta.clusterID != "" && meta.clusterID != id {
			return fmt.Errorf("%s belongs to cluster %q, but --cluster-id is %q", filepath.Join(dataDir, metaFile), meta.clusterID, id)
		}
		meta.clusterID = id
	}
	ccfg, err := controllerConfig(c, dataDir, nodeID, meta, log)
	if err != nil {
		return err
	}
	// A data dir without raft state but with topics was written by a
	// ringlog that predates the controller: adopt its topics (below).
	_, statErr := os.Stat(filepath.Join(dataDir, "raft"))
	freshRaft := errors.Is(statErr, os.ErrNotExist)

	ecfg := engine.DefaultConfig()
	ecfg.Dir = dataDir
	ecfg.Logger = log
	if ecfg.Fsync, err = engine.ParseFsyncPolicy(c.String("fsync")); err != nil {
		return fmt.Errorf("--fsync: %w", err)
	}
	ecfg.FsyncInterval = c.Duration("fsync-interval")
	ecfg.IOMode = c.String("io")
	ecfg.RetentionCheckInterval = c.Duration("retention-check-interval")
	ecfg.CleanerInterval = c.Duration("log-cleaner-interval")
	ecfg.Defaults.SegmentBytes = c.Int64("segment-bytes")
	ecfg.Defaults.RetentionMs = c.Duration("retention").Milliseconds()
	ecfg.Defaults.RetentionBytes = c.Int64("retention-bytes")
	ecfg.MinFreeBytes = c.Int64("disk-min-free-bytes")
	ecfg.MinFreePercent = c.Float64("disk-min-free-percent")
	ecfg.DiskCheckInterval = c.Duration("disk-check-interval")
	var faults *vfs.ErrorFS
	if c.Bool("fault-injection") {
		faults = vfs.Wrap(vfs.Default)
		ecfg.FS = faults
		log.Warn("fault injection on (--fault-injection): a test facility, do not use in production")
	}
	if err := ecfg.Validate(); err != nil {
		return err
	}
	eng, err := engine.Open(ecfg)
	if errors.Is(err, engine.ErrIOUringUnusable) {
		return fmt.Errorf("--io uring: %w (use --io auto to fall back to the pwrite/fdatasync path, or --io sync)", err)
	}
	if err != nil {
		return fmt.Errorf("opening storage: %w", err)
	}
	log.Info("storage opened", "data_dir", dataDir, "io_path", eng.IOPath(), "fsync", c.String("fsync"), "topics", len(eng.Topics()))

	wcfg := broker.DefaultWireConfig()
	ncfg := &wcfg.Wire
	ncfg.NodeID = nodeID
	ncfg.DefaultReplicationFactor = int16(c.Int("default-replication-factor"))
	ncfg.AdvertisedAddr = c.String("advertised-addr")
	ncfg.TLSAdvertisedAddr = c.String("tls-advertised-addr")
	ncfg.AutoCreateTopics = c.Bool("auto-create-topics")
	ncfg.DefaultPartitions = int32(c.Int("default-partitions"))
	ncfg.MaxRequestBytes = int32(c.Int("max-request-bytes"))
	ncfg.FetchCopy = c.Bool("fetch-copy")
	wcfg.Groups.OffsetsTopicPartitions = c.Int("offsets-topic-partitions")
	wcfg.OffsetsReplicationFactor = int16(c.Int("offsets-replication-factor"))
	wcfg.OffsetsTopicSegmentBytes = c.Int64("offsets-topic-segment-bytes")
	wcfg.Groups.InitialRebalanceDelay = c.Duration("group-initial-rebalance-delay")
	wcfg.Groups.OffsetsRetention = c.Duration("offsets-retention")
	wcfg.Groups.OffsetsRetentionCheckInterval = min(c.Duration("offsets-retention-check-interval"), c.Duration("offsets-retention"))
	wcfg.Groups.MinSessionTimeout = c.Duration("group-min-session-timeout")
	wcfg.Transactions.TransactionLogPartitions = c.Int("transaction-state-partitions")
	wcfg.TransactionStateReplicationFactor = int16(c.Int("transaction-state-replication-factor"))
	wcfg.TransactionStateSegmentBytes = c.Int64("transaction-state-segment-bytes")
	wcfg.Transactions.MaxTransactionTimeout = c.Duration("transaction-max-timeout")
	ncfg.MaxConnections = c.Int("max-connections")
	ncfg.MaxConnectionsPerIP = c.Int("max-connections-per-ip")
	ncfg.IdleTimeout = c.Duration("connections-max-idle")
	ncfg.RequestReadTimeout = c.Duration("request-read-timeout")
	ncfg.QueuedMaxRequestBytes = c.Int64("queued-max-request-bytes")
	ncfg.Security.SASLListeners = c.StringSlice("sasl-listeners")
	ncfg.Security.Mechanisms = c.StringSlice("sasl-mechanisms")
	ncfg.Security.PlainOverPlaintext = c.Bool("sasl-plain-over-plaintext")
	ncfg.Security.PreAuthMaxRequestBytes = int32(c.Int("pre-auth-max-request-bytes"))
	ncfg.Security.AuthFailureDelay = c.Duration("auth-failure-delay")
	ncfg.Security.Authorizer = c.Bool("authorizer")
	ncfg.Security.SuperUsers = c.StringSlice("super-users")
	ncfg.Security.InterBrokerUser = c.String("inter-broker-user")
	ncfg.Security.InterBrokerPassword = c.String("inter-broker-password")
	ncfg.Logger = log
	srv, err := broker.NewWireServer(wcfg, eng)
	if err != nil {
		eng.Close()
		return err
	}
	rcfg := replication.DefaultConfig()
	rcfg.ReplicaLagTimeMax = c.Duration("replica-lag-time-max")
	rcfg.FetchMaxWait = min(rcfg.FetchMaxWait, rcfg.ReplicaLagTimeMax/2)
	rcfg.FetchBackoff = min(rcfg.FetchBackoff, rcfg.ReplicaLagTimeMax/4)
	if err := srv.EnableReplication(rcfg); err != nil {
		srv.Close()
		eng.Close()
		return fmt.Errorf("--replica-lag-time-max: %w", err)
	}
	addr, err := srv.Listen(c.String("listen"))
	if err != nil {
		eng.Close()
		return fmt.Errorf("--listen: %w", err)
	}
	if tl := c.String("tls-listen"); tl != "" {
		tcfg, err := serverTLSConfig(c.String("tls-cert"), c.String("tls-key"), c.String("tls-client-ca"))
		if err == nil {
			_, err = srv.ListenTLS(tl, tcfg)
		}
		if err != nil {
			srv.Close()
			eng.Close()
			return fmt.Errorf("--tls-listen: %w", err)
		}
	} else if c.String("tls-cert") != "" || c.String("tls-client-ca") != "" {
		srv.Close()
		eng.Close()
		return errors.New("--tls-cert/--tls-client-ca given without --tls-listen")
	}

	ccfg.Endpoints = srv.Endpoints()
	node, err := coordinator.New(ccfg)
	if err != nil {
		srv.Close()
		eng.Close()
		return err
	}
	startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Second)
	err = node.Start(startCtx)
	cancelStart()
	if err != nil {
		srv.Close()
		eng.Close()
		return fmt.Errorf("starting the controller node: %w", err)
	}

	var ready atomic.Bool
	var admin *broker.AdminServer
	if a := c.String("admin-listen"); a != "" {
		admin, err = broker.StartAdmin(a, func() broker.Health {
			status := "starting"
			if ready.Load() {
				status = "ok"
			}
			members, _ := node.Members()
			disk := eng.DiskStatus()
			return broker.Health{
				Status:       status,
				NodeID:       nodeID,
				ClusterID:    node.MetadataImage().ClusterID(),
				ControllerID: node.Controller(),
				BrokerState:  node.BrokerState(),
				Controllers:  members,
				Version:      fmt.Sprintf("%s (%s)", version, commit),
				IOPath:       eng.IOPath(),
				IOReason:     eng.IOReason(),
				Fsync:        c.String("fsync"),
				FetchPath:    srv.FetchPaths(),
				PID:          os.Getpid(),
				Uptime:       time.Since(started).Round(time.Second).String(),
				Stats:        srv.Stats(),
				Disk:         &disk,
			}
		}, log)
		if err != nil {
			srv.Close()
			node.Close()
			eng.Close()
			return fmt.Errorf("--admin-listen: %w", err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(
			collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler, collectors.MetricsGC)),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			srv.Collector(),
		)
		admin.Mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		setupProfiling(c, admin.Mux, nodeID, srv, eng, log)
		if faults != nil {
			admin.Mux.Handle("/debug/ringlog/faults", faultHandler(faults, log))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdown := func(runErr error) error {
		log.Info("shutting down")
		// Controlled shutdown: leaderships move to in-sync replicas while
		// this broker still serves their fetches, so clients see a leader
		// change instead of a session timeout.
		if d := c.Duration("controlled-shutdown-timeout"); d > 0 && ready.Load() && len(ccfg.Voters) > 1 && node.Controller() >= 0 {
			sctx, cancel := context.WithTimeout(context.Background(), d)
			t0 := time.Now()
			if err := node.ControlledShutdown(sctx); err != nil {
				log.Warn("controlled shutdown failed; closing anyway", "err", err)
			} else {
				log.Info("controlled shutdown: leaderships moved", "took", time.Since(t0).Round(time.Millisecond))
			}
			cancel()
		}
		// Answer what the connections have in flight before closing them:
		// clients then see a leader change or a refused dial, both of
		// which they retry, instead of a connection cut under a request.
		dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		srv.Drain(dctx, drainQuiet)
		cancel()
		if admin != nil {
			admin.Close()
		}
		srv.Close()
		node.Close()
		if err := eng.Close(); err != nil {
			return errors.Join(runErr, fmt.Errorf("closing storage: %w", err))
		}
		if runErr == nil {
			log.Info("clean shutdown complete")
		}
		return runErr
	}

	// The Kafka listeners accept only once this broker has joined: its
	// image is then caught up, so reconciling the engine with it cannot
	// delete logs of topics it merely has not seen yet.
	log.Info("joining the cluster", "node_id", nodeID, "voters", c.String("controller-voters"))
	if err := node.WaitReady(ctx); err != nil {
		if ctx.Err() != nil {
			return shutdown(nil)
		}
		return shutdown(fmt.Errorf("joining the cluster: %w", err))
	}
	if freshRaft && len(ccfg.Voters) == 0 {
		if err := adoptLegacyTopics(ctx, node, eng, nodeID, log); err != nil {
			return shutdown(err)
		}
	}
	if err := srv.Start(node); err != nil {
		return shutdown(fmt.Errorf("reconciling local logs with cluster metadata: %w", err))
	}
	ready.Store(true)
	log.Info("ringlog broker ready", "node_id", nodeID, "cluster_id", node.MetadataImage().ClusterID(),
		"controller", node.Controller(), "kafka", addr.String())
	<-ctx.Done()
	return shutdown(nil)
}

// controllerConfig builds the coordinator's config from the flags.
func controllerConfig(c *cli.Context, dataDir string, nodeID int32, meta brokerMeta, log *slog.Logger) (coordinator.Config, error) {
	cfg := coordinator.DefaultConfig()
	cfg.NodeID = nodeID
	cfg.DataDir = dataDir
	cfg.ClusterID = meta.clusterID
	cfg.ClusterIDStore = func(id string) error {
		return writeMeta(dataDir, brokerMeta{nodeID: nodeID, clusterID: id})
	}
	cfg.Rack = c.String("rack")
	cfg.BrokerSessionTimeout = c.Duration("broker-session-timeout")
	cfg.MaxStaleness = cfg.BrokerSessionTimeout
	cfg.UncleanLeaderElection = c.Bool("unclean-leader-election")
	cfg.LeaderRebalanceInterval = c.Duration("leader-rebalance-interval")
	cfg.LeaderImbalancePercent = c.Int("leader-imbalance-percent")
	cfg.Logger = log
	voters, err := coordinator.ParseVoters(c.String("controller-voters"))
	if err != nil {
		return cfg, fmt.Errorf("--controller-voters: %w", err)
	}
	cfg.Voters = voters
	cfg.ControllerListen = c.String("controller-listen")
	if cfg.ControllerListen == "" {
		for _, v := range voters {
			if v.ID == nodeID {
				cfg.ControllerListen = v.Addr
			}
		}
	}
	if len(voters) > 0 && cfg.ControllerListen == "" {
		return cfg, fmt.Errorf("node %d is not among --controller-voters: --controller-listen is required", nodeID)
	}
	if len(voters) == 0 && cfg.ControllerListen != "" {
		return cfg, errors.New("--controller-listen needs --controller-voters")
	}
	return cfg, cfg.Validate()
}

// adoptLegacyTopics registers, with their ids, topics that a pre-controller
// ringlog created in this data dir, so the first reconcile keeps them. Only
// a single-node quorum on its first start with raft does this: there the
// engine's topics.json was the source of truth until now.
func adoptLegacyTopics(ctx context.Context, node *coordinator.Node, eng *engine.Engine, nodeID int32, log *slog.Logger) error {
	img := node.MetadataImage()
	for _, t := range eng.Topics() {
		if _, ok := img.Topic(t.Name); ok {
			continue
		}
		assign := make([][]int32, t.Partitions)
		for i := range assign {
			assign[i] = []int32{nodeID}
		}
		_, err := node.CreateTopic(ctx, coordinator.CreateTopicRequest{
			Name: t.Name, ID: metadata.UUID(t.ID), Assignment: assign, Configs: t.Config.Overrides(),
		})
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
			return fmt.Errorf("adopting topic %s into the metadata log: %w", t.Name, err)
		}
		log.Info("adopted topic from a pre-controller data dir", "topic", t.Name, "partitions", t.Partitions)
	}
	return nil
}

// serverTLSConfig loads the listener's certificate and, with a client CA,
// requires and verifies client certificates (mutual TLS).
func serverTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key are required")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading --tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificates found", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
