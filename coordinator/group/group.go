package group

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// member is one classic group member. A member with a pending join or sync
// future is waiting on the group: its session does not expire meanwhile,
// because the rebalance and sync deadlines already bound that wait.
type member struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string
	session    time.Duration
	rebalance  time.Duration
	protocols  []Protocol
	assignment []byte
	order      uint64 // join order: leader choice and member listings

	join     *Future[JoinResponse]
	sync     *Future[SyncResponse]
	deadline time.Time // session expiry
}

// group is one classic group. Every field is guarded by mu ("Lock should be
// held" for every method below).
type group struct {
	m    *Manager
	id   string
	part int32

	state     State
	stateTime time.Time // when state was entered; for Empty, the retention base

	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	pending      map[string]time.Time // KIP-394 ids handed out, not yet joined -> expiry
	static       map[string]string    // group.instance.id -> member id
	nextOrder    uint64

	rebalanceDeadline time.Time // PreparingRebalance
	initialDelayEnd   time.Time // non-zero while the initial delay holds the join
	initialDelayMax   time.Time
	syncDeadline      time.Time           // CompletingRebalance
	pendingSync       map[string]struct{} // members yet to SyncGroup this generation
	syncBatch         *syncBatch

	offsets   map[TopicPartition]*offsetEntry
	seq       uint64                    // orders record-producing operations
	inflight  int                       // commits appended, not yet durable
	deletedAt map[TopicPartition]uint64 // seq of deletions racing inflight commits
	txns      map[int64]*openTxn        // transactional offsets awaiting a marker, by producer id

	consumer *cgroup // non-nil for a consumer (KIP-848) group
	share    *sgroup // non-nil for a share (KIP-932) group

	mu sync.Mutex
}

// openTxn is one producer's transactional offsets in the group. Entries
// join at TxnOffsetCommit time, before they are durable, so that
// require_stable fetches never miss them; a failed append takes them out.
type openTxn struct {
	epoch   int16
	offsets map[TopicPartition]*offsetEntry
}

// syncBatch holds the SyncGroup answers of one generation while its
// assignment record is being made durable.
type syncBatch struct {
	gen     int32
	assign  map[string][]byte
	waiters map[string]*Future[SyncResponse]
}

// offsetEntry is a committed (or pending transactional) offset. seq is
// its place in the log order of the group's records: a transactional
// offset that commits replaces the committed one only if it was written
// later.
type offsetEntry struct {
	v   OffsetValue
	seq uint64
}

func newGroup(m *Manager, id string, part int32, now time.Time) *group {
	return &group{
		m:         m,
		id:        id,
		part:      part,
		state:     Empty,
		stateTime: now,
		members:   make(map[string]*member),
		pending:   make(map[string]time.Time),
		static:    make(map[string]string),
		offsets:   make(map[TopicPartition]*offsetEntry),
		txns:      make(map[int64]*openTxn),
	}
}

// restore builds a group from its loaded records.
func (m *Manager) restore(id string, part int32, lg *LoadedGroup, now time.Time) *group {
	g := newGroup(m, id, part, time.Time{}) // simple groups: retention counts from each commit
	// Load positions become seqs, so a marker arriving later orders the
	// pending offsets against the committed ones as the log did; new
	// operations continue above them.
	for tp, v := range lg.Offsets {
		g.offsets[tp] = &offsetEntry{v: v, seq: lg.pos[tp]}
		g.seq = max(g.seq, lg.pos[tp])
	}
	for pid, lt := range lg.Pending {
		t := &openTxn{epoch: lt.ProducerEpoch, offsets: make(map[TopicPartition]*offsetEntry, len(lt.Offsets))}
		for tp, v := range lt.Offsets {
			t.offsets[tp] = &offsetEntry{v: v, seq: lt.pos[tp]}
			g.seq = max(g.seq, lt.pos[tp])
		}
		if len(t.offsets) > 0 {
			g.txns[pid] = t
		}
	}
	if lg.Consumer != nil {
		g.restoreConsumer(lg.Consumer, now)
		return g
	}
	if lg.Share != nil {
		g.restoreShare(lg.Share, now)
		return g
	}
	md := lg.Metadata
	if md == nil {
		return g
	}
	g.protocolType = md.ProtocolType
	g.generation = md.Generation
	if md.Protocol != nil {
		g.protocol = *md.Protocol
	}
	if md.Leader != nil {
		g.leader = *md.Leader
	}
	if md.CurrentStateTimestamp >= 0 {
		g.stateTime = time.UnixMilli(md.CurrentStateTimestamp)
	} else {
		g.stateTime = now
	}
	for _, mm := range md.Members {
		rt := time.Duration(mm.RebalanceTimeoutMs) * time.Millisecond
		if mm.RebalanceTimeoutMs < 0 { // v0 records had none: Kafka used the session timeout
			rt = time.Duration(mm.SessionTimeoutMs) * time.Millisecond
		}
		mem := &member{
			id:         mm.MemberID,
			instanceID: mm.InstanceID,
			clientID:   mm.ClientID,
			clientHost: mm.ClientHost,
			session:    time.Duration(mm.SessionTimeoutMs) * time.Millisecond,
			rebalance:  rt,
			protocols:  []Protocol{{Name: g.protocol, Metadata: mm.Subscription}},
			assignment: mm.Assignment,
			order:      g.nextOrder,
		}
		g.nextOrder++
		mem.deadline = now.Add(mem.session)
		g.members[mem.id] = mem
		if mem.instanceID != nil {
			g.static[*mem.instanceID] = mem.id
		}
	}
	if len(g.members) > 0 {
		// Only Stable and Empty groups are ever written; a group that was
		// mid-rebalance restarts from its last stable generation.
		g.state = Stable
	}
	return g
}

// kill ends the group: every waiter gets err.
func (g *group) kill(err error) {
	for _, mem := range g.members {
		g.answerRemoved(mem, err)
	}
	g.state = Dead
}

func (g *group) answerRemoved(mem *member, err error) {
	if mem.join != nil {
		mem.join.Resolve(JoinResponse{Err: err, Generation: -1, MemberID: mem.id})
		mem.join = nil
	}
	if mem.sync != nil {
		mem.sync.Resolve(SyncResponse{Err: err})
		mem.sync = nil
	}
}

func (g *group) removeMember(mem *member) {
	g.answerRemoved(mem, ErrUnknownMemberID)
	delete(g.members, mem.id)
	delete(g.pendingSync, mem.id)
	if mem.instanceID != nil && g.static[*mem.instanceID] == mem.id {
		delete(g.static, *mem.instanceID)
	}
	if g.leader == mem.id {
		g.leader = ""
	}
}

// membersRemoved moves the group on after members left or expired.
func (g *group) membersRemoved(now time.Time) {
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

func (g *group) checkInstance(instanceID *string, memberID string) error {
	if instanceID == nil {
		return nil
	}
	id, ok := g.static[*instanceID]
	if !ok {
		return ErrUnknownMemberID
	}
	if id != memberID {
		return ErrFencedInstanceID
	}
	return nil
}

// compatible reports whether a join's protocols fit the group: an empty
// group takes anything, otherwise the protocol type must match and some
// protocol must be supported by every other member (excluding the joiner
// itself, whose old protocols it is replacing).
func (g *group) compatible(req *JoinRequest) bool {
	others := 0
	count := make(map[string]int)
	for _, mem := range g.members {
		if mem.id == req.MemberID {
			continue
		}
		others++
		for _, p := range mem.protocols {
			count[p.Name]++
		}
	}
	if others == 0 {
		return true
	}
	if req.ProtocolType != g.protocolType {
		return false
	}
	for _, p := range req.Protocols {
		if count[p.Name] == others {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}

func failJoin(err error, memberID string) *Future[JoinResponse] {
	return resolved(JoinResponse{Err: err, Generation: -1, MemberID: memberID})
}

// Join answers JoinGroup. The future resolves when the rebalance completes
// (all members rejoined, or the rebalance timeout removed the rest), at once
// for errors and for members whose join changes nothing.
func (m *Manager) Join(req JoinRequest) *Future[JoinResponse] {
	switch {
	case req.Group == "":
		return failJoin(ErrInvalidGroupID, req.MemberID)
	case req.SessionTimeout < m.cfg.MinSessionTimeout || req.SessionTimeout > m.cfg.MaxSessionTimeout:
		return failJoin(ErrInvalidSessionTimeout, req.MemberID)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return failJoin(ErrInconsistentGroupProtocol, req.MemberID)
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	g, err := m.lockGroup(req.Group, req.MemberID == "")
	if err != nil {
		return failJoin(err, req.MemberID)
	}
	if g == nil {
		return failJoin(ErrUnknownMemberID, req.MemberID)
	}
	defer g.mu.Unlock()
	if g.share != nil {
		return failJoin(fmt.Errorf("%w: %s is a share group", ErrInconsistentGroupProtocol, g.id), req.MemberID)
	}
	if g.consumer != nil {
		if err := g.toClassic(req.MemberID); err != nil {
			return failJoin(err, req.MemberID)
		}
	}
	return g.join(&req, m.clock.Now())
}

func (g *group) join(req *JoinRequest, now time.Time) *Future[JoinResponse] {
	if !g.compatible(req) {
		return failJoin(ErrInconsistentGroupProtocol, req.MemberID)
	}
	if req.MemberID == "" {
		if req.InstanceID != nil {
			if old := g.members[g.static[*req.InstanceID]]; old != nil {
				return g.replaceStatic(old, req, now)
			}
		}
		if len(g.members)+len(g.pending) >= g.m.cfg.MaxGroupSize {
			return failJoin(ErrGroupMaxSizeReached, "")
		}
		prefix := req.ClientID
		if req.InstanceID != nil {
			prefix = *req.InstanceID
		}
		id := newMemberID(prefix)
		// KIP-394: a dynamic member first gets only its id, so a client
		// that times out and retries does not leave orphan members that
		// stall every rebalance until their session expires. Static
		// members are identified by instance id and skip this round.
		if req.InstanceID == nil && req.RequireKnownMemberID {
			g.pending[id] = now.Add(req.SessionTimeout)
			return failJoin(ErrMemberIDRequired, id)
		}
		return g.addMember(id, req, now)
	}
	if err := g.checkInstance(req.InstanceID, req.MemberID); err != nil {
		return failJoin(err, req.MemberID)
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		return g.addMember(req.MemberID, req, now)
	}
	mem := g.members[req.MemberID]
	if mem == nil {
		return failJoin(ErrUnknownMemberID, req.MemberID)
	}
	switch g.state {
	case PreparingRebalance:
		fut := g.updateMember(mem, req)
		g.tryCompleteJoin(now)
		return fut
	case CompletingRebalance:
		if sameProtocols(mem.protocols, req.Protocols) {
			// The member lost our join response: send it again.
			return resolved(g.joinResponse(mem))
		}
	case Stable:
		// The leader rejoining means it wants a new assignment (it saw a
		// metadata change), so only followers get the current generation back.
		if mem.id != g.leader && sameProtocols(mem.protocols, req.Protocols) {
			mem.deadline = now.Add(mem.session)
			return resolved(g.joinResponse(mem))
		}
	default:
		return failJoin(ErrUnknownMemberID, req.MemberID)
	}
	fut := g.updateMember(mem, req)
	g.prepareRebalance(now)
	return fut
}

func (g *group) addMember(id string, req *JoinRequest, now time.Time) *Future[JoinResponse] {
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	mem := &member{id: id, instanceID: req.InstanceID, order: g.nextOrder}
	g.nextOrder++
	g.members[id] = mem
	if req.InstanceID != nil {
		g.static[*req.InstanceID] = id
	}
	fut := g.updateMember(mem, req)
	if g.state == PreparingRebalance {
		if !g.initialDelayEnd.IsZero() {
			// Each newcomer during the initial delay buys the others
			// another delay, bounded by the rebalance timeout.
			g.initialDelayEnd = minTime(now.Add(g.m.cfg.InitialRebalanceDelay), g.initialDelayMax)
			g.rebalanceDeadline = g.initialDelayEnd
		}
		g.tryCompleteJoin(now)
	} else {
		g.prepareRebalance(now)
	}
	return fut
}

// updateMember takes a (re)join's settings and parks its future.
func (g *group) updateMember(mem *member, req *JoinRequest) *Future[JoinResponse] {
	mem.clientID, mem.clientHost = req.ClientID, req.ClientHost
	mem.session, mem.rebalance = req.SessionTimeout, req.RebalanceTimeout
	mem.protocols = req.Protocols
	if mem.join != nil {
		// A second join from the same member supersedes the first; the
		// first caller retries, which is harmless.
		mem.join.Resolve(JoinResponse{Err: ErrRebalanceInProgress, Generation: -1, MemberID: mem.id})
	}
	mem.join = newFuture[JoinResponse]()
	return mem.join
}

// replaceStatic handles KIP-345: a known group.instance.id joining with no
// member id is the same consumer restarted. It takes a new member id, the
// old id is fenced, and if nothing changed in a Stable group it keeps its
// assignment without a rebalance, which is the point of static membership.
func (g *group) replaceStatic(old *member, req *JoinRequest, now time.Time) *Future[JoinResponse] {
	g.answerRemoved(old, ErrFencedInstanceID)
	mem := &member{
		id:         newMemberID(*req.InstanceID),
		instanceID: req.InstanceID,
		assignment: old.assignment,
		protocols:  old.protocols,
		order:      old.order,
	}
	delete(g.members, old.id)
	g.members[mem.id] = mem
	g.static[*req.InstanceID] = mem.id
	if g.leader == old.id {
		g.leader = mem.id
	}
	if _, ok := g.pendingSync[old.id]; ok {
		delete(g.pendingSync, old.id)
		g.pendingSync[mem.id] = struct{}{}
	}
	if g.state == Stable && sameProtocols(old.protocols, req.Protocols) {
		mem.clientID, mem.clientHost = req.ClientID, req.ClientHost
		mem.session, mem.rebalance = req.SessionTimeout, req.RebalanceTimeout
		mem.deadline = now.Add(mem.session)
		resp := g.joinResponse(mem)
		resp.SkipAssignment = mem.id == g.leader
		// The new member id must be durable before the client uses it:
		// after a coordinator move the old id would otherwise be the one
		// the group knows.
		w := g.append([]statelog.KV{g.metadataRecord()})
		fut := newFuture[JoinResponse]()
		go func() {
			if err := appendErr(w.Wait()); err != nil {
				resp = JoinResponse{Err: err, Generation: -1, MemberID: mem.id}
			}
			fut.Resolve(resp)
		}()
		return fut
	}
	fut := g.updateMember(mem, req)
	if g.state == PreparingRebalance {
		g.tryCompleteJoin(now)
	} else {
		g.prepareRebalance(now)
	}
	return fut
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, mem := range g.members {
		d = max(d, mem.rebalance)
	}
	return d
}

// prepareRebalance opens a join phase: members have until the largest
// rebalance timeout among them to rejoin.
func (g *group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance {
		for _, mem := range g.members {
			mem.assignment = nil
			if mem.sync != nil {
				mem.sync.Resolve(SyncResponse{Err: ErrRebalanceInProgress})
				mem.sync = nil
				// Its session restarts with the answer, as it would after
				// a heartbeat: the time spent waiting was ours.
				mem.deadline = now.Add(mem.session)
			}
		}
	}
	g.pendingSync = nil
	rt := g.maxRebalanceTimeout()
	g.initialDelayEnd = time.Time{}
	if g.state == Empty && g.m.cfg.InitialRebalanceDelay > 0 {
		g.initialDelayMax = now.Add(rt)
		g.initialDelayEnd = minTime(now.Add(g.m.cfg.InitialRebalanceDelay), g.initialDelayMax)
		g.rebalanceDeadline = g.initialDelayEnd
	} else {
		g.rebalanceDeadline = now.Add(rt)
	}
	g.state, g.stateTime = PreparingRebalance, now
	g.tryCompleteJoin(now)
}

// tryCompleteJoin ends the join phase early once every member (and every
// KIP-394 pending id) has joined, except during the initial delay, whose
// purpose is to wait for members we do not know yet.
func (g *group) tryCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance || !g.initialDelayEnd.IsZero() || len(g.pending) > 0 {
		return
	}
	for _, mem := range g.members {
		if mem.join == nil {
			return
		}
	}
	g.completeJoin(now)
}

// completeJoin starts the next generation with the members that rejoined.
func (g *group) completeJoin(now time.Time) {
	for _, mem := range g.members {
		if mem.join == nil {
			g.removeMember(mem)
		}
	}
	g.initialDelayEnd = time.Time{}
	g.generation++
	if len(g.members) == 0 {
		g.state, g.stateTime = Empty, now
		g.protocol, g.leader = "", ""
		// Fire and forget: losing it only loses the empty-since time.
		g.append([]statelog.KV{g.metadataRecord()})
		return
	}
	g.protocol = g.selectProtocol()
	ordered := g.ordered()
	if g.leader == "" {
		g.leader = ordered[0].id
	}
	g.state, g.stateTime = CompletingRebalance, now
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	g.pendingSync = make(map[string]struct{}, len(g.members))
	for _, mem := range ordered {
		g.pendingSync[mem.id] = struct{}{}
		mem.join.Resolve(g.joinResponse(mem))
		mem.join = nil
		mem.deadline = now.Add(mem.session)
	}
}

// selectProtocol picks, among the protocols every member supports, the one
// most members prefer (their first candidate); ties go to the smaller name
// so the choice is deterministic.
func (g *group) selectProtocol() string {
	count := make(map[string]int)
	for _, mem := range g.members {
		for _, p := range mem.protocols {
			count[p.Name]++
		}
	}
	votes := make(map[string]int)
	for _, mem := range g.members {
		for _, p := range mem.protocols {
			if count[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", 0
	for name, v := range votes {
		if v > n || (v == n && name < best) {
			best, n = name, v
		}
	}
	return best
}

func (g *group) ordered() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, mem := range g.members {
		ms = append(ms, mem)
	}
	slices.SortFunc(ms, func(a, b *member) int {
		switch {
		case a.order < b.order:
			return -1
		case a.order > b.order:
			return 1
		}
		return 0
	})
	return ms
}

func (mem *member) metadataFor(protocol string) []byte {
	for _, p := range mem.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (g *group) joinResponse(mem *member) JoinResponse {
	r := JoinResponse{
		Generation:   g.generation,
		ProtocolType: g.protocolType,
		Protocol:     g.protocol,
		Leader:       g.leader,
		MemberID:     mem.id,
	}
	if mem.id == g.leader {
		for _, o := range g.ordered() {
			r.Members = append(r.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return r
}

// Sync answers SyncGroup. Followers wait for the leader's assignment; every
// answer of a generation waits until its assignment record is durable.
func (m *Manager) Sync(req SyncRequest) *Future[SyncResponse] {
	if req.Group == "" {
		return resolved(SyncResponse{Err: ErrInvalidGroupID})
	}
	g, err := m.lockGroup(req.Group, false)
	if err != nil {
		return resolved(SyncResponse{Err: err})
	}
	if g == nil {
		return resolved(SyncResponse{Err: ErrUnknownMemberID})
	}
	defer g.mu.Unlock()
	return g.sync(&req, m.clock.Now())
}

func (g *group) sync(req *SyncRequest, now time.Time) *Future[SyncResponse] {
	fail := func(err error) *Future[SyncResponse] { return resolved(SyncResponse{Err: err}) }
	if err := g.checkInstance(req.InstanceID, req.MemberID); err != nil {
		return fail(err)
	}
	mem := g.members[req.MemberID]
	switch {
	case mem == nil:
		return fail(ErrUnknownMemberID)
	case req.Generation != g.generation:
		return fail(ErrIllegalGeneration)
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		return fail(ErrInconsistentGroupProtocol)
	}
	switch g.state {
	case PreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case CompletingRebalance:
		mem.deadline = now.Add(mem.session)
		if mem.sync != nil {
			mem.sync.Resolve(SyncResponse{Err: ErrRebalanceInProgress})
		}
		mem.sync = newFuture[SyncResponse]()
		fut := mem.sync
		delete(g.pendingSync, mem.id)
		if mem.id == g.leader {
			g.completeSync(req.Assignments, now)
		}
		return fut
	case Stable:
		mem.deadline = now.Add(mem.session)
		if b := g.syncBatch; b != nil && b.gen == g.generation {
			fut := newFuture[SyncResponse]()
			b.waiters[mem.id] = fut
			return fut
		}
		return resolved(SyncResponse{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: mem.assignment})
	}
	return fail(ErrUnknownMemberID)
}

// completeSync takes the leader's assignment: the group is Stable at once
// (heartbeats succeed), and the SyncGroup answers go out when the record
// holding the assignment is durable, so no member acts on an assignment a
// new coordinator would not know.
func (g *group) completeSync(assign map[string][]byte, now time.Time) {
	b := &syncBatch{gen: g.generation, assign: make(map[string][]byte), waiters: make(map[string]*Future[SyncResponse])}
	for _, mem := range g.members {
		mem.assignment = assign[mem.id]
		if mem.assignment == nil {
			mem.assignment = []byte{}
		}
		b.assign[mem.id] = mem.assignment
		if mem.sync != nil {
			b.waiters[mem.id] = mem.sync
			mem.sync = nil
		}
	}
	g.state, g.stateTime = Stable, now
	g.pendingSync = nil
	g.syncBatch = b
	w := g.append([]statelog.KV{g.metadataRecord()})
	pt, proto := g.protocolType, g.protocol
	go func() {
		err := appendErr(w.Wait())
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.syncBatch == b {
			g.syncBatch = nil
		}
		now := g.m.clock.Now()
		for id := range b.waiters {
			if mem := g.members[id]; mem != nil {
				mem.deadline = now.Add(mem.session)
			}
		}
		if err != nil && g.state == Stable && g.generation == b.gen {
			// Kafka's answer too: the assignment is not safe, start over.
			g.prepareRebalance(now)
		}
		for id, f := range b.waiters {
			if err != nil {
				f.Resolve(SyncResponse{Err: err})
			} else {
				f.Resolve(SyncResponse{ProtocolType: pt, Protocol: proto, Assignment: b.assign[id]})
			}
		}
	}()
}

// Heartbeat answers Heartbeat: nil while the member's generation is
// current, ErrRebalanceInProgress to make it rejoin, and the fencing errors
// for zombies.
func (m *Manager) Heartbeat(req HeartbeatRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	g, err := m.lockGroup(req.Group, false)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrUnknownMemberID
	}
	defer g.mu.Unlock()
	if err := g.checkInstance(req.InstanceID, req.MemberID); err != nil {
		return err
	}
	mem := g.members[req.MemberID]
	if mem == nil {
		return ErrUnknownMemberID
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	mem.deadline = m.clock.Now().Add(mem.session)
	if g.state == PreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// Leave answers LeaveGroup for a batch of members (v0-v2 send one). The
// error is a group-level failure (routing); per-member results say which
// members were removed.
func (m *Manager) Leave(groupID string, members []LeaveMember) ([]LeaveResult, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	res := make([]LeaveResult, len(members))
	for i, lm := range members {
		res[i] = LeaveResult{MemberID: lm.MemberID, InstanceID: lm.InstanceID, Err: ErrUnknownMemberID}
	}
	g, err := m.lockGroup(groupID, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return res, nil
	}
	defer g.mu.Unlock()
	removed := false
	for i, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != nil {
			sid, ok := g.static[*lm.InstanceID]
			if !ok {
				continue
			}
			if id != "" && id != sid {
				res[i].Err = ErrFencedInstanceID
				continue
			}
			id, res[i].MemberID = sid, sid
		}
		if _, ok := g.pending[id]; ok {
			delete(g.pending, id)
			res[i].Err = nil
			continue
		}
		mem := g.members[id]
		if mem == nil {
			continue
		}
		g.removeMember(mem)
		res[i].Err = nil
		removed = true
	}
	if removed {
		g.membersRemoved(m.clock.Now())
	}
	return res, nil
}

// tick fires the group's due deadlines.
func (g *group) tick(now time.Time) {
	if g.share != nil {
		g.shareTick(now)
		return
	}
	if g.consumer != nil {
		g.consumerTick(now)
		return
	}
	for id, dl := range g.pending {
		if !now.Before(dl) {
			delete(g.pending, id)
		}
	}
	switch g.state {
	case PreparingRebalance:
		if !now.Before(g.rebalanceDeadline) {
			g.completeJoin(now)
		} else {
			g.tryCompleteJoin(now) // an expired pending id may have been the last one missing
		}
	case CompletingRebalance:
		if !now.Before(g.syncDeadline) {
			// Members that never synced (the leader, perhaps) would hold
			// the group forever: drop them and rebalance without them.
			for id := range g.pendingSync {
				if mem := g.members[id]; mem != nil {
					g.removeMember(mem)
				}
			}
			g.prepareRebalance(now)
		}
	}
	expired := false
	for _, mem := range g.members {
		if mem.join == nil && mem.sync == nil && !now.Before(mem.deadline) {
			g.removeMember(mem)
			expired = true
		}
	}
	if expired {
		g.membersRemoved(now)
	}
}

func (g *group) describe() GroupDescription {
	if g.share != nil {
		return g.describeShareClassic()
	}
	if g.consumer != nil {
		return g.describeConsumerClassic()
	}
	d := GroupDescription{Group: g.id, State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	for _, mem := range g.ordered() {
		md := MemberDescription{MemberID: mem.id, InstanceID: mem.instanceID, ClientID: mem.clientID, ClientHost: mem.clientHost}
		if stable {
			md.Metadata, md.Assignment = mem.metadataFor(g.protocol), mem.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// metadataRecord is the group's GroupMetadata record as of now.
func (g *group) metadataRecord() statelog.KV {
	v := GroupMetadata{
		ProtocolType:          g.protocolType,
		Generation:            g.generation,
		CurrentStateTimestamp: g.stateTime.UnixMilli(),
	}
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	for _, mem := range g.ordered() {
		v.Members = append(v.Members, MemberMetadata{
			MemberID:           mem.id,
			InstanceID:         mem.instanceID,
			ClientID:           mem.clientID,
			ClientHost:         mem.clientHost,
			RebalanceTimeoutMs: int32(mem.rebalance / time.Millisecond),
			SessionTimeoutMs:   int32(mem.session / time.Millisecond),
			Subscription:       mem.metadataFor(g.protocol),
			Assignment:         mem.assignment,
		})
	}
	return statelog.KV{Key: EncodeGroupKey(g.id), Value: EncodeGroupValue(v)}
}

// append hands records to the Persister. Called with mu held so one group's
// records reach the log in state order. The Waiter may be dropped.
func (g *group) append(kvs []statelog.KV) statelog.Waiter {
	return g.m.persist.Append(g.part, kvs)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
