package controller

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/layout"
	"github.com/ringlog/ringlog/internal/vfs"
)

// Errors of the controller node; the metadata package's errors (wrapped
// with %w) come through too. netpath maps them with errors.Is.
var (
	// ErrNotController: this node is not the active controller and does not
	// know who is (NOT_CONTROLLER). Node's methods follow redirects
	// themselves, so callers see it only when no leader emerges in time.
	ErrNotController = errors.New("not the active controller")
	// ErrStale: this node may be serving stale metadata (see Fresh).
	ErrStale = errors.New("metadata may be stale")
	// ErrClosed: the node is closed.
	ErrClosed = errors.New("controller node closed")
	// ErrInvalidRequest: a malformed controller RPC.
	ErrInvalidRequest = errors.New("invalid controller request")
	// ErrNoSpace: the controller could not append to its metadata log for
	// lack of disk space (KAFKA_STORAGE_ERROR; docs/disk-full.md).
	ErrNoSpace = errors.New("controller metadata log: no space left on device")
)

// File names under Config.DataDir are in package layout.
const (
	snapshotsRetain  = 2
	localRaftAddress = "local" // single-node mode's in-memory raft address
)

// idleCommitTimeout is raft's CommitTimeout (see start).
const idleCommitTimeout = 250 * time.Millisecond

// Node is one ringlog node's part of the cluster metadata: a raft voter
// (controller) or non-voter, plus the broker-side registration and
// heartbeats. All methods are safe for concurrent use.
type Node struct {
	cfg         Config
	log         *slog.Logger
	fsm         *metadata.FSM
	raft        *raft.Raft
	trans       raft.Transport
	advertise   string // this node's raft/RPC address as peers dial it
	net         *memNet
	mux         *mux
	bolt        *raftboltdb.BoltStore
	client      *rpcClient
	incarnation metadata.UUID
	notifyCh    chan bool
	raftReady   chan struct{} // closed once raft is set

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	clusterID string    // as known locally; "" until learned
	epoch     uint64    // broker epoch; 0 until registered
	lastHB    time.Time // send time of the last acknowledged heartbeat
	hbFenced  bool      // that heartbeat's answer: still fenced
	lag       applyLag  // how far behind the controller's log the image is
	fatal     error
	ready     chan struct{} // closed once registered and unfenced
	failed    chan struct{} // closed when fatal is set
	conns     map[net.Conn]struct{}
	closed    bool

	// Active-controller state, reset on every leadership change.
	lmu      sync.Mutex
	lastSeen map[int32]time.Time // last heartbeat per broker
	catchUp  map[int32]uint64    // index a fenced broker must reach
	// shutdown holds the broker epoch that asked for a controlled
	// shutdown: a heartbeat of that epoch still in flight must not unfence
	// the broker again (a new process registers with a new epoch).
	shutdown map[int32]uint64
	// rebalancing is set while a preferred-leader rebalance runs, so a
	// slow one is skipped rather than stacked.
	rebalancing atomic.Bool
	// shutDown is set once this broker's own controlled shutdown has
	// been applied here: the fence it then carries is the one it asked
	// for, so its image is not stale for being fenced (Fresh).
	shutDown atomic.Bool

	pauseHeartbeats atomic.Bool // test hook: simulate a hung broker
}

// New validates cfg and returns an unstarted Node.
func New(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:         cfg,
		log:         cfg.Logger.With("component", "controller", "node", cfg.NodeID),
		fsm:         metadata.NewFSM(),
		incarnation: metadata.NewUUID(),
		notifyCh:    make(chan bool, 16),
		raftReady:   make(chan struct{}),
		ready:       make(chan struct{}),
		failed:      make(chan struct{}),
		conns:       map[net.Conn]struct{}{},
		clusterID:   cfg.ClusterID,
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n, nil
}

// Start opens the raft stores and the controller listener, bootstraps the
// quorum on a voter's first start, and starts registering this broker in
// the background (WaitReady waits for that). ctx bounds Start only.
func (n *Node) Start(ctx context.Context) error {
	if err := n.start(ctx); err != nil {
		n.Close()
		return err
	}
	return nil
}

func (n *Node) start(_ context.Context) error {
	cfg := n.cfg
	if err := n.loadClusterID(); err != nil {
		return err
	}
	dial := tcpDial
	switch {
	case cfg.net != nil:
		n.net = cfg.net
		n.advertise = cfg.ControllerListen
		if n.advertise == "" {
			n.advertise = fmt.Sprintf("node-%d", cfg.NodeID)
		}
	case cfg.ControllerListen == "" && cfg.listener == nil && len(cfg.Voters) == 0:
		n.net = newMemNet()
		n.advertise = localRaftAddress
	}
	if n.net != nil {
		n.trans = n.net.join(n.advertise, n)
		dial = n.net.dial
	} else {
		ln := cfg.listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", cfg.ControllerListen); err != nil {
				return fmt.Errorf("controller: listen %s: %w", cfg.ControllerListen, err)
			}
		}
		n.advertise = ln.Addr().String()
		for _, v := range cfg.Voters {
			if v.ID == cfg.NodeID {
				n.advertise = v.Addr
			}
		}
		if len(cfg.Voters) == 0 && cfg.ControllerListen != "" {
			if h, p, _ := net.SplitHostPort(cfg.ControllerListen); h != "" && p != "0" {
				n.advertise = cfg.ControllerListen
			}
		}
		n.mux = newMux(ln, n.serveRPC)
		n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  &streamLayer{m: n.mux, advertise: tcpAddr(n.advertise)},
			MaxPool: 3,
			Timeout: 10 * time.Second,
			Logger:  newHCLog(cfg.Logger),
		})
	}
	n.client = &rpcClient{n: n, dial: dial, idle: make(chan idleConn, 4)}

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.DataDir == "" {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		dir := filepath.Join(cfg.DataDir, layout.RaftDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, layout.RaftDBFile))
		if err != nil {
			return fmt.Errorf("controller: open raft log: %w", err)
		}
		n.bolt = bolt
		fss, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetain, newHCLog(cfg.Logger))
		if err != nil {
			return fmt.Errorf("controller: open snapshots: %w", err)
		}
		logs, stable, snaps = bolt, bolt, fss
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.Logger = newHCLog(cfg.Logger)
	rc.NotifyCh = n.notifyCh
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = cfg.ElectionTimeout, cfg.ElectionTimeout, cfg.ElectionTimeout/2
	// While idle, the leader sends every follower an empty AppendEntries
	// each CommitTimeout (up to twice that) only to carry its commit
	// index; liveness and the leader lease ride on raft's separate
	// heartbeats (HeartbeatTimeout/10). Nothing waits for that any more
	// (propose's barrier tells followers of a commit at once, and the
	// heartbeat answers count metadata entries, not trailing barrier or
	// no-op ones), so at raft's 50 ms it was half the quorum's idle RPCs
	// for nothing. It still paces catching up a follower back from a
	// restart or a cut while nothing is proposed, hence not longer.
	rc.CommitTimeout = idleCommitTimeout
	if len(cfg.Voters) <= 1 {
		// Nobody to split votes with: elect at once so single-node mode
		// starts fast.
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}
	if cfg.raftTune != nil {
		cfg.raftTune(rc)
	}
	if cfg.isVoter(cfg.NodeID) {
		has, err := raft.HasExistingState(logs, stable, snaps)
		if err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		if !has {
			// Every voter bootstraps the same static configuration;
			// hashicorp/raft documents that as safe.
			var conf raft.Configuration
			for _, v := range n.voters() {
				conf.Servers = append(conf.Servers, raft.Server{
					Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.ID))), Address: raft.ServerAddress(v.Addr),
				})
			}
			if err := raft.BootstrapCluster(rc, logs, stable, snaps, n.trans, conf); err != nil {
				return fmt.Errorf("controller: bootstrap: %w", err)
			}
		}
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, stable, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("controller: start raft: %w", err)
	}
	n.raft = r
	close(n.raftReady)
	n.wg.Add(2)
	go n.controllerLoop()
	go n.brokerLoop()
	return nil
}

// voters returns the static quorum; in single-node mode, this node.
func (n *Node) voters() []Voter {
	if len(n.cfg.Voters) == 0 {
		return []Voter{{ID: n.cfg.NodeID, Addr: n.advertise}}
	}
	return n.cfg.Voters
}

func (n *Node) voterAddrs() []string {
	var out []string
	for _, v := range n.voters() {
		out = append(out, v.Addr)
	}
	return out
}

// loadClusterID reads the id this data dir joined from meta.properties
// (layout.OpenMeta, which also adopts a cluster.id file of older
// versions), unless the caller keeps it (Config.ClusterIDStore).
func (n *Node) loadClusterID() error {
	if n.cfg.DataDir == "" || n.cfg.ClusterIDStore != nil {
		return nil
	}
	m, err := layout.OpenMeta(vfs.Default, n.cfg.DataDir, n.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if m.ClusterID == "" {
		return nil
	}
	if n.cfg.ClusterID != "" && m.ClusterID != n.cfg.ClusterID {
		return fmt.Errorf("controller: %w: data dir belongs to cluster %q, configured %q", metadata.ErrClusterIDMismatch, m.ClusterID, n.cfg.ClusterID)
	}
	n.mu.Lock()
	n.clusterID = m.ClusterID
	n.mu.Unlock()
	return nil
}

// saveClusterID remembers the cluster's id once this node learns it, in
// meta.properties (durably: a power cut right after the first start must
// not lose it) or through Config.ClusterIDStore.
func (n *Node) saveClusterID(id string) error {
	n.mu.Lock()
	known := n.clusterID
	n.clusterID = id
	n.mu.Unlock()
	if known == id {
		return nil
	}
	if n.cfg.ClusterIDStore != nil {
		return n.cfg.ClusterIDStore(id)
	}
	if n.cfg.DataDir == "" {
		return nil
	}
	return layout.WriteMeta(vfs.Default, n.cfg.DataDir, layout.Meta{NodeID: n.cfg.NodeID, ClusterID: id})
}

// Close stops the node: raft, listener, loops. It is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	conns := n.conns
	n.conns = nil
	n.mu.Unlock()

	n.cancel()
	var errs []error
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	for c := range conns {
		c.Close()
	}
	n.wg.Wait()
	if n.client != nil {
		n.client.closeIdle()
	}
	if n.net != nil {
		n.net.leave(n.advertise)
	}
	if n.mux != nil {
		n.mux.close()
	}
	if c, ok := n.trans.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	if n.bolt != nil {
		errs = append(errs, n.bolt.Close())
	}
	return errors.Join(errs...)
}

func (n *Node) trackConn(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Node) untrackConn(c net.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.conns, c)
}

func (n *Node) retryBackoff() time.Duration {
	return max(n.cfg.HeartbeatInterval/4, 10*time.Millisecond)
}

// controller returns the active controller's id and address as raft knows
// them, or (-1, "").
func (n *Node) controller() (int32, string) {
	if n.raft == nil {
		return -1, ""
	}
	addr, id := n.raft.LeaderWithID()
	v, err := strconv.ParseInt(string(id), 10, 32)
	if addr == "" || err != nil {
		return -1, ""
	}
	return int32(v), string(addr)
}

// isController reports whether this node is the active controller.
func (n *Node) isController() bool { return n.raft.State() == raft.Leader }

// propose appends cmd to the metadata log; only the active controller may.
// The index is the one the command was applied at.
func (n *Node) propose(ctx context.Context, cmd metadata.Command) (*metadata.Result, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	b, err := cmd.Encode()
	if err != nil {
		return nil, 0, err
	}
	timeout := n.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	f := n.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, 0, fmt.Errorf("%w: %v", ErrNotController, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, 0, ErrClosed
		case errors.Is(err, syscall.ENOSPC):
			return nil, 0, fmt.Errorf("%w: %v", ErrNoSpace, err)
		}
		return nil, 0, err
	}
	// Followers (voters and brokers) learn that an entry committed from
	// the leader's next AppendEntries, which carries the commit index:
	// with nothing more to send that is raft's CommitTimeout (up to twice
	// idleCommitTimeout) later, and brokers applied a topic created a
	// moment ago that late (its first acks=all produce waited for it).
	// A barrier entry is that next AppendEntries, now. Its future is not
	// waited for. Metadata changes are rare, so this costs one log entry
	// each, where a shorter CommitTimeout would send an empty
	// AppendEntries to every follower every few milliseconds while idle.
	n.raft.Barrier(timeout)
	res := f.Response().(*metadata.Result)
	return res, res.Index, res.Err
}

// newClusterID draws a Kafka-style cluster id (base64url of a UUID).
func newClusterID() string {
	u := metadata.NewUUID()
	return base64.RawURLEncoding.EncodeToString(u[:])
}
