// Package netpath is ringlog's Kafka wire server: listeners, framing and
// request headers, connection and memory limits, SASL authentication and
// ACL checks, one handler per API (files named NN_api.go by API key),
// response ordering per connection, and the fetch path that sends segment
// bytes straight from files to sockets.
//
// It builds none of the broker's subsystems: the broker package hands it
// the engine, the metadata node, replication, the group and transaction
// coordinators and the producer-id allocator through the narrow
// interfaces of deps.go. Handlers translate requests into calls on those
// (offsets, epochs, raw batch bytes) and map the errors they return to
// Kafka codes in errors.go, the one place that happens.
//
// Only this package, its sub-packages (peer: the inter-broker client) and
// client-side tools speak kmsg.
package netpath

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/internal/sockio"
)

// Config configures the wire server.
type Config struct {
	// NodeID is this broker's id in Metadata responses.
	NodeID int32
	// AdvertisedAddr is host:port clients of the plaintext listener are
	// told to connect to; empty means the listener's address.
	AdvertisedAddr string
	// TLSAdvertisedAddr is the same for the TLS listener. Each listener
	// advertises its own address so a client that bootstrapped over TLS
	// is never redirected to the plaintext port.
	TLSAdvertisedAddr string
	// TLSHandshakeTimeout bounds the handshake of a new TLS connection.
	TLSHandshakeTimeout time.Duration
	// MaxRequestBytes bounds one request frame (socket.request.max.bytes);
	// the length prefix is checked before the body is read.
	MaxRequestBytes int32
	// MaxInflightPerConn bounds requests read ahead on one connection
	// while earlier responses are pending.
	MaxInflightPerConn int
	// AutoCreateTopics creates unknown topics on Metadata and Produce.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics requests that ask for -1.
	DefaultPartitions int32
	// DefaultReplicationFactor is the replication factor of auto-created
	// topics and of CreateTopics requests that ask for -1
	// (default.replication.factor, 1).
	DefaultReplicationFactor int16
	// AdminTimeout bounds a controller write (create/delete topics) when
	// the request carries no usable timeout.
	AdminTimeout time.Duration
	// FetchCopy forces the user-space copy fetch path on plaintext
	// listeners (for comparison benchmarks).
	FetchCopy bool
	// FetchCopyBelow: on a zero-copy listener, a response carrying fewer
	// record bytes than this is copied into one write instead (records
	// read with RWF_NOWAIT; a range not in the page cache still goes by
	// sendfile). Zero copy costs a cork, a header writev, a sendfile and
	// an uncork per response where the copy costs a pread and a write,
	// and for a follower's or consumer's fetch at the log end, a few KiB,
	// the calls cost more than the copy (BENCHMARKS.md §29). 0: always
	// zero copy. At most copyBufSize.
	FetchCopyBelow int
	// IdleTimeout closes connections with no request for this long; 0
	// disables (connections.max.idle.ms).
	IdleTimeout time.Duration
	// RequestReadTimeout bounds how long a request body may take to
	// arrive once its length prefix is in: a client trickling bytes
	// cannot hold a connection and its buffer forever. 0 disables.
	RequestReadTimeout time.Duration
	// MaxConnections and MaxConnectionsPerIP cap open connections
	// (max.connections, max.connections.per.ip); over the cap a new
	// connection is closed at once. 0 means no cap.
	MaxConnections      int
	MaxConnectionsPerIP int
	// QueuedMaxRequestBytes bounds the memory of large request frames
	// (over 64 KiB) being read or waiting for their response, across all
	// connections (queued.max.request.bytes); a reader blocks until there
	// is room, which pushes back on the client through TCP.
	QueuedMaxRequestBytes int64
	// FetchSessionSlots bounds the incremental fetch sessions (KIP-227)
	// kept (max.incremental.fetch.session.cache.slots); 0 disables
	// sessions: every fetch is then a full one.
	FetchSessionSlots int
	// FetchSessionEvictionAge protects a session used within it from
	// being evicted by a weaker one
	// (min.incremental.fetch.session.eviction.ms).
	FetchSessionEvictionAge time.Duration
	// QuotaWindow is how client quota rates are measured (quotas.go).
	QuotaWindow QuotaWindow
	// Security configures SASL and ACLs (auth.go).
	Security SecurityConfig
	// RemoteStorage says the broker has an object store configured
	// (tiered storage): without one, CreateTopics and AlterConfigs refuse
	// remote.storage.enable=true (configs.go).
	RemoteStorage bool
	Logger        *slog.Logger
}

// DefaultConfig returns the broker's defaults.
func DefaultConfig() Config {
	return Config{
		NodeID:             1,
		MaxRequestBytes:    100 << 20,
		MaxInflightPerConn: 32,
		AutoCreateTopics:   true,
		DefaultPartitions:  1,
		IdleTimeout:        10 * time.Minute,

		RequestReadTimeout:    30 * time.Second,
		MaxConnections:        10000,
		MaxConnectionsPerIP:   1000,
		QueuedMaxRequestBytes: 512 << 20,

		FetchCopyBelow:          64 << 10,
		FetchSessionSlots:       1000,
		FetchSessionEvictionAge: 2 * time.Minute,
		QuotaWindow:             DefaultQuotaWindow(),

		DefaultReplicationFactor: 1,
		AdminTimeout:             30 * time.Second,

		TLSHandshakeTimeout: 10 * time.Second,

		Security: DefaultSecurityConfig(),
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("node id %d must be >= 0", c.NodeID)
	}
	if c.MaxRequestBytes < 1024 {
		return fmt.Errorf("max request bytes %d must be at least 1024", c.MaxRequestBytes)
	}
	if c.MaxInflightPerConn < 1 {
		return fmt.Errorf("max in-flight per connection %d must be >= 1", c.MaxInflightPerConn)
	}
	if c.DefaultPartitions < 1 {
		return fmt.Errorf("default partitions %d must be >= 1", c.DefaultPartitions)
	}
	if c.AdvertisedAddr != "" {
		if _, _, err := splitHostPort(c.AdvertisedAddr); err != nil {
			return fmt.Errorf("advertised addr %q: %w", c.AdvertisedAddr, err)
		}
	}
	if c.TLSAdvertisedAddr != "" {
		if _, _, err := splitHostPort(c.TLSAdvertisedAddr); err != nil {
			return fmt.Errorf("tls advertised addr %q: %w", c.TLSAdvertisedAddr, err)
		}
	}
	if c.DefaultReplicationFactor < 1 {
		return fmt.Errorf("default replication factor %d must be >= 1", c.DefaultReplicationFactor)
	}
	if c.AdminTimeout <= 0 {
		return fmt.Errorf("admin timeout %v must be > 0", c.AdminTimeout)
	}
	if c.TLSHandshakeTimeout <= 0 {
		return fmt.Errorf("tls handshake timeout %v must be > 0", c.TLSHandshakeTimeout)
	}
	if c.QueuedMaxRequestBytes < int64(c.MaxRequestBytes) {
		return fmt.Errorf("queued max request bytes %d must be at least the max request size %d", c.QueuedMaxRequestBytes, c.MaxRequestBytes)
	}
	if c.FetchCopyBelow < 0 || c.FetchCopyBelow > copyBufSize {
		return fmt.Errorf("fetch copy below %d must be between 0 and %d bytes", c.FetchCopyBelow, copyBufSize)
	}
	if c.FetchSessionSlots < 0 || c.FetchSessionEvictionAge < 0 {
		return fmt.Errorf("fetch session slots %d and eviction age %v must not be negative", c.FetchSessionSlots, c.FetchSessionEvictionAge)
	}
	if c.MaxConnections < 0 || c.MaxConnectionsPerIP < 0 || c.RequestReadTimeout < 0 {
		return fmt.Errorf("connection limits and the request read timeout must not be negative")
	}
	if err := c.QuotaWindow.Validate(); err != nil {
		return err
	}
	return c.Security.Validate()
}

// Stats are counters about the wire server.
type Stats struct {
	Connections    int64  `json:"connections"`
	Requests       uint64 `json:"requests"`
	ZeroCopyBytes  uint64 `json:"zero_copy_bytes"` // fetch bytes sent with sendfile or splice
	SplicedBytes   uint64 `json:"spliced_bytes"`   // the part of ZeroCopyBytes sent with splice
	CopiedBytes    uint64 `json:"copied_bytes"`    // fetch bytes read into user space then written
	BytesIn        uint64 `json:"bytes_in"`
	BytesOut       uint64 `json:"bytes_out"`
	RejectedFrames uint64 `json:"rejected_frames"`
	// NotLeader counts partitions answered NOT_LEADER_OR_FOLLOWER
	// (produce, fetch, list offsets on a replica this broker does not
	// lead, or while its metadata is stale).
	NotLeader uint64 `json:"not_leader"`
	// TLSHandshakeErrors counts TLS connections dropped during the
	// handshake (no or untrusted client certificate, timeouts).
	TLSHandshakeErrors uint64 `json:"tls_handshake_errors"`
}

// Server serves the Kafka protocol on one or more listeners.
type Server struct {
	cfg    Config
	log    *slog.Logger
	engine Storage
	// node is the cluster metadata (set by Start): topics, leaders and
	// brokers come from its image; admin writes go through it.
	node Metadata
	// cluster reconciles the engine with the image (Deps).
	cluster Cluster
	// groups, txns and pids are the coordinators and the producer-id
	// allocator (Deps).
	groups Groups
	txns   Transactions
	pids   ProducerIDs
	// remote reads the remote tier (Deps.Remote); nil without an object
	// store.
	remote RemoteTier
	// shares is the leader side of share groups (Deps.Shares).
	shares Shares
	// state is the owner side of __share_group_state (Deps.ShareState).
	state ShareState
	// noRemoteWarned is when the last "no object store" warning was
	// logged (unix ns), to log it once a minute at most.
	noRemoteWarned atomic.Int64
	// repl is partition replication (set by Start); nil when off. The
	// metrics collector reads it under mu.
	repl Replicas
	// metrics holds the request-path instruments behind /metrics
	// (request_metrics.go); its zero value is ready.
	metrics serverMetrics

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	started bool // Start ran: listeners accept
	// drainQuiet is non-zero once Drain has begun: connections accepted
	// from then on drain too.
	drainQuiet time.Duration
	listeners  []*listener
	conns      map[*conn]struct{}
	perIP      map[string]int // open connections per client address
	wg         sync.WaitGroup
	// budget bounds the bytes of large request frames in flight.
	budget *byteBudget
	// sessions are the incremental fetch sessions (fetch_sessions.go).
	sessions *fetchSessions
	// quotas are the client quota sensors (quotas.go).
	quotas quotaManager

	stats struct {
		connections        atomic.Int64
		requests           atomic.Uint64
		rejectedFrames     atomic.Uint64
		notLeader          atomic.Uint64
		tlsHandshakeErrors atomic.Uint64
		// authFailures, unauthenticated and authzDenied count failed
		// SASL exchanges, requests refused before authentication and
		// ACL denials.
		authFailures, unauthenticated, authzDenied atomic.Uint64
		// rejectedConns counts connections closed at accept by the caps.
		rejectedConns atomic.Uint64
		// apiRequests counts requests per API key (registered keys
		// only: unknown keys close the connection before counting).
		apiRequests [maxAPIKey + 1]atomic.Uint64
	}
}

// maxAPIKey bounds the per-API request counters; register refuses keys
// above it.
const maxAPIKey = 127

// listener is one accepting socket and the fetch path it uses.
type listener struct {
	ln         net.Listener
	name       string // "plaintext" or "tls"
	fetchPath  string // "sendfile" or "copy"
	copyBelow  int64  // Config.FetchCopyBelow, on a "sendfile" listener
	advertised string // host:port for Metadata; "" = ln.Addr()
	tls        *tls.Config

	// Counters per listener, for /metrics; the Server's totals are kept
	// separately for /healthz.
	connections   atomic.Int64
	bytesIn       atomic.Uint64
	bytesOut      atomic.Uint64
	zeroCopyBytes atomic.Uint64 // sendfile and splice
	splicedBytes  atomic.Uint64 // splice only
	copiedBytes   atomic.Uint64
}

// New creates a server over its collaborators.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		engine: deps.Engine,

		cluster: deps.Cluster,
		groups:  deps.Groups,
		txns:    deps.Transactions,
		pids:    deps.ProducerIDs,
		remote:  deps.Remote,
		shares:  deps.Shares,
		state:   deps.ShareState,

		ctx:    ctx,
		cancel: cancel,
		conns:  make(map[*conn]struct{}),
		perIP:  make(map[string]int),
		budget: newByteBudget(cfg.QueuedMaxRequestBytes),

		sessions: newFetchSessions(cfg.FetchSessionSlots, cfg.FetchSessionEvictionAge),
		quotas:   quotaManager{window: cfg.QuotaWindow},
	}
	if s.shares == nil {
		m, err := share.NewManager(share.DefaultConfig(), nil)
		if err != nil {
			cancel()
			return nil, err
		}
		s.shares = m
	}
	return s, nil
}

// Listen binds a plaintext listener; it accepts once Start has run. It
// returns the bound address (useful with port 0).
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	path := "sendfile"
	if s.cfg.FetchCopy {
		path = "copy"
	}
	s.serve(&listener{ln: ln, name: "plaintext", fetchPath: path, copyBelow: int64(s.cfg.FetchCopyBelow), advertised: s.cfg.AdvertisedAddr})
	return ln.Addr(), nil
}

// ListenTLS binds a TLS listener; it accepts once Start has run. Its fetch path is
// always "copy": crypto/tls encrypts in user space, so record bytes must be
// read into memory (pread into pooled buffers) before tls.Conn writes them.
// Mutual TLS is whatever cfg says (ClientAuth, ClientCAs).
func (s *Server) ListenTLS(addr string, cfg *tls.Config) (net.Addr, error) {
	if cfg == nil || (len(cfg.Certificates) == 0 && cfg.GetCertificate == nil) {
		return nil, errors.New("tls listener needs a certificate")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// The raw TCP listener is kept and each connection wrapped after
	// accept, so the handshake runs on the connection's goroutine with a
	// deadline instead of inside Accept.
	s.serve(&listener{ln: ln, name: "tls", fetchPath: "copy", advertised: s.cfg.TLSAdvertisedAddr, tls: cfg})
	return ln.Addr(), nil
}

func (s *Server) serve(l *listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, l)
	if s.started {
		s.accept(l)
	}
}

// accept starts l's accept loop. s.mu must be held.
func (s *Server) accept(l *listener) {
	s.log.Info("kafka listener started", "listener", l.name, "addr", l.ln.Addr().String(), "fetch_path", l.fetchPath)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptLoop(l)
	}()
}

// Start attaches the cluster metadata and replication (nil: off), which
// exist only once the broker has joined the cluster, and starts accepting
// on every listener bound so far.
func (s *Server) Start(node Metadata, repl Replicas) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Set under mu for the metrics collector; handlers run on connection
	// goroutines started below, after these writes.
	s.node, s.repl = node, repl
	s.started = true
	for _, l := range s.listeners {
		s.accept(l)
	}
	return nil
}

// FetchPaths reports the fetch path per listener, for /healthz and logs.
func (s *Server) FetchPaths() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.listeners))
	for _, l := range s.listeners {
		out[l.name] = l.fetchPath
	}
	return out
}

func (s *Server) acceptLoop(l *listener) {
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary errors such as EMFILE: back off instead of spinning.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff < time.Second {
				backoff *= 2
			}
			s.log.Warn("accept failed", "listener", l.name, "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		releaseSlot, err := s.admit(nc.RemoteAddr())
		if err != nil {
			s.log.Debug("connection refused", "listener", l.name, "remote", nc.RemoteAddr().String(), "reason", err)
			nc.Close()
			continue
		}
		// Raw socket I/O (internal/sockio) under TLS as well: the TLS
		// layer reads and writes through it.
		nc = sockio.Wrap(nc)
		if l.tls != nil {
			nc = tls.Server(nc, l.tls)
		}
		c := newConn(s, l, nc)
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			nc.Close()
			releaseSlot()
			return
		}
		s.conns[c] = struct{}{}
		if s.drainQuiet > 0 {
			c.drain(s.drainQuiet)
		}
		s.mu.Unlock()
		s.stats.connections.Add(1)
		l.connections.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.run()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			releaseSlot()
			s.stats.connections.Add(-1)
			l.connections.Add(-1)
		}()
	}
}

// Drain prepares a graceful exit: it stops accepting, then lets every
// open connection finish what it has started. Requests already read are
// answered, and each connection closes once no new request has arrived on
// it for quiet. Drain returns when every connection has closed or ctx ends;
// Close then ends whatever is left.
//
// Closing a connection under a request instead, or before its first
// response, makes some clients give up rather than retry: franz-go, for
// one, treats an EOF on a connection's first read as a misconfiguration
// (missing SASL) and fails the records.
func (s *Server) Drain(ctx context.Context, quiet time.Duration) {
	if quiet <= 0 {
		quiet = time.Millisecond
	}
	s.mu.Lock()
	s.drainQuiet = quiet
	for _, l := range s.listeners {
		l.ln.Close()
	}
	for c := range s.conns {
		c.drain(quiet)
	}
	s.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		if open == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	for _, l := range s.listeners {
		l.ln.Close()
	}
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Stats returns a snapshot of the server counters. Byte counters are kept
// per listener only (one atomic add per send on the fetch path) and summed
// here.
func (s *Server) Stats() Stats {
	st := Stats{
		Connections:    s.stats.connections.Load(),
		Requests:       s.stats.requests.Load(),
		RejectedFrames: s.stats.rejectedFrames.Load(),
		NotLeader:      s.stats.notLeader.Load(),

		TLSHandshakeErrors: s.stats.tlsHandshakeErrors.Load(),
	}
	s.mu.Lock()
	for _, l := range s.listeners {
		st.ZeroCopyBytes += l.zeroCopyBytes.Load()
		st.SplicedBytes += l.splicedBytes.Load()
		st.CopiedBytes += l.copiedBytes.Load()
		st.BytesIn += l.bytesIn.Load()
		st.BytesOut += l.bytesOut.Load()
	}
	s.mu.Unlock()
	return st
}

// advertised returns the host and port clients should use for this broker,
// for the listener l.
func (s *Server) advertised(l *listener) (string, int32) {
	addr := l.advertised
	if addr == "" {
		addr = l.ln.Addr().String()
	}
	host, port, err := splitHostPort(addr)
	if err != nil {
		return "127.0.0.1", 9092
	}
	return host, port
}

func splitHostPort(addr string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", portStr)
	}
	return host, int32(port), nil
}
