package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/cpusched"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/procstat"
	"github.com/ringlog/ringlog/netpath"
)

// Broker is one running ringlog broker.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	started time.Time
	// freshRaft: the data dir had no raft state when New ran (see
	// adoptLegacyTopics).
	freshRaft bool

	// What New opened, in order; Close releases them.
	eng     *engine.Engine
	srv     *wireServer
	addr    net.Addr
	tlsAddr net.Addr
	node    *controller.Node
	admin   *AdminServer
	// tier is tiered storage; nil when no object store is configured.
	tier *tieredStack

	ready     atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// New builds a broker from cfg: it opens the engine, builds the Kafka
// server with replication, binds the Kafka listeners, starts the
// controller node and the admin listener. The broker does not serve
// Kafka requests before Start. On error everything opened so far is
// closed again.
func New(cfg Config) (_ *Broker, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.resolved()
	b := &Broker{cfg: cfg, log: cfg.Logger, started: time.Now()}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := cfg.bindMeta(); err != nil {
		return nil, err
	}
	// A data dir without raft state but with topics was written by a
	// ringlog that predates the controller: Start adopts its topics.
	_, statErr := os.Stat(filepath.Join(cfg.DataDir, layout.RaftDir))
	b.freshRaft = errors.Is(statErr, os.ErrNotExist)

	// Reconcile hands the engine the dynamic broker configs once the
	// metadata image is caught up; retention waits for them.
	cfg.Engine.AwaitDynamicDefaults = true
	if b.eng, err = engine.Open(cfg.Engine); err != nil {
		// errors.Is(err, engine.ErrIOUringUnusable) tells the caller
		// that io mode uring was asked for on a host without it.
		return nil, fmt.Errorf("opening storage: %w", err)
	}
	b.log.Info("storage opened", "data_dir", cfg.DataDir, "io_path", b.eng.IOPath(), "fsync", cfg.Engine.Fsync.String(), "topics", len(b.eng.Topics()), "max_procs", runtime.GOMAXPROCS(0))

	var remoteTier netpath.RemoteTier // an untyped nil when off
	if cfg.Tiered.Enabled() {
		if b.tier, err = openTiered(cfg.Tiered, b.log); err != nil {
			return nil, err
		}
		remoteTier = b.tier.fetch
		cfg.Replication.RemoteRestart = b.tier.restartPoint
	}
	if b.srv, err = newWireServer(cfg.WireConfig, b.eng, remoteTier); err != nil {
		return nil, err
	}
	if err := b.srv.EnableReplication(cfg.Replication); err != nil {
		return nil, fmt.Errorf("replication: %w", err)
	}
	if b.addr, err = b.srv.Listen(cfg.Listen); err != nil {
		return nil, fmt.Errorf("kafka listener %s: %w", cfg.Listen, err)
	}
	if cfg.TLS.Listen != "" {
		tcfg, err := cfg.TLS.serverConfig()
		if err != nil {
			return nil, err
		}
		if b.tlsAddr, err = b.srv.ListenTLS(cfg.TLS.Listen, tcfg); err != nil {
			return nil, fmt.Errorf("tls listener %s: %w", cfg.TLS.Listen, err)
		}
	}

	ccfg := cfg.Controller
	ccfg.Endpoints = b.srv.Endpoints()
	if b.node, err = controller.New(ccfg); err != nil {
		return nil, err
	}
	startCtx, cancel := context.WithTimeout(context.Background(), cfg.ControllerStartTimeout)
	err = b.node.Start(startCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("starting the controller node: %w", err)
	}
	if b.tier != nil {
		b.tier.attach(b.node, b.eng, cfg.NodeID)
	}

	if cfg.AdminListen != "" {
		if b.admin, err = StartAdmin(cfg.AdminListen, b.health, b.log); err != nil {
			return nil, fmt.Errorf("admin listener %s: %w", cfg.AdminListen, err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(
			collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler, collectors.MetricsGC)),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			b.srv.Collector(),
			processCollector{},
		)
		if b.tier != nil {
			reg.MustRegister(b.tier.collector(b.eng))
		}
		b.admin.Mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		b.admin.Mux.HandleFunc("/v1/remote/segments", b.serveRemoteSegments)
		b.admin.Mux.HandleFunc(procstat.CountersPath, serveProcessCounters)
		if cfg.AdminHandlers != nil {
			cfg.AdminHandlers(b.admin.Mux, b)
		}
	}
	return b, nil
}

// Start waits until this broker has joined the cluster, adopts the topics
// of a pre-controller data dir, and starts serving. The Kafka listeners
// answer requests only from then on: the metadata image is caught up, so
// reconciling the engine with it cannot delete logs of topics it merely
// has not seen yet. ctx bounds the wait; when it is cancelled Start
// returns ctx.Err().
func (b *Broker) Start(ctx context.Context) error {
	b.log.Info("joining the cluster", "node_id", b.cfg.NodeID, "voters", b.cfg.Controller.Voters)
	if err := b.node.WaitReady(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("joining the cluster: %w", err)
	}
	if b.freshRaft && len(b.cfg.Controller.Voters) == 0 {
		if err := adoptLegacyTopics(ctx, b.node, b.eng, b.cfg.NodeID, b.log); err != nil {
			return err
		}
	}
	if err := b.createBootstrapUsers(ctx); err != nil {
		return err
	}
	if err := b.srv.Start(b.node); err != nil {
		return fmt.Errorf("reconciling local logs with cluster metadata: %w", err)
	}
	if b.tier != nil {
		// After the first reconcile: the engine holds the partitions the
		// manager sets the remote state of.
		b.tier.start()
		b.srv.setRemoteReconcile(b.tier.mgr.Reconcile)
	}
	b.ready.Store(true)
	b.log.Info("ringlog broker ready", "node_id", b.cfg.NodeID, "cluster_id", b.ClusterID(),
		"controller", b.node.Controller(), "kafka", b.addr.String())
	return nil
}

// Drain prepares a clean stop; Close follows it. With a multi-voter
// quorum it first asks the controller to move this broker's leaderships
// to in-sync replicas (controlled shutdown) while this broker still
// serves their fetches, so clients see a leader change instead of a
// session timeout. Then it stops accepting and answers what the
// connections have in flight before they close: clients see a leader
// change or a refused dial, both of which they retry, instead of a
// connection cut under a request. ctx bounds both steps on top of their
// own timeouts.
func (b *Broker) Drain(ctx context.Context) {
	if d := b.cfg.ControlledShutdownTimeout; d > 0 && b.ready.Load() && len(b.cfg.Controller.Voters) > 1 && b.node.Controller() >= 0 {
		sctx, cancel := context.WithTimeout(ctx, d)
		t0 := time.Now()
		if err := b.node.ControlledShutdown(sctx); err != nil {
			b.log.Warn("controlled shutdown failed; closing anyway", "err", err)
		} else {
			b.log.Info("controlled shutdown: leaderships moved", "took", time.Since(t0).Round(time.Millisecond))
		}
		cancel()
	}
	dctx, cancel := context.WithTimeout(ctx, b.cfg.DrainTimeout)
	b.srv.Drain(dctx, b.cfg.DrainQuiet)
	cancel()
}

// Close stops everything New opened: the admin listener, the Kafka
// server (it calls into the controller node until it stops, so it goes
// first), tiered storage (the uploads commit through the node and read
// the engine; the chunk cache after the fetches that use it), the
// controller node and, last, the engine, which flushes and writes its
// checkpoints. Only the engine's error is returned: it alone
// can mean data was not made durable. Calling Close again returns the
// first call's result.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.ready.Store(false)
		if b.admin != nil {
			b.admin.Close()
		}
		if b.srv != nil {
			b.srv.Close()
		}
		if b.tier != nil {
			b.tier.close()
		}
		if b.node != nil {
			b.node.Close()
		}
		if b.eng != nil {
			if err := b.eng.Close(); err != nil {
				b.closeErr = fmt.Errorf("closing storage: %w", err)
			}
		}
	})
	return b.closeErr
}

// Addr is the plaintext Kafka listener's bound address.
func (b *Broker) Addr() net.Addr { return b.addr }

// TLSAddr is the TLS Kafka listener's bound address, nil without one.
func (b *Broker) TLSAddr() net.Addr { return b.tlsAddr }

// AdminAddr is the admin listener's bound address, nil without one.
func (b *Broker) AdminAddr() net.Addr {
	if b.admin == nil {
		return nil
	}
	return b.admin.Addr()
}

// ClusterID is the cluster's id as this broker's metadata image has it
// (empty before it has joined).
func (b *Broker) ClusterID() string { return b.node.MetadataImage().ClusterID() }

// Ready reports whether Start has completed and Close has not begun.
func (b *Broker) Ready() bool { return b.ready.Load() }

// Engine is the broker's storage engine, for admin endpoints.
func (b *Broker) Engine() *engine.Engine { return b.eng }

// Stats are the Kafka server's counters.
func (b *Broker) Stats() netpath.Stats { return b.srv.Stats() }

// health is the /healthz document, built per request.
func (b *Broker) health() Health {
	status := "starting"
	if b.ready.Load() {
		status = "ok"
	}
	members, _ := b.node.Members()
	disk := b.eng.DiskStatus()
	return Health{
		Status:       status,
		NodeID:       b.cfg.NodeID,
		ClusterID:    b.ClusterID(),
		ControllerID: b.node.Controller(),
		BrokerState:  b.node.BrokerState(),
		Controllers:  members,
		Version:      b.cfg.Version,
		Commit:       b.cfg.Commit,
		IOPath:       b.eng.IOPath(),
		IOReason:     b.eng.IOReason(),
		Fsync:        b.cfg.Engine.Fsync.String(),
		FetchPath:    b.srv.FetchPaths(),
		PID:          os.Getpid(),
		MaxProcs:     runtime.GOMAXPROCS(0),
		NumCPU:       runtime.NumCPU(),
		SchedPolicy:  cpusched.Current(),
		Uptime:       time.Since(b.started).Round(time.Second).String(),
		Stats:        b.srv.Stats(),
		Disk:         &disk,
	}
}

// adoptLegacyTopics registers, with their ids, topics that a pre-controller
// ringlog created in this data dir, so the first reconcile keeps them. Only
// a single-node quorum on its first start with raft does this: there the
// engine's topics.json was the source of truth until now.
func adoptLegacyTopics(ctx context.Context, node *controller.Node, eng *engine.Engine, nodeID int32, log *slog.Logger) error {
	img := node.MetadataImage()
	for _, t := range eng.Topics() {
		if _, ok := img.Topic(t.Name); ok {
			continue
		}
		assign := make([][]int32, t.Partitions)
		for i := range assign {
			assign[i] = []int32{nodeID}
		}
		_, err := node.CreateTopic(ctx, controller.CreateTopicRequest{
			Name: t.Name, ID: metadata.UUID(t.ID), Assignment: assign, Configs: t.Config.Overrides(),
		})
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
			return fmt.Errorf("adopting topic %s into the metadata log: %w", t.Name, err)
		}
		log.Info("adopted topic from a pre-controller data dir", "topic", t.Name, "partitions", t.Partitions)
	}
	return nil
}

// serverConfig loads the listener's certificate and, with a client CA,
// requires and verifies client certificates (mutual TLS).
func (c TLSConfig) serverConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s: %w", c.CertFile, c.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificates found", c.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
