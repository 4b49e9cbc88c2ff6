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
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run a broker",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9092", Usage: "Kafka listener host:port", EnvVars: env("listen")},
			&cli.StringFlag{Name: "advertised-addr", Usage: "host:port clients are told to use (default: the listener address)", EnvVars: env("advertised-addr")},
			&cli.StringFlag{Name: "tls-listen", Usage: "TLS Kafka listener host:port; empty disables (fetch copies through user space there)", EnvVars: env("tls-listen")},
			&cli.StringFlag{Name: "tls-advertised-addr", Usage: "host:port clients of the TLS listener are told to use (default: its address)", EnvVars: env("tls-advertised-addr")},
			&cli.StringFlag{Name: "tls-cert", Usage: "PEM server certificate (chain) for --tls-listen", EnvVars: env("tls-cert")},
			&cli.StringFlag{Name: "tls-key", Usage: "PEM private key for --tls-cert", EnvVars: env("tls-key")},
			&cli.StringFlag{Name: "tls-client-ca", Usage: "PEM CA bundle; when set, clients of --tls-listen must present a certificate it signed (mutual TLS)", EnvVars: env("tls-client-ca")},
			&cli.StringFlag{Name: "data-dir", Value: "./data", Usage: "directory for segments and metadata", EnvVars: env("data-dir")},
			&cli.IntFlag{Name: "node-id", Value: 1, Usage: "this broker's node id", EnvVars: env("node-id")},
			&cli.StringFlag{Name: "admin-listen", Value: "127.0.0.1:9644", Usage: "HTTP admin listener (/healthz); empty disables", EnvVars: env("admin-listen")},
			&cli.StringFlag{Name: "fsync", Value: "always", Usage: "when to flush: always (ack after fdatasync, group commit) | interval | never", EnvVars: env("fsync")},
			&cli.DurationFlag{Name: "fsync-interval", Value: time.Second, Usage: "flush period with --fsync interval", EnvVars: env("fsync-interval")},
			&cli.StringFlag{Name: "io", Value: "auto", Usage: "write path: auto | uring | sync", EnvVars: env("io")},
			&cli.BoolFlag{Name: "auto-create-topics", Value: true, Usage: "create unknown topics on metadata and produce requests", EnvVars: env("auto-create-topics")},
			&cli.IntFlag{Name: "default-partitions", Value: 1, Usage: "partitions of auto-created topics", EnvVars: env("default-partitions")},
			&cli.Int64Flag{Name: "segment-bytes", Value: 1 << 30, Usage: "default segment.bytes", EnvVars: env("segment-bytes")},
			&cli.DurationFlag{Name: "retention", Value: 7 * 24 * time.Hour, Usage: "default retention.ms as a duration", EnvVars: env("retention")},
			&cli.Int64Flag{Name: "retention-bytes", Value: -1, Usage: "default retention.bytes per partition (-1: unlimited)", EnvVars: env("retention-bytes")},
			&cli.DurationFlag{Name: "retention-check-interval", Value: 5 * time.Minute, Usage: "how often retention runs", EnvVars: env("retention-check-interval")},
			&cli.IntFlag{Name: "max-request-bytes", Value: 100 << 20, Usage: "socket.request.max.bytes: largest request frame", EnvVars: env("max-request-bytes")},
			&cli.BoolFlag{Name: "fetch-copy", Usage: "send fetch data through user space instead of sendfile (for comparison)", EnvVars: env("fetch-copy")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug | info | warn | error", EnvVars: env("log-level")},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text | json", EnvVars: env("log-format")},
		},
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

	ecfg := engine.DefaultConfig()
	ecfg.Dir = dataDir
	ecfg.Logger = log
	if ecfg.Fsync, err = engine.ParseFsyncPolicy(c.String("fsync")); err != nil {
		return fmt.Errorf("--fsync: %w", err)
	}
	ecfg.FsyncInterval = c.Duration("fsync-interval")
	ecfg.IOMode = c.String("io")
	ecfg.RetentionCheckInterval = c.Duration("retention-check-interval")
	ecfg.Defaults.SegmentBytes = c.Int64("segment-bytes")
	ecfg.Defaults.RetentionMs = c.Duration("retention").Milliseconds()
	ecfg.Defaults.RetentionBytes = c.Int64("retention-bytes")
	if err := ecfg.Validate(); err != nil {
		return err
	}
	eng, err := engine.Open(ecfg)
	if err != nil {
		return fmt.Errorf("opening storage: %w", err)
	}
	log.Info("storage opened", "data_dir", dataDir, "io_path", eng.IOPath(), "fsync", c.String("fsync"), "topics", len(eng.Topics()))

	ncfg := netpath.DefaultConfig()
	ncfg.NodeID = nodeID
	ncfg.ClusterID = meta.clusterID
	ncfg.AdvertisedAddr = c.String("advertised-addr")
	ncfg.TLSAdvertisedAddr = c.String("tls-advertised-addr")
	ncfg.AutoCreateTopics = c.Bool("auto-create-topics")
	ncfg.DefaultPartitions = int32(c.Int("default-partitions"))
	ncfg.MaxRequestBytes = int32(c.Int("max-request-bytes"))
	ncfg.FetchCopy = c.Bool("fetch-copy")
	ncfg.Logger = log
	srv, err := netpath.New(ncfg, eng)
	if err != nil {
		eng.Close()
		return err
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

	var admin *netpath.AdminServer
	if a := c.String("admin-listen"); a != "" {
		admin, err = netpath.StartAdmin(a, func() netpath.Health {
			return netpath.Health{
				Status:    "ok",
				NodeID:    nodeID,
				ClusterID: meta.clusterID,
				Version:   fmt.Sprintf("%s (%s)", version, commit),
				IOPath:    eng.IOPath(),
				Fsync:     c.String("fsync"),
				FetchPath: srv.FetchPaths(),
				PID:       os.Getpid(),
				Uptime:    time.Since(started).Round(time.Second).String(),
				Stats:     srv.Stats(),
			}
		}, log)
		if err != nil {
			srv.Close()
			eng.Close()
			return fmt.Errorf("--admin-listen: %w", err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			srv.Collector(),
		)
		admin.Mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	log.Info("ringlog broker ready", "node_id", nodeID, "cluster_id", meta.clusterID, "kafka", addr.String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	log.Info("shutting down")
	if admin != nil {
		admin.Close()
	}
	srv.Close()
	if err := eng.Close(); err != nil {
		return fmt.Errorf("closing storage: %w", err)
	}
	log.Info("clean shutdown complete")
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
