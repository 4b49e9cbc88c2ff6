package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/coordinator/internal/idletick"
	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Manager is the group coordinator of one node: every classic group whose
// __consumer_offsets partition this node has loaded, each behind its own
// lock so groups never wait on each other.
//
// Lock order: a group's mu, then Manager.mu. Code holding Manager.mu never
// takes a group lock (lookups copy the pointer and release first), so the
// two never deadlock.
type Manager struct {
	cfg        Config
	persist    Persister
	txnPersist TxnPersister // nil when persist does not implement it
	clock      Clock

	mu     sync.Mutex
	groups map[string]*group
	// busy carries a token when a group appears, so Run, asleep while
	// there is none, starts ticking.
	busy       idletick.Wake
	parts      map[int32]bool // owned partitions: false while loading
	nextExpiry time.Time
	// txnGroups indexes the groups with open transactional offsets by
	// producer id, so a marker visits only the groups it ends. An entry
	// may outlive its transaction (the group died or was replaced);
	// CompleteTxn checks under the group's lock and drops stale entries.
	txnGroups map[int64]map[string]struct{}
	// loadMarkers holds the markers CompleteTxn got for a partition that
	// is still loading; FinishLoad applies them to what it loaded.
	loadMarkers map[int32][]marker

	// Consumer (KIP-848) groups: the topic view (SetTopics), and the
	// assignors and record encoders, which tests may replace.
	topics      atomic.Pointer[topicsBox]
	assignorFor func(name string) (Assignor, bool)
	crec        consumerRecords

	// shareGone is told of share members that left (SetShareMemberGone).
	shareGone atomic.Pointer[func(group, member string)]
}

type marker struct {
	producerID int64
	commit     bool
}

// NewManager returns a Manager that owns no partition yet: call FinishLoad
// (after BeginLoad and Load) for each partition this node leads.
func NewManager(cfg Config, p Persister, clock Clock) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("group: NewManager needs a Persister")
	}
	if clock == nil {
		clock = SystemClock{}
	}
	tp, _ := p.(TxnPersister)
	return &Manager{
		cfg:         cfg,
		persist:     p,
		txnPersist:  tp,
		clock:       clock,
		groups:      make(map[string]*group),
		busy:        idletick.NewWake(),
		parts:       make(map[int32]bool),
		txnGroups:   make(map[int64]map[string]struct{}),
		loadMarkers: make(map[int32][]marker),
		assignorFor: NewAssignor,
		crec:        realConsumerRecords,
	}, nil
}

// Partition returns the __consumer_offsets partition of groupID.
func (m *Manager) Partition(groupID string) int32 {
	return statelog.PartitionFor(groupID, m.cfg.OffsetsTopicPartitions)
}

// BeginLoad marks partition p as owned but loading: its groups' requests get
// ErrCoordinatorLoadInProgress until FinishLoad.
func (m *Manager) BeginLoad(p int32) {
	m.mu.Lock()
	m.parts[p] = false
	m.mu.Unlock()
}

// FinishLoad installs the groups of partition p (snap may be nil for an
// empty partition) and starts answering for them. Members of loaded groups
// get a full session from now to heartbeat, as after a coordinator move.
// Markers that CompleteTxn received during the load are applied first.
func (m *Manager) FinishLoad(p int32, snap *Snapshot) {
	now := m.clock.Now()
	loaded := make(map[string]*group)
	if snap != nil {
		for id, lg := range snap.Groups {
			if m.Partition(id) != p {
				continue // not ours: a record in the wrong partition cannot be routed to
			}
			loaded[id] = m.restore(id, p, lg, now)
		}
	}
	m.mu.Lock()
	// The markers are applied and the partition published under one lock
	// hold: a producer whose marker was buffered may start its next
	// transaction as soon as the partition answers, and that transaction
	// must not be ended by the old marker. The groups are not published
	// yet, so their locks are not needed.
	for _, mk := range m.loadMarkers[p] {
		for _, g := range loaded {
			g.endTxn(mk.producerID, mk.commit)
		}
	}
	delete(m.loadMarkers, p)
	if len(loaded) > 0 {
		m.busy.Notify()
	}
	for id, g := range loaded {
		m.groups[id] = g
		for pid := range g.txns {
			m.indexTxnLocked(pid, id)
		}
	}
	m.parts[p] = true
	m.mu.Unlock()
}

// Unload gives up partition p (leadership moved): its groups are dropped and
// every waiting Join/Sync is answered ErrNotCoordinator so clients
// rediscover the coordinator.
func (m *Manager) Unload(p int32) {
	m.mu.Lock()
	delete(m.parts, p)
	delete(m.loadMarkers, p)
	var drop []*group
	for id, g := range m.groups {
		if g.part == p {
			drop = append(drop, g)
			delete(m.groups, id)
		}
	}
	for pid, ids := range m.txnGroups {
		for id := range ids {
			if m.groups[id] == nil {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(m.txnGroups, pid)
		}
	}
	m.mu.Unlock()
	for _, g := range drop {
		g.mu.Lock()
		g.kill(ErrNotCoordinator)
		g.mu.Unlock()
	}
}

// route checks that this node answers for groupID now. Manager.mu held.
func (m *Manager) route(groupID string) (int32, error) {
	p := m.Partition(groupID)
	loaded, owned := m.parts[p]
	if !owned {
		return p, ErrNotCoordinator
	}
	if !loaded {
		return p, ErrCoordinatorLoadInProgress
	}
	return p, nil
}

// lockGroup returns groupID's group locked, creating it (Empty) when create
// is set. It returns (nil, nil) when the group does not exist and create is
// false. A group found Dead (deleted or unloaded between lookup and lock) is
// looked up again, so callers never act on a dead group.
func (m *Manager) lockGroup(groupID string, create bool) (*group, error) {
	for {
		m.mu.Lock()
		p, err := m.route(groupID)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		g := m.groups[groupID]
		if g == nil {
			if !create {
				m.mu.Unlock()
				return nil, nil
			}
			g = newGroup(m, groupID, p, m.clock.Now())
			m.groups[groupID] = g
			m.busy.Notify()
		}
		m.mu.Unlock()
		g.mu.Lock()
		if g.state != Dead {
			return g, nil
		}
		g.mu.Unlock()
	}
}

// forget removes a dead group from the map. Called with g.mu held, which
// the lock order allows.
func (m *Manager) forget(g *group) {
	m.mu.Lock()
	if m.groups[g.id] == g {
		delete(m.groups, g.id)
	}
	m.mu.Unlock()
}

func (m *Manager) snapshotGroups() []*group {
	m.mu.Lock()
	defer m.mu.Unlock()
	gs := make([]*group, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	return gs
}

// Tick fires every deadline that is due at now: initial-rebalance delays
// and rebalance timeouts (members that did not rejoin are removed), sync
// timeouts, session timeouts, KIP-394 pending member ids, and, every
// OffsetsRetentionCheckInterval, offsets expiry. Nothing expires between
// ticks, so tests decide exactly when time passes; production calls it
// from Run.
func (m *Manager) Tick(now time.Time) {
	m.mu.Lock()
	expire := !now.Before(m.nextExpiry)
	if expire {
		m.nextExpiry = now.Add(m.cfg.OffsetsRetentionCheckInterval)
	}
	m.mu.Unlock()
	for _, g := range m.snapshotGroups() {
		g.mu.Lock()
		if g.state != Dead {
			g.tick(now)
			if expire && g.share == nil { // share groups hold no offsets here
				g.expireOffsets(now)
			}
		}
		g.mu.Unlock()
	}
}

// Run calls Tick every interval with the Manager's clock until ctx ends.
// Session timeouts are seconds, so an interval of 100-500ms is plenty; the
// cost per tick is one lock per group. With no group there is no deadline
// to fire, and Run sleeps until one appears: an idle broker's timer
// wake-ups cost it CPU (BENCHMARKS.md section 31).
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	idletick.Run(ctx, interval, m.hasGroups, m.busy, runAsleep, func(time.Time) { m.Tick(m.clock.Now()) })
}

// runAsleep, when set (tests only), is called when Run goes to sleep for
// want of a group.
var runAsleep func()

func (m *Manager) hasGroups() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.groups) > 0
}

// Describe answers DescribeGroups.
func (m *Manager) Describe(groupIDs []string) []GroupDescription {
	out := make([]GroupDescription, 0, len(groupIDs))
	for _, id := range groupIDs {
		d := GroupDescription{Group: id, State: Dead.String()}
		if id == "" {
			d.Err = ErrInvalidGroupID
			out = append(out, d)
			continue
		}
		g, err := m.lockGroup(id, false)
		if err != nil {
			d.Err = err
		} else if g != nil {
			d = g.describe()
			g.mu.Unlock()
		}
		out = append(out, d)
	}
	return out
}

// List answers ListGroups: every group of every loaded partition, sorted by
// id, optionally filtered by state names (v4+, case-insensitive as in
// Kafka). The error is ErrCoordinatorLoadInProgress when some owned
// partition is still loading; the listing then holds the loaded ones.
func (m *Manager) List(states []string) ([]GroupListing, error) {
	var err error
	m.mu.Lock()
	for _, loaded := range m.parts {
		if !loaded {
			err = ErrCoordinatorLoadInProgress
		}
	}
	m.mu.Unlock()
	var out []GroupListing
	for _, g := range m.snapshotGroups() {
		g.mu.Lock()
		l := GroupListing{Group: g.id, ProtocolType: g.protocolType, State: g.state.String(), GroupType: GroupTypeClassic}
		if g.consumer != nil {
			l.State, l.GroupType = string(g.consumer.state()), GroupTypeConsumer
		}
		if g.share != nil {
			l.State, l.GroupType = g.share.state(), GroupTypeShare
		}
		dead := g.state == Dead
		g.mu.Unlock()
		if dead {
			continue
		}
		if len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, l.State) }) {
			continue
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b GroupListing) int { return strings.Compare(a.Group, b.Group) })
	return out, err
}

// DeleteGroups answers DeleteGroups: only Empty groups go (ErrNonEmptyGroup
// otherwise). A deleted group's offsets and metadata get tombstones; the
// future resolves once they are durable.
func (m *Manager) DeleteGroups(groupIDs []string) *Future[[]DeleteGroupResult] {
	res := make([]DeleteGroupResult, len(groupIDs))
	waits := make([]statelog.Waiter, len(groupIDs))
	for i, id := range groupIDs {
		res[i].Group = id
		if id == "" {
			res[i].Err = ErrInvalidGroupID
			continue
		}
		g, err := m.lockGroup(id, false)
		switch {
		case err != nil:
			res[i].Err = err
		case g == nil:
			res[i].Err = ErrGroupIDNotFound
		default:
			if g.state != Empty || g.share != nil && len(g.share.members) > 0 {
				res[i].Err = ErrNonEmptyGroup
			} else {
				if g.share != nil {
					res[i].ShareTopics = g.share.initializedIDs()
				}
				waits[i] = g.delete()
			}
			g.mu.Unlock()
		}
	}
	f := newFuture[[]DeleteGroupResult]()
	go func() {
		for i, w := range waits {
			if w != nil {
				res[i].Err = appendErr(w.Wait())
			}
		}
		f.Resolve(res)
	}()
	return f
}

// appendErr maps a Persister failure to what the client should see: a lost
// partition is NOT_COORDINATOR, anything else COORDINATOR_NOT_AVAILABLE
// (the client retries after rediscovery), as Kafka maps append errors.
func appendErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotCoordinator) {
		return err
	}
	return fmt.Errorf("%w: appending to %s: %w", ErrCoordinatorNotAvailable, OffsetsTopic, err)
}

// newMemberID follows Kafka's shape, "<client.id or group.instance.id>-<uuid>",
// so ids in tools and logs look familiar.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
