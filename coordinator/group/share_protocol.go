package group

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe. A
// share group's members may all be assigned the same partitions (records,
// not partitions, are handed out, by the partition leader: see
// coordinator/share), so there is no revocation and no reconciliation:
// every member is assigned every partition of the topics it subscribes
// to, and its epoch moves to the group epoch when that assignment
// changes. Membership is kept in memory only in this version (no
// __consumer_offsets records): a coordinator move starts the group
// afresh and members rejoin (their heartbeats get UNKNOWN_MEMBER_ID).

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
}

// sgroup is a share group's membership; g.share != nil marks the group
// as a share group.
type sgroup struct {
	epoch   int32
	members map[string]*smember
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

// ShareHeartbeat answers ShareGroupHeartbeat: epoch 0 joins (or rejoins
// with the same member id), -1 leaves, any other epoch up to the
// member's own heartbeats (a lower one is a member that missed an
// answer: it gets its assignment again).
func (m *Manager) ShareHeartbeat(req ShareHeartbeatRequest) ShareHeartbeatResponse {
	switch e := req.MemberEpoch; {
	case req.Group == "":
		return shareFail(ErrInvalidGroupID, &req)
	case req.MemberID == "":
		return shareFail(fmt.Errorf("%w: member id must be set", ErrInvalidRequest), &req)
	case e < LeaveEpoch:
		return shareFail(fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, e), &req)
	case e == JoinEpoch && req.SubscribedTopicNames == nil:
		return shareFail(fmt.Errorf("%w: a joining member must subscribe to topic names", ErrInvalidRequest), &req)
	}
	topics := m.topicView()
	if topics == nil {
		return shareFail(fmt.Errorf("%w: topic metadata not available yet", ErrCoordinatorNotAvailable), &req)
	}
	g, err := m.lockGroup(req.Group, req.MemberEpoch == JoinEpoch)
	if err != nil {
		return shareFail(err, &req)
	}
	if g == nil {
		if req.MemberEpoch == LeaveEpoch {
			return ShareHeartbeatResponse{MemberID: req.MemberID, MemberEpoch: LeaveEpoch}
		}
		return shareFail(fmt.Errorf("%w: group %s", ErrGroupIDNotFound, req.Group), &req)
	}
	defer g.mu.Unlock()
	return g.shareHeartbeat(&req, topics, m.clock.Now())
}

// becomeShare makes an unused group a share group.
func (g *group) becomeShare() error {
	if g.share != nil {
		return nil
	}
	if g.consumer != nil || len(g.members) > 0 || len(g.pending) > 0 || g.state != Empty || g.isClassicInUse() {
		return fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, g.id)
	}
	g.share = &sgroup{members: make(map[string]*smember)}
	g.protocolType = ShareProtocolType
	return nil
}

func (g *group) shareHeartbeat(req *ShareHeartbeatRequest, topics Topics, now time.Time) ShareHeartbeatResponse {
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
	mem := sg.members[req.MemberID]
	send := false
	switch e := req.MemberEpoch; {
	case e == LeaveEpoch:
		if mem != nil {
			g.removeShareMember(mem)
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

func (g *group) removeShareMember(mem *smember) {
	delete(g.share.members, mem.id)
	g.share.epoch++
	g.stateTime = g.m.clock.Now()
	g.m.shareMemberGone(g.id, mem.id)
}

// shareTick removes members whose session expired.
func (g *group) shareTick(now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(g.share.members)) {
		if mem := g.share.members[id]; !now.Before(mem.deadline) {
			g.removeShareMember(mem)
		}
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
	d := ShareGroupDescription{Group: g.id, State: sg.state(), GroupEpoch: sg.epoch, AssignmentEpoch: sg.epoch, Assignor: ShareAssignor}
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
// group's start offsets before any consumer joins).
func (m *Manager) ShareGroupEmpty(groupID string, needEmpty, create bool) error {
	if groupID == "" {
		return ErrInvalidGroupID
	}
	g, err := m.lockGroup(groupID, create)
	if err != nil {
		return err
	}
	if g == nil {
		return fmt.Errorf("%w: group %s not found", ErrGroupIDNotFound, groupID)
	}
	defer g.mu.Unlock()
	if g.share == nil {
		if !create {
			return fmt.Errorf("%w: %s is not a share group", ErrGroupIDNotFound, groupID)
		}
		if err := g.becomeShare(); err != nil {
			return err
		}
	}
	if needEmpty && len(g.share.members) > 0 {
		return fmt.Errorf("%w: share group %s has %d members", ErrNonEmptyGroup, groupID, len(g.share.members))
	}
	return nil
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
