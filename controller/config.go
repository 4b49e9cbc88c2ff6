package controller

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
)

// Voter is one member of the static controller quorum.
type Voter struct {
	ID   int32
	Addr string // host:port of its controller listener (raft + RPC)
}

// ParseVoters parses the --controller-voters flag: "1@h:p,2@h:p,3@h:p".
func ParseVoters(s string) ([]Voter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Voter
	for _, part := range strings.Split(s, ",") {
		idStr, addr, ok := strings.Cut(strings.TrimSpace(part), "@")
		if !ok {
			return nil, fmt.Errorf("controller: voter %q: want id@host:port", part)
		}
		id, err := strconv.ParseInt(idStr, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller: voter %q: bad node id", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller: voter %q: %v", part, err)
		}
		out = append(out, Voter{ID: int32(id), Addr: addr})
	}
	return out, nil
}

// Config configures a Node. Defaults come from DefaultConfig.
type Config struct {
	// NodeID is this node's broker id, and its raft server id.
	NodeID int32
	// DataDir holds the raft log (raft/raft.db), snapshots and, unless
	// ClusterIDStore is set, meta.properties with the cluster id.
	DataDir string
	// ControllerListen is where raft and the controller RPC listen, and the
	// address peers dial, so it must be reachable by them. Empty together
	// with Voters: single-node mode, raft runs in memory-transport only
	// and no port is opened.
	ControllerListen string
	// Voters is the static controller quorum. A node among them is voter
	// and broker; any other node follows the log as a raft non-voter.
	// Empty: this node alone is the quorum.
	Voters []Voter
	// ClusterID, when set, is the id the first leader fixes at bootstrap,
	// and the id this node insists on when joining. Empty: a new cluster
	// draws one, and a new node adopts the cluster's (then remembers it in
	// DataDir/meta.properties, written durably by package layout).
	ClusterID string
	// ClusterIDStore, when set, replaces the node's own reading and
	// writing of DataDir/meta.properties: the caller passes the id it has
	// on disk as ClusterID, and the store is called once this node learns
	// the cluster's id at its first registration. Either way a data dir
	// has one cluster id file, meta.properties (layout.OpenMeta/WriteMeta).
	ClusterIDStore func(id string) error
	// Endpoints and Rack are registered for this broker.
	Endpoints []metadata.Endpoint
	Rack      string
	// BrokerSessionTimeout: the active controller fences a broker whose
	// heartbeats stop for this long (9s).
	BrokerSessionTimeout time.Duration
	// HeartbeatInterval between a broker's heartbeats (1s).
	HeartbeatInterval time.Duration
	// MaxStaleness bounds how long a non-leader may go without hearing
	// from the raft leader before Fresh fails (BrokerSessionTimeout).
	MaxStaleness time.Duration
	// UncleanLeaderElection is the cluster default of
	// unclean.leader.election.enable (false), which a topic's own config
	// overrides. When on, the active controller elects any live replica
	// of a partition whose ISR has no live member, accepting the loss of
	// what only the ISR held (see electUnclean).
	UncleanLeaderElection bool
	// LeaderRebalanceInterval is how often the active controller moves
	// leaderships back to preferred replicas (Kafka's
	// auto.leader.rebalance.enable with
	// leader.imbalance.check.interval.seconds; 5m). Zero disables it: then
	// leaders return only through ElectLeaders.
	LeaderRebalanceInterval time.Duration
	// LeaderImbalancePercent is leader.imbalance.per.broker.percentage
	// (10): a broker's partitions go back to it only when more than this
	// share of those it is preferred leader of are led by another broker.
	LeaderImbalancePercent int
	// ApplyTimeout bounds one proposal on the leader (5s).
	ApplyTimeout time.Duration
	// ElectionTimeout is how long a controller voter goes without hearing
	// from the active controller before it stands for election (raft's
	// HeartbeatTimeout and ElectionTimeout; raft randomizes each wait
	// between this and twice this), and how soon the active controller
	// steps down once out of touch with a quorum (raft's
	// LeaderLeaseTimeout, half of it). 500ms: a controller cut off from
	// the quorum is replaced within about 1.5 s, and the brokers it
	// leaves fenced a session after that. raft's own 1s default added up
	// to 1.5 s more to every failover of the controller.
	ElectionTimeout time.Duration
	// Logger receives raft's and the controller's logs (slog.Default()).
	Logger *slog.Logger

	// Test hooks: an in-process network instead of TCP, and a listener
	// opened by the test.
	net      *memNet
	listener net.Listener
	raftTune func(*raft.Config)
}

// DefaultConfig returns the defaults named on Config's fields.
func DefaultConfig() Config {
	return Config{
		BrokerSessionTimeout:    9 * time.Second,
		HeartbeatInterval:       time.Second,
		ApplyTimeout:            5 * time.Second,
		ElectionTimeout:         500 * time.Millisecond,
		LeaderRebalanceInterval: 5 * time.Minute,
		LeaderImbalancePercent:  10,
	}
}

// withDefaults fills zero durations and the logger.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BrokerSessionTimeout == 0 {
		c.BrokerSessionTimeout = d.BrokerSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = d.HeartbeatInterval
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = d.ApplyTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = d.ElectionTimeout
	}
	if c.MaxStaleness == 0 {
		c.MaxStaleness = c.BrokerSessionTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks fields alone and against each other.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.NodeID < 0 {
		return fmt.Errorf("controller: node id %d < 0", c.NodeID)
	}
	if c.DataDir == "" && c.net == nil {
		return fmt.Errorf("controller: data dir is required")
	}
	if len(c.Voters) > 0 && c.ControllerListen == "" && c.listener == nil && c.net == nil {
		return fmt.Errorf("controller: controller voters %v need a controller listen address", c.Voters)
	}
	seen := map[int32]bool{}
	for _, v := range c.Voters {
		if seen[v.ID] {
			return fmt.Errorf("controller: voter %d listed twice", v.ID)
		}
		seen[v.ID] = true
	}
	if c.HeartbeatInterval <= 0 || c.BrokerSessionTimeout < 2*c.HeartbeatInterval {
		return fmt.Errorf("controller: broker session timeout %v must be at least twice the heartbeat interval %v",
			c.BrokerSessionTimeout, c.HeartbeatInterval)
	}
	if c.MaxStaleness < c.HeartbeatInterval {
		return fmt.Errorf("controller: max staleness %v is below the heartbeat interval %v", c.MaxStaleness, c.HeartbeatInterval)
	}
	if c.ApplyTimeout <= 0 {
		return fmt.Errorf("controller: apply timeout %v must be positive", c.ApplyTimeout)
	}
	// raft itself refuses a LeaderLeaseTimeout under 5ms.
	if c.ElectionTimeout < 10*time.Millisecond {
		return fmt.Errorf("controller: controller election timeout %v is below 10ms", c.ElectionTimeout)
	}
	if c.LeaderRebalanceInterval < 0 {
		return fmt.Errorf("controller: leader rebalance interval %v is negative (0 disables it)", c.LeaderRebalanceInterval)
	}
	if c.LeaderImbalancePercent < 0 || c.LeaderImbalancePercent > 100 {
		return fmt.Errorf("controller: leader imbalance percent %d is outside 0..100", c.LeaderImbalancePercent)
	}
	return nil
}

// isVoter reports whether id is in the voter set; with no voters configured
// the node itself is the only voter.
func (c Config) isVoter(id int32) bool {
	if len(c.Voters) == 0 {
		return id == c.NodeID
	}
	for _, v := range c.Voters {
		if v.ID == id {
			return true
		}
	}
	return false
}
