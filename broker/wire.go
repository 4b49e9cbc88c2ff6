package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath"
	"github.com/ringlog/ringlog/netpath/peer"
	"github.com/ringlog/ringlog/replication"
)

// WireConfig is the part of broker.Config the Kafka server and its
// collaborators use.
type WireConfig struct {
	// Wire configures framing, listeners, limits and authentication: what
	// stays in netpath. Wire.NodeID is this broker's id.
	Wire netpath.Config
	// Groups configures the consumer group coordinator (groups.go).
	Groups group.Config
	// Shares configures the partition-leader side of share groups
	// (shares.go).
	Shares share.Config
	// Transactions configures the transaction coordinator (txn.go). Its
	// OffsetsTopicPartitions is taken from Groups by newWireServer.
	Transactions txn.Config
	// OffsetsReplicationFactor is the replication factor of
	// __consumer_offsets when it is created; <= 0 means min(3, live
	// brokers) (offsets.topic.replication.factor).
	OffsetsReplicationFactor int16
	// OffsetsTopicSegmentBytes is segment.bytes of __consumer_offsets
	// when it is created (offsets.topic.segment.bytes, 100 MiB): only
	// sealed segments are compacted.
	OffsetsTopicSegmentBytes int64
	// TransactionStateReplicationFactor is the replication factor of
	// __transaction_state when it is created; <= 0 means min(3, live
	// brokers) (transaction.state.log.replication.factor).
	TransactionStateReplicationFactor int16
	// TransactionStateSegmentBytes is segment.bytes of
	// __transaction_state when it is created
	// (transaction.state.log.segment.bytes, 100 MiB).
	TransactionStateSegmentBytes int64
}

// DefaultWireConfig returns the defaults of the wire server and its
// coordinators.
func DefaultWireConfig() WireConfig {
	return WireConfig{
		Wire:                         netpath.DefaultConfig(),
		Groups:                       group.DefaultConfig(),
		Shares:                       share.DefaultConfig(),
		Transactions:                 txn.DefaultConfig(),
		OffsetsTopicSegmentBytes:     100 << 20,
		TransactionStateSegmentBytes: 100 << 20,
	}
}

// Validate checks the configuration.
func (c WireConfig) Validate() error {
	if err := c.Wire.Validate(); err != nil {
		return err
	}
	// segment.bytes' range (engine.ParseTopicConfig).
	if c.OffsetsTopicSegmentBytes < 14 || c.OffsetsTopicSegmentBytes > math.MaxInt32 {
		return fmt.Errorf("offsets topic segment bytes %d must be in [14, %d]", c.OffsetsTopicSegmentBytes, math.MaxInt32)
	}
	if c.TransactionStateSegmentBytes < 14 || c.TransactionStateSegmentBytes > math.MaxInt32 {
		return fmt.Errorf("transaction state segment bytes %d must be in [14, %d]", c.TransactionStateSegmentBytes, math.MaxInt32)
	}
	if err := c.Groups.Validate(); err != nil {
		return err
	}
	if err := c.Shares.Validate(); err != nil {
		return err
	}
	return c.Transactions.Validate()
}

// wireServer is the Kafka server with everything behind it on this
// broker: it builds the group and transaction coordinators, the producer
// id allocator, the replica manager and the inter-broker client, keeps
// the engine reconciled with the metadata image, and hands them to the
// netpath server through its narrow interfaces.
type wireServer struct {
	cfg    WireConfig
	nodeID int32
	log    *slog.Logger
	engine *engine.Engine
	srv    *netpath.Server
	// node is the cluster metadata (set by Start).
	node *controller.Node
	// peers is the one client to other brokers (follower fetches,
	// transaction markers).
	peers *peer.Client
	// recMu serializes reconcile (engine <- image).
	recMu sync.Mutex
	// groups is the consumer group coordinator and its offsets topic.
	groups *groupBridge
	// shares is the leader side of share groups (shares.go).
	shares *share.Manager
	// shareState is __share_group_state and the Manager's Persister.
	shareState *shareStateBridge
	// txns is the transaction coordinator, its __transaction_state topic
	// and the transaction marker writer.
	txns *txnBridge
	// pids hands out producer ids from controller-allocated blocks.
	pids *producerIDs
	// repl drives partition replication (replicas.go); nil until
	// EnableReplication.
	repl *replicaManager
	// isr counts committed ISR changes (replication_metrics.go).
	isr isrCounters
	// remoteReconcile, when set (tiered storage, tiered.go), is handed
	// each image reconcile applied; guarded by recMu.
	remoteReconcile func(*metadata.Image)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newWireServer creates the wire server and its collaborators over an
// open engine; remote is the remote tier's reader (nil without tiered
// storage).
func newWireServer(cfg WireConfig, eng *engine.Engine, remote netpath.RemoteTier) (*wireServer, error) {
	// AddOffsetsToTxn must name the partition the group coordinator uses.
	cfg.Transactions.OffsetsTopicPartitions = cfg.Groups.OffsetsTopicPartitions
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Wire.Logger == nil {
		cfg.Wire.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &wireServer{
		cfg:    cfg,
		nodeID: cfg.Wire.NodeID,
		log:    cfg.Wire.Logger,
		engine: eng,
		ctx:    ctx,
		cancel: cancel,
	}
	sec := cfg.Wire.Security
	s.peers = peer.New(peer.Config{
		Image: func() *metadata.Image { return s.node.MetadataImage() },
		// Authenticate as the inter-broker user when the plaintext
		// listener requires SASL.
		SASL: slices.Contains(sec.SASLListeners, "plaintext") && sec.InterBrokerUser != "",
		User: sec.InterBrokerUser, Password: sec.InterBrokerPassword,
	})
	context.AfterFunc(ctx, s.peers.Close)
	var err error
	s.pids = newProducerIDs(s)
	if s.groups, err = newGroupBridge(s); err != nil {
		cancel()
		return nil, err
	}
	if s.txns, err = newTxnBridge(s); err != nil {
		cancel()
		return nil, err
	}
	if s.shares, err = newShares(s); err != nil {
		cancel()
		return nil, err
	}
	s.srv, err = netpath.New(cfg.Wire, netpath.Deps{
		Engine:       eng,
		Cluster:      s,
		Groups:       s.groups,
		Transactions: s.txns,
		ProducerIDs:  s.pids,
		Remote:       remote,
		Shares:       s.shares,
		ShareState:   s.shareState.store,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// Listen binds a plaintext listener; it accepts once Start has run.
func (s *wireServer) Listen(addr string) (net.Addr, error) { return s.srv.Listen(addr) }

// ListenTLS binds a TLS listener; it accepts once Start has run.
func (s *wireServer) ListenTLS(addr string, cfg *tls.Config) (net.Addr, error) {
	return s.srv.ListenTLS(addr, cfg)
}

// Endpoints returns the advertised endpoint of every bound listener.
func (s *wireServer) Endpoints() []metadata.Endpoint { return s.srv.Endpoints() }

// FetchPaths reports the fetch path per listener.
func (s *wireServer) FetchPaths() map[string]string { return s.srv.FetchPaths() }

// Stats returns the wire server's counters.
func (s *wireServer) Stats() netpath.Stats { return s.srv.Stats() }

// Start attaches the cluster metadata node, brings the engine in line
// with its image (call it once node.WaitReady has returned, so the image
// is caught up), keeps reconciling on every metadata change, starts the
// coordinators and then accepts on every listener bound so far.
func (s *wireServer) Start(node *controller.Node) error {
	s.node = node
	if err := s.reconcile(); err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.reconcileLoop()
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchOffline()
	}()
	s.groups.start()
	s.txns.start()
	s.startShares()
	var repl netpath.Replicas
	if s.repl != nil {
		repl = s.repl
	}
	return s.srv.Start(node, repl)
}

// Drain stops accepting and lets open connections finish (netpath.Server.Drain).
func (s *wireServer) Drain(ctx context.Context, quiet time.Duration) { s.srv.Drain(ctx, quiet) }

// Close closes the connections, stops the coordinators, replication and
// reconciliation, and waits for their goroutines.
func (s *wireServer) Close() error {
	s.cancel()
	err := s.srv.Close()
	s.wg.Wait()
	return err
}

// Collector returns the metrics of the wire server and of what runs
// behind it (storage, replication, share groups).
func (s *wireServer) Collector() prometheus.Collector {
	return collectorSet{s.srv.Collector(),
		seriesCollector{storageDescs, s.collectStorage},
		seriesCollector{replicationDescs, s.collectReplication},
		seriesCollector{throttleDescs, s.collectThrottle},
		seriesCollector{shareDescs, (&shareMetrics{s: s}).collect}}
}

// seriesCollector is a fixed set of series computed at scrape time.
type seriesCollector struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c seriesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c seriesCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// collectorSet is several collectors as one.
type collectorSet []prometheus.Collector

func (cs collectorSet) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectorSet) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// adminContext bounds a controller write by AdminTimeout.
func (s *wireServer) adminContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.cfg.Wire.AdminTimeout)
}

var _ replication.FetchClient = (*peer.Client)(nil)
