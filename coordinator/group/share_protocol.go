package group

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe. A
// share group's members may all be assigned the same partitions (records,
// not partitions, are handed out, by the partition leader: see
// coordinator/share), so there is no revocation and no reconciliation:
// every member is assigned every partition of the topics it subscribes
// to, and its epoch moves to the group epoch when that assignment
// changes. The group's epoch, its members and the topics whose
// share-partition state was initialized are written to
// __consumer_offsets (share_protocol_records.go) before a heartbeat or
// an offsets change is answered, so a new coordinator loads the group
// and its members go on heartbeating at their epochs, each with a full
// session from the load (as Kafka 4.2 does).

// ShareProtocolType is the protocol type ListGroups and DescribeGroups
// show for share groups, and GroupTypeShare their group type.
const (
	ShareProtocolType = "share"
	GroupTypeShare    = "share"
	// ShareAssignor is the assignor ShareGroupDescribe names.
	ShareAssignor = "simple"
)

// Share group states (Kafka's names).
const (
	ShareEmpty  = "Empty"
	ShareStable = "Stable"
	ShareDead   = "Dead"
)

// ShareHeartbeatRequest is ShareGroupHeartbeat v1. SubscribedTopicNames
// nil means unchanged; a joining member (epoch 0) must send it.
type ShareHeartbeatRequest struct {
	Group                string
	MemberID             string
	MemberEpoch          int32
	RackID               *string
	SubscribedTopicNames []string
	ClientID             string
	ClientHost           string
}

// ShareHeartbeatResponse is ShareGroupHeartbeat's answer; Assignment is
// meaningful when HasAssignment.
type ShareHeartbeatResponse struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	Assignment        Assignment
	HasAssignment     bool
}

// ShareMemberDescription is one member in ShareGroupDescribe.
type ShareMemberDescription struct {
	MemberID             string
	RackID               *string
	MemberEpoch          int32
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	Assignment           Assignment
}

// ShareGroupDescription is one group in ShareGroupDescribe.
type ShareGroupDescription struct {
	Group           string
	Err             error
	State           string
	GroupEpoch      int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ShareMemberDescription
	// Initialized lists the topics whose share-partition state was
	// initialized (offsets altered, or assigned to a member) and not
	// deleted since, in id order.
	Initialized []TopicID
}

// sgroup is a share group's membership; g.share != nil marks the group
// as a share group.
type sgroup struct {
	epoch   int32
	members map[string]*smember
	// initialized is the set of topics whose share-partition state may
	// exist: the all-topics DescribeShareGroupOffsets reads these, since
	// the state may be held by any broker.
	initialized map[TopicID]bool
	// last is the group's latest append: an answer that writes nothing
	// still waits for it, so no member acts on state a new coordinator
	// might not load.
	last *durable
}

type smember struct {
	id         string
	epoch      int32
	rackID     *string
	clientID   string
	clientHost string
	names      []string // sorted, deduplicated
	assigned   Assignment
	deadline   time.Time
}

func (sg *sgroup) state() string {
	if len(sg.members) == 0 {
		return ShareEmpty
	}
	return ShareStable
}

// SetShareMemberGone registers f, called (under the group's lock) with
// each share member that leaves or whose session expires, so the
// partition leaders release the records it holds.
func (m *Manager) SetShareMemberGone(f func(group, member string)) {
	m.shareGone.Store(&f)
}

func (m *Manager) shareMemberGone(group, member string) {
	if f := m.shareGone.Load(); f != nil {
		(*f)(group, member)
	}
}

func shareFail(err error, req *ShareHeartbeatRequest) ShareHeartbeatResponse {
	return ShareHeartbeatResponse{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
}

func shareFailed(err error, req *ShareHeartbeatRequest) *Future[ShareHeartbeatResponse] {
	return resolved(shareFail(err, req))
}

// ShareHeartbeat answers ShareGroupHeartbeat: epoch 0 joins (or rejoins
// with the same member id), -1 leaves, any other epoch up to the
// member's own heartbeats (a lower one is a member that missed an
// answer: it gets its assignment again). The future resolves once the
// records the heartbeat wrote are durable.
func (m *Manager) ShareHeartbeat(req ShareHeartbeatRequest) *Future[ShareHeartbeatResponse] {
	switch e := req.MemberEpoch; {
	case req.Group == "":
		return shareFailed(ErrInvalidGroupID, &req)
	case req.MemberID == "":
		return shareFailed(fmt.Errorf("%w: member id must be set", ErrInvalidRequest), &req)
	case e < LeaveEpoch:
		return shareFailed(fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, e), &req)
	case e == JoinEpoch && req.SubscribedTopicNames == nil:
		return shareFailed(fmt.Errorf("%w: a joining member must subscribe to topic names", ErrInvalidRequest), &req)
	}
	topics := m.topicView()
	if topics == nil {
		return shareFailed(fmt.Errorf("%w: topic metadata not available yet", ErrCoordinatorNotAvailable), &req)
	}
	g, err := m.lockGroup(req.Group, req.MemberEpoch == JoinEpoch)
	if err != nil {
		return shareFailed(err, &req)
	}
	if g == nil {
		if req.MemberEpoch == LeaveEpoch {
			return resolved(ShareHeartbeatResponse{MemberID: req.MemberID, MemberEpoch: LeaveEpoch})
		}
		return shareFailed(fmt.Errorf("%w: group %s", ErrGroupIDNotFound, req.Group), &req)
	}
	defer g.mu.Unlock()
	var kvs []statelog.KV
	resp := g.shareHeartbeat(&req, topics, m.clock.Now(), &kvs)
	if resp.Err != nil {
		// Nothing changed, or (a group that could not become a share
		// group) nothing was created worth keeping.
		return resolved(resp)
	}
	return g.shareAnswerAfter(kvs, resp)
}

// shareAnswerAfter resolves resp once kvs, and the group's earlier
// appends, are durable; a failed append fails the answer.
func (g *group) shareAnswerAfter(kvs []statelog.KV, resp ShareHeartbeatResponse) *Future[ShareHeartbeatResponse] {
	d := g.shareAppend(kvs)
	if d == nil {
		return resolved(resp)
	}
	return whenDurable(d, resp, func(err error) ShareHeartbeatResponse {
		return ShareHeartbeatResponse{Err: err, MemberID: resp.MemberID, MemberEpoch: resp.MemberEpoch}
	})
}

// shareAppend appends kvs (if any) and returns what an answer must wait
// for: this append, else the group's last one still pending, else nil.
// Called with g.mu held.
func (g *group) shareAppend(kvs []statelog.KV) *durable {
	sg := g.share
	if len(kvs) > 0 {
		sg.last = watch(g.append(kvs))
	}
	if !sg.last.pending() {
		return nil
	}
	return sg.last
}

// becomeShare makes an unused group a share group.
func (g *group) becomeShare() error {
	if g.share != nil {
		return nil
	}
	if g.consumer != nil || len(g.members) > 0 || len(g.pending) > 0 || g.state != Empty || g.isClassicInUse() {
		return fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, g.id)
	}
	g.share = &sgroup{members: make(map[string]*smember), initialized: make(map[TopicID]bool)}
	g.protocolType = ShareProtocolType
	return nil
}

// restoreShare installs a loaded share group. Members keep their epochs
// and assignments and get a full session from now, as after any
// coordinator move; their first heartbeat carries on where it was.
func (g *group) restoreShare(ls *LoadedShareGroup, now time.Time) {
	sg := &sgroup{epoch: ls.Epoch, members: make(map[string]*smember, len(ls.Members)), initialized: make(map[TopicID]bool, len(ls.Initialized))}
	for _, id := range ls.Initialized {
		sg.initialized[id] = true
	}
	for id, r := range ls.Members {
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		a := r.Assigned
		if a == nil {
			a = Assignment{}
		}
		sg.members[id] = &smember{
			id: id, epoch: r.MemberEpoch, rackID: r.RackID, clientID: r.ClientID, clientHost: r.ClientHost,
			names: slices.Compact(names), assigned: a, deadline: now.Add(g.m.cfg.ConsumerSessionTimeout),
		}
	}
	g.share = sg
	g.protocolType = ShareProtocolType
	g.stateTime = now
}

// record is mem's __consumer_offsets record.
func (mem *smember) record(group string) statelog.KV {
	return ShareMemberKV(group, mem.id, &ShareMemberRecord{
		MemberEpoch: mem.epoch, RackID: mem.rackID, ClientID: mem.clientID, ClientHost: mem.clientHost,
		SubscribedTopicNames: mem.names, Assigned: mem.assigned,
	})
}

func (sg *sgroup) initializedIDs() []TopicID {
	ids := slices.Collect(maps.Keys(sg.initialized))
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

// initialize adds (or, with drop, removes) topic ids to the initialized
// set and returns the set's record when it changed.
func (g *group) initialize(ids []TopicID, drop bool) []statelog.KV {
	sg := g.share
	changed := false
	for _, id := range ids {
		if sg.initialized[id] == drop {
			changed = true
			if drop {
				delete(sg.initialized, id)
			} else {
				sg.initialized[id] = true
			}
		}
	}
	if !changed {
		return nil
	}
	return []statelog.KV{ShareInitializedKV(g.id, sg.initializedIDs(), false)}
}

// shareTombstones deletes every record of the share group, the group's
// epoch last so a load cut short still finds the group.
func (g *group) shareTombstones() []statelog.KV {
	var kvs []statelog.KV
	for _, id := range slices.Sorted(maps.Keys(g.share.members)) {
		kvs = append(kvs, ShareMemberKV(g.id, id, nil))
	}
	return append(kvs, ShareInitializedKV(g.id, nil, true), ShareGroupKV(g.id, 0, true))
}

// shareHeartbeat applies one heartbeat and adds the records it changed
// to *kvs: the member's (or its tombstone), the initialized topics, then
// the group epoch.
func (g *group) shareHeartbeat(req *ShareHeartbeatRequest, topics Topics, now time.Time, kvs *[]statelog.KV) ShareHeartbeatResponse {
	if g.share == nil {
		if req.MemberEpoch != JoinEpoch {
			if g.consumer != nil || g.isClassicInUse() {
				return shareFail(fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, g.id), req)
			}
			return shareFail(fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID), req)
		}
		if err := g.becomeShare(); err != nil {
			return shareFail(err, req)
		}
	}
	sg := g.share
	epoch := sg.epoch
	defer func() {
		if sg.epoch != epoch {
			*kvs = append(*kvs, ShareGroupKV(g.id, sg.epoch, false))
		}
	}()
	mem := sg.members[req.MemberID]
	var before []byte
	if mem != nil {
		before = mem.record(g.id).Value
	}
	send := false
	switch e := req.MemberEpoch; {
	case e == LeaveEpoch:
		if mem != nil {
			*kvs = append(*kvs, g.removeShareMember(mem)...)
		}
		return ShareHeartbeatResponse{MemberID: req.MemberID, MemberEpoch: LeaveEpoch}
	case e == JoinEpoch:
		if mem == nil {
			if len(sg.members) >= g.m.cfg.ConsumerMaxSize {
				return shareFail(fmt.Errorf("%w: %d members", ErrGroupMaxSizeReached, len(sg.members)), req)
			}
			mem = &smember{id: req.MemberID, assigned: Assignment{}}
			sg.members[mem.id] = mem
			mem.clientID, mem.clientHost = req.ClientID, req.ClientHost
		}
		sg.epoch++
		mem.epoch = sg.epoch
		send = true
	case mem == nil:
		return shareFail(fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID), req)
	case e > mem.epoch:
		return shareFail(fmt.Errorf("%w: epoch %d, the member is at %d", ErrFencedMemberEpoch, e, mem.epoch), req)
	case e < mem.epoch:
		send = true // it missed our last answer
	}
	if req.RackID != nil {
		mem.rackID = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		send = true // a full heartbeat gets the assignment back
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, mem.names) {
			mem.names = names
		}
	}
	if a := shareAssignment(mem.names, topics); !equalAssignment(a, mem.assigned) {
		sg.epoch++
		mem.epoch, mem.assigned, send = sg.epoch, a, true
	}
	mem.deadline = now.Add(g.m.cfg.ConsumerSessionTimeout)
	if rec := mem.record(g.id); !bytes.Equal(rec.Value, before) {
		*kvs = append(*kvs, rec)
	}
	// The assigned topics' share-partitions get state once fetched from:
	// remember them, whoever holds it.
	*kvs = append(*kvs, g.initialize(slices.Collect(maps.Keys(mem.assigned)), false)...)
	resp := ShareHeartbeatResponse{MemberID: mem.id, MemberEpoch: mem.epoch, HeartbeatInterval: g.m.cfg.ConsumerHeartbeatInterval}
	if send {
		resp.Assignment, resp.HasAssignment = cloneAssignment(mem.assigned), true
	}
	return resp
}

// shareAssignment is every partition of the named topics that exist.
func shareAssignment(names []string, topics Topics) Assignment {
	a := Assignment{}
	for _, n := range names {
		t, ok := topics.TopicByName(n)
		if !ok || t.Partitions <= 0 {
			continue
		}
		ps := make([]int32, t.Partitions)
		for i := range ps {
			ps[i] = int32(i)
		}
		a[t.ID] = ps
	}
	return a
}

// removeShareMember drops mem and bumps the group epoch; it returns the
// member's tombstone (the caller writes the group epoch after it).
func (g *group) removeShareMember(mem *smember) []statelog.KV {
	delete(g.share.members, mem.id)
	g.share.epoch++
	g.stateTime = g.m.clock.Now()
	g.m.shareMemberGone(g.id, mem.id)
	return []statelog.KV{ShareMemberKV(g.id, mem.id, nil)}
}

// shareTick removes members whose session expired. Nobody waits for the
// append, but the next heartbeat's answer does (sgroup.last).
func (g *group) shareTick(now time.Time) {
	var kvs []statelog.KV
	for _, id := range slices.Sorted(maps.Keys(g.share.members)) {
		if mem := g.share.members[id]; !now.Before(mem.deadline) {
			kvs = append(kvs, g.removeShareMember(mem)...)
		}
	}
	if len(kvs) > 0 {
		kvs = append(kvs, ShareGroupKV(g.id, g.share.epoch, false))
		g.shareAppend(kvs)
	}
}

// ShareDescribe answers ShareGroupDescribe.
func (m *Manager) ShareDescribe(groupIDs []string) []ShareGroupDescription {
	out := make([]ShareGroupDescription, len(groupIDs))
	for i, id := range groupIDs {
		d := ShareGroupDescription{Group: id, State: ShareDead}
		g, err := m.lockGroup(id, false)
		switch {
		case id == "":
			d.Err = ErrInvalidGroupID
		case err != nil:
			d.Err = err
		case g == nil:
			d.Err = fmt.Errorf("%w: group %s not found", ErrGroupIDNotFound, id)
		default:
			if g.share == nil {
				d.Err = fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, id)
			} else {
				d = g.describeShare()
			}
			g.mu.Unlock()
		}
		out[i] = d
	}
	return out
}

func (g *group) describeShare() ShareGroupDescription {
	sg := g.share
	d := ShareGroupDescription{Group: g.id, State: sg.state(), GroupEpoch: sg.epoch, AssignmentEpoch: sg.epoch, Assignor: ShareAssignor, Initialized: sg.initializedIDs()}
	for _, id := range slices.Sorted(maps.Keys(sg.members)) {
		mem := sg.members[id]
		d.Members = append(d.Members, ShareMemberDescription{
			MemberID: id, RackID: mem.rackID, MemberEpoch: mem.epoch, ClientID: mem.clientID, ClientHost: mem.clientHost,
			SubscribedTopicNames: slices.Clone(mem.names), Assignment: cloneAssignment(mem.assigned),
		})
	}
	return d
}

// describeShareClassic is DescribeGroups for a share group: its state
// and members, with no protocol metadata (share members have none).
func (g *group) describeShareClassic() GroupDescription {
	d := GroupDescription{Group: g.id, State: g.share.state(), ProtocolType: ShareProtocolType}
	for _, id := range slices.Sorted(maps.Keys(g.share.members)) {
		mem := g.share.members[id]
		d.Members = append(d.Members, MemberDescription{MemberID: id, ClientID: mem.clientID, ClientHost: mem.clientHost})
	}
	return d
}

// ShareGroupEmpty is the check of the share-group offset APIs: groupID
// must be a share group (ErrGroupIDNotFound otherwise) and, when
// needEmpty, have no members (ErrNonEmptyGroup). With create an unknown
// group becomes an empty share group (AlterShareGroupOffsets may set a
// group's start offsets before any consumer joins); it returns once the
// new group's record is durable.
func (m *Manager) ShareGroupEmpty(groupID string, needEmpty, create bool) error {
	d, err := m.shareGroupEmpty(groupID, needEmpty, create)
	if err == nil && d != nil {
		<-d.done
		err = d.err
	}
	return err
}

func (m *Manager) shareGroupEmpty(groupID string, needEmpty, create bool) (*durable, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	g, err := m.lockGroup(groupID, create)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: group %s not found", ErrGroupIDNotFound, groupID)
	}
	defer g.mu.Unlock()
	var kvs []statelog.KV
	if g.share == nil {
		if !create {
			return nil, fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, groupID)
		}
		if err := g.becomeShare(); err != nil {
			return nil, err
		}
		kvs = append(kvs, ShareGroupKV(g.id, g.share.epoch, false))
	}
	if needEmpty && len(g.share.members) > 0 {
		return nil, fmt.Errorf("%w: share group %s has %d members", ErrNonEmptyGroup, groupID, len(g.share.members))
	}
	return g.shareAppend(kvs), nil
}

// ShareInitialized records that share-partition state of topics now
// exists for groupID (AlterShareGroupOffsets), or, with drop, no longer
// does (DeleteShareGroupOffsets). It returns once the change is durable;
// a group that is not a share group is ErrGroupIDNotFound.
func (m *Manager) ShareInitialized(groupID string, topics []TopicID, drop bool) error {
	g, err := m.lockGroup(groupID, false)
	if err != nil {
		return err
	}
	if g == nil || g.share == nil {
		if g != nil {
			g.mu.Unlock()
		}
		return fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, groupID)
	}
	d := g.shareAppend(g.initialize(topics, drop))
	g.mu.Unlock()
	if d == nil {
		return nil
	}
	<-d.done
	return d.err
}

// IsShareGroup reports whether groupID is a share group here.
func (m *Manager) IsShareGroup(groupID string) bool {
	g, err := m.lockGroup(groupID, false)
	if err != nil || g == nil {
		return false
	}
	defer g.mu.Unlock()
	return g.share != nil
}
