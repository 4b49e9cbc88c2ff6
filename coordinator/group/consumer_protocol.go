package group

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// The consumer (KIP-848) group protocol: ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, and the hooks the classic APIs use for consumer
// groups. See doc.go for the machine.

// consumerRecords are the record encoders the machine writes through;
// tests may substitute them (Manager.crec).
type consumerRecords struct {
	groupMeta    func(group string, epoch int32, tombstone bool) statelog.KV
	targetMeta   func(group string, assignmentEpoch int32, tombstone bool) statelog.KV
	member       func(group, memberID string, r *ConsumerMemberRecord) statelog.KV
	targetMember func(group, memberID string, a Assignment, tombstone bool) statelog.KV
	current      func(group, memberID string, r *ConsumerAssignmentRecord) statelog.KV
}

var realConsumerRecords = consumerRecords{
	groupMeta:    ConsumerGroupMetadataKV,
	targetMeta:   ConsumerTargetMetadataKV,
	member:       ConsumerMemberKV,
	targetMember: ConsumerTargetMemberKV,
	current:      ConsumerCurrentAssignmentKV,
}

type topicsBox struct{ t Topics }

func errAssignorMissing(name string) error {
	return fmt.Errorf("%w: assignor %q is configured but not available", ErrCoordinatorNotAvailable, name)
}

// SetTopics gives the Manager the broker's topic view; consumer-protocol
// heartbeats answer ErrCoordinatorNotAvailable until it is set.
func (m *Manager) SetTopics(t Topics) {
	m.topics.Store(&topicsBox{t})
}

func (m *Manager) topicView() Topics {
	if b := m.topics.Load(); b != nil {
		return b.t
	}
	return nil
}

func hbFail(err error, req *ConsumerHeartbeatRequest) *Future[ConsumerHeartbeatResponse] {
	return resolved(ConsumerHeartbeatResponse{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch})
}

// validateHeartbeat checks what a heartbeat's epoch requires of it.
func (m *Manager) validateHeartbeat(req *ConsumerHeartbeatRequest) error {
	inv := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, a...))
	}
	switch e := req.MemberEpoch; {
	case req.Group == "":
		return ErrInvalidGroupID
	case e < StaticLeaveEpoch:
		return inv("member epoch %d", e)
	case e == JoinEpoch:
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return inv("a joining member must subscribe to topic names or a regex")
		}
		if req.RebalanceTimeout < 0 {
			return inv("a joining member must give a rebalance timeout")
		}
		if req.Owned == nil || req.Owned.size() > 0 {
			// Kafka's rule: a (re)joining member owns nothing.
			return inv("owned partitions must be empty when (re-)joining")
		}
		if req.Version >= 1 && req.MemberID == "" {
			return inv("member id must be set from version 1 on")
		}
	case req.MemberID == "":
		return inv("member id must be set with member epoch %d", e)
	}
	// Epoch -2 without an instance id is accepted: franz-go leaves that
	// way, and the member id says who it is (the member's own instance
	// id decides whether it is a static leave).
	if req.ServerAssignor != nil && !slices.Contains(m.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return fmt.Errorf("%w: %q (supported: %s)", ErrUnsupportedAssignor, *req.ServerAssignor, strings.Join(m.cfg.ConsumerAssignors, ", "))
	}
	if req.SubscribedTopicRegex != nil {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRegularExpression, err)
		}
	}
	for _, name := range m.cfg.ConsumerAssignors {
		if _, ok := m.assignorFor(name); !ok {
			return errAssignorMissing(name)
		}
	}
	return nil
}

// ConsumerHeartbeat answers ConsumerGroupHeartbeat. The future resolves
// once the records the heartbeat produced are durable.
func (m *Manager) ConsumerHeartbeat(req ConsumerHeartbeatRequest) *Future[ConsumerHeartbeatResponse] {
	if err := m.validateHeartbeat(&req); err != nil {
		return hbFail(err, &req)
	}
	topics := m.topicView()
	if topics == nil {
		return hbFail(fmt.Errorf("%w: topic metadata not available yet", ErrCoordinatorNotAvailable), &req)
	}
	g, err := m.lockGroup(req.Group, req.MemberEpoch == JoinEpoch)
	if err != nil {
		return hbFail(err, &req)
	}
	if g == nil {
		return hbFail(ErrUnknownMemberID, &req)
	}
	defer g.mu.Unlock()
	return g.consumerHeartbeat(&req, topics, m.clock.Now())
}

func (g *group) consumerHeartbeat(req *ConsumerHeartbeatRequest, topics Topics, now time.Time) *Future[ConsumerHeartbeatResponse] {
	var kvs []statelog.KV
	if g.consumer == nil {
		if len(g.members) > 0 || len(g.pending) > 0 || g.state != Empty || g.share != nil {
			return hbFail(fmt.Errorf("%w: %s is not a consumer group", ErrGroupIDNotFound, g.id), req)
		}
		if req.MemberEpoch != JoinEpoch {
			return hbFail(ErrUnknownMemberID, req)
		}
		if g.isClassicInUse() {
			if p := g.m.cfg.MigrationPolicy; p != "bidirectional" && p != "upgrade" {
				return hbFail(fmt.Errorf("%w: %s is a classic group and migration policy %q forbids upgrading it", ErrGroupIDNotFound, g.id, p), req)
			}
			// The classic metadata goes; committed offsets stay.
			kvs = append(kvs, statelog.KV{Key: EncodeGroupKey(g.id)})
		}
		g.consumer = newCgroup()
		g.protocolType, g.protocol, g.leader, g.generation = ConsumerProtocolType, "", "", 0
	}
	cg := g.consumer
	r := &resolver{topics: topics, cache: &cg.regexes}

	mem := cg.members[req.MemberID]
	newMember, replaced := false, ""
	switch e := req.MemberEpoch; {
	case e == LeaveEpoch || e == StaticLeaveEpoch:
		return g.consumerLeave(req, kvs, now)
	case e == JoinEpoch:
		if req.InstanceID != nil {
			if oid, ok := cg.static[*req.InstanceID]; ok && oid != req.MemberID {
				old := cg.members[oid]
				if old.epoch != StaticLeaveEpoch {
					return hbFail(fmt.Errorf("%w: instance id %q is held by member %s", ErrUnreleasedInstanceID, *req.InstanceID, oid), req)
				}
				if mem != nil {
					return hbFail(fmt.Errorf("%w: member %s already exists", ErrInvalidRequest, req.MemberID), req)
				}
				replaced = oid
			}
		}
		switch {
		case replaced != "":
			mem = g.replaceStaticConsumer(cg.members[replaced], req.MemberID)
			kvs = append(kvs, g.removeStaticRecords(replaced)...)
		case mem == nil:
			if len(cg.members) >= g.m.cfg.ConsumerMaxSize {
				return hbFail(fmt.Errorf("%w: %d members", ErrGroupMaxSizeReached, len(cg.members)), req)
			}
			id := req.MemberID
			if id == "" { // v0: the coordinator names the member
				id = strings.TrimPrefix(newMemberID(""), "-")
			}
			mem = &cmember{id: id, assigned: Assignment{}, pending: Assignment{}, state: MemberStable}
			cg.members[id] = mem
			cg.target[id] = Assignment{}
			newMember = true
		default:
			// A known member rejoining (it was fenced or lost our
			// answer): it starts over from an empty assignment and gets
			// its target back as partitions are free.
			cg.setOwned(mem, Assignment{}, Assignment{})
			mem.epoch, mem.prevEpoch, mem.state = 0, 0, MemberStable
		}
	default:
		switch {
		case mem == nil:
			return hbFail(fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID), req)
		case e > mem.epoch:
			return hbFail(fmt.Errorf("%w: epoch %d, the member is at %d", ErrFencedMemberEpoch, e, mem.epoch), req)
		case e < mem.epoch:
			// The member missed our last answer: it may go on only from
			// the epoch just before, owning nothing it was not given.
			if e != mem.prevEpoch || req.Owned == nil || !subset(normalize(req.Owned), mem.assigned) {
				return hbFail(fmt.Errorf("%w: epoch %d, the member is at %d", ErrFencedMemberEpoch, e, mem.epoch), req)
			}
		}
		if req.InstanceID != nil && (mem.instanceID == nil || *mem.instanceID != *req.InstanceID) {
			return hbFail(fmt.Errorf("%w: instance id %q does not match member %s", ErrFencedInstanceID, *req.InstanceID, mem.id), req)
		}
	}

	// Apply what the heartbeat changes.
	before := mem.record()
	if newMember || replaced != "" {
		before = nil
	}
	prev := mem.snapshot()
	subChanged := newMember
	if req.InstanceID != nil && !eqStrPtr(mem.instanceID, req.InstanceID) {
		mem.instanceID = req.InstanceID
		cg.static[*req.InstanceID] = mem.id
	}
	if req.RackID != nil {
		mem.rackID = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, mem.names) {
			mem.names, subChanged = names, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		re := req.SubscribedTopicRegex
		if *re == "" {
			re = nil // Kafka: an empty regex clears it
		}
		if !eqStrPtr(re, mem.regex) {
			mem.regex, subChanged = re, true
		}
	}
	if req.ServerAssignor != nil && !eqStrPtr(req.ServerAssignor, mem.assignor) {
		mem.assignor, subChanged = req.ServerAssignor, true
	}
	if req.RebalanceTimeout >= 0 {
		mem.rebalance = req.RebalanceTimeout
	}
	if req.MemberEpoch == JoinEpoch || req.ClientID != "" {
		mem.clientID, mem.clientHost = req.ClientID, req.ClientHost
	}
	mem.deadline = now.Add(g.m.cfg.ConsumerSessionTimeout)
	after := mem.record()
	if before == nil || !sameMemberRecord(before, after) {
		kvs = append(kvs, g.m.crec.member(g.id, mem.id, after))
	}
	if replaced != "" {
		kvs = append(kvs, g.m.crec.targetMember(g.id, mem.id, cg.target[mem.id], false))
	}

	// A new member, a changed subscription or changed topic metadata
	// makes the target out of date.
	ts := r.groupTopics(cg)
	h := metadataHash(ts)
	if !cg.hashKnown {
		// After a restore: the loaded target is good if it covers the
		// subscribed partitions exactly.
		cg.hashKnown, cg.subHash = true, h
		if !covers(cg.target, ts) {
			subChanged = true
		}
	}
	if h != cg.subHash {
		cg.subHash, subChanged = h, true
	}
	if subChanged || (replaced == "" && newMember) {
		kvs = append(kvs, g.bumpEpoch())
	}
	if cg.epoch > cg.assignEpoch {
		tkvs, err := g.computeTarget(r)
		if err != nil {
			return hbFail(err, req)
		}
		kvs = append(kvs, tkvs...)
	}

	var owned Assignment
	if req.Owned != nil {
		owned = normalize(req.Owned)
	}
	g.reconcile(mem, owned, now)
	if newMember || replaced != "" || !prev.same(mem) {
		kvs = append(kvs, g.m.crec.current(g.id, mem.id, mem.assignmentRecord()))
	}
	g.syncConsumerState(now)

	resp := ConsumerHeartbeatResponse{
		MemberID:          mem.id,
		MemberEpoch:       mem.epoch,
		HeartbeatInterval: g.m.cfg.ConsumerHeartbeatInterval,
	}
	// Kafka sends the assignment when it changed and on a full request
	// (every field set, as after a client-side error); we also send it
	// when the member reports owning something else.
	full := req.RebalanceTimeout >= 0 && req.Owned != nil && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil)
	if full || !equalAssignment(prev.assigned, mem.assigned) || (owned != nil && !equalAssignment(owned, mem.assigned)) {
		resp.Assignment, resp.HasAssignment = cloneAssignment(mem.assigned), true
	}
	return g.answerAfter(kvs, resp)
}

// answerAfter resolves resp once kvs are durable (at once when there are
// none).
func (g *group) answerAfter(kvs []statelog.KV, resp ConsumerHeartbeatResponse) *Future[ConsumerHeartbeatResponse] {
	cg := g.consumer
	if len(kvs) == 0 && !cg.last.pending() {
		return resolved(resp)
	}
	d := cg.last
	if len(kvs) > 0 {
		d = watch(g.append(kvs))
		cg.last = d
	}
	return whenDurable(d, resp, func(err error) ConsumerHeartbeatResponse {
		return ConsumerHeartbeatResponse{Err: err, MemberID: resp.MemberID, MemberEpoch: resp.MemberEpoch}
	})
}

// consumerLeave handles epochs -1 (leave) and -2 (static member away).
func (g *group) consumerLeave(req *ConsumerHeartbeatRequest, kvs []statelog.KV, now time.Time) *Future[ConsumerHeartbeatResponse] {
	cg := g.consumer
	mem := cg.members[req.MemberID]
	if mem == nil && req.InstanceID != nil {
		mem = cg.members[cg.static[*req.InstanceID]]
		if mem != nil && mem.id != req.MemberID {
			return hbFail(fmt.Errorf("%w: instance id %q belongs to member %s", ErrFencedInstanceID, *req.InstanceID, mem.id), req)
		}
	}
	if mem == nil {
		return hbFail(fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID), req)
	}
	resp := ConsumerHeartbeatResponse{MemberID: mem.id, MemberEpoch: req.MemberEpoch, HeartbeatInterval: g.m.cfg.ConsumerHeartbeatInterval}
	if req.MemberEpoch == StaticLeaveEpoch && mem.instanceID != nil {
		// It keeps its partitions (nobody else gets them) until it comes
		// back or its session expires.
		if mem.epoch != StaticLeaveEpoch {
			// What it was revoking it has let go of by shutting down.
			cg.setOwned(mem, mem.assigned, Assignment{})
			mem.prevEpoch, mem.epoch = mem.epoch, StaticLeaveEpoch
			kvs = append(kvs, g.m.crec.current(g.id, mem.id, mem.assignmentRecord()))
		}
		mem.deadline = now.Add(g.m.cfg.ConsumerSessionTimeout)
		return g.answerAfter(kvs, resp)
	}
	kvs = append(kvs, g.removeConsumerMember(mem)...)
	kvs = append(kvs, g.bumpEpoch())
	g.syncConsumerState(now)
	resp.MemberEpoch = LeaveEpoch
	return g.answerAfter(kvs, resp)
}

// replaceStaticConsumer hands a static member that left temporarily over
// to its successor: same assignment, same target, new member id.
func (g *group) replaceStaticConsumer(old *cmember, newID string) *cmember {
	cg := g.consumer
	if newID == "" {
		newID = strings.TrimPrefix(newMemberID(""), "-")
	}
	mem := *old
	mem.id = newID
	mem.epoch = old.prevEpoch // back where it was before leaving
	assigned, pending := old.assigned, old.pending
	cg.setOwned(old, nil, nil)
	delete(cg.members, old.id)
	cg.members[newID] = &mem
	mem.assigned, mem.pending = nil, nil
	cg.setOwned(&mem, assigned, pending)
	cg.target[newID] = cg.target[old.id]
	delete(cg.target, old.id)
	cg.static[*mem.instanceID] = newID
	return &mem
}

// removeStaticRecords are the tombstones of a replaced static member; its
// successor's records follow.
func (g *group) removeStaticRecords(oldID string) []statelog.KV {
	return []statelog.KV{
		g.m.crec.current(g.id, oldID, nil),
		g.m.crec.targetMember(g.id, oldID, nil, true),
		g.m.crec.member(g.id, oldID, nil),
	}
}

// ConsumerDescribe answers ConsumerGroupDescribe.
func (m *Manager) ConsumerDescribe(groupIDs []string) []ConsumerGroupDescription {
	out := make([]ConsumerGroupDescription, len(groupIDs))
	for i, id := range groupIDs {
		d := ConsumerGroupDescription{Group: id, State: ConsumerDead}
		if id == "" {
			d.Err = ErrInvalidGroupID
			out[i] = d
			continue
		}
		g, err := m.lockGroup(id, false)
		switch {
		case err != nil:
			d.Err = err
		case g == nil:
			d.Err = fmt.Errorf("%w: group %s not found", ErrGroupIDNotFound, id)
		default:
			if g.consumer == nil {
				d.Err = fmt.Errorf("%w: %s is not a consumer group", ErrGroupIDNotFound, id)
			} else {
				d = g.describeConsumer()
			}
			g.mu.Unlock()
		}
		out[i] = d
	}
	return out
}

func (g *group) describeConsumer() ConsumerGroupDescription {
	cg := g.consumer
	assignor := cg.assignor
	if assignor == "" {
		assignor = g.chooseAssignor()
	}
	d := ConsumerGroupDescription{
		Group: g.id, State: cg.state(), GroupEpoch: cg.epoch, AssignmentEpoch: cg.assignEpoch, Assignor: assignor,
	}
	for _, id := range cg.memberIDs() {
		mem := cg.members[id]
		d.Members = append(d.Members, ConsumerMemberDescription{
			MemberID: id, InstanceID: mem.instanceID, RackID: mem.rackID, MemberEpoch: mem.epoch,
			ClientID: mem.clientID, ClientHost: mem.clientHost,
			SubscribedTopicNames: slices.Clone(mem.names), SubscribedTopicRegex: mem.regex,
			Assignment: cloneAssignment(mem.assigned), TargetAssignment: cloneAssignment(cg.target[id]),
		})
	}
	return d
}

// describeConsumerClassic is DescribeGroups for a consumer group: the member
// subscription and assignment as the classic consumer protocol's v0 blobs,
// so classic tools can read them.
func (g *group) describeConsumerClassic() GroupDescription {
	cg := g.consumer
	topics := g.m.topicView()
	d := GroupDescription{Group: g.id, State: string(cg.state()), ProtocolType: ConsumerProtocolType, Protocol: cg.assignor}
	if d.Protocol == "" {
		d.Protocol = g.chooseAssignor()
	}
	var r *resolver
	if topics != nil {
		r = &resolver{topics: topics, cache: &cg.regexes}
	}
	for _, id := range cg.memberIDs() {
		mem := cg.members[id]
		var subs []string
		if r != nil {
			for _, t := range r.memberTopics(mem) {
				subs = append(subs, t.Name)
			}
		} else {
			subs = mem.names
		}
		// ConsumerProtocolSubscription v0: version, topics, null user data.
		md := binary.BigEndian.AppendUint16(nil, 0)
		md = binary.BigEndian.AppendUint32(md, uint32(len(subs)))
		for _, s := range subs {
			md = appendString(md, s)
		}
		md = binary.BigEndian.AppendUint32(md, 0xffffffff)
		// ConsumerProtocolAssignment v0: version, [topic, [partition]], null user data.
		names, parts := namesOf(mem.assigned, topics)
		as := binary.BigEndian.AppendUint16(nil, 0)
		as = binary.BigEndian.AppendUint32(as, uint32(len(names)))
		for _, n := range names {
			as = appendString(as, n)
			as = binary.BigEndian.AppendUint32(as, uint32(len(parts[n])))
			for _, p := range parts[n] {
				as = binary.BigEndian.AppendUint32(as, uint32(p))
			}
		}
		as = binary.BigEndian.AppendUint32(as, 0xffffffff)
		d.Members = append(d.Members, MemberDescription{
			MemberID: id, InstanceID: mem.instanceID, ClientID: mem.clientID, ClientHost: mem.clientHost,
			Metadata: md, Assignment: as,
		})
	}
	return d
}

// ListFiltered answers ListGroups v5: states and types (GroupTypeClassic,
// GroupTypeConsumer; case-insensitive) filter when non-empty.
func (m *Manager) ListFiltered(states, types []string) ([]GroupListing, error) {
	all, err := m.List(states)
	if len(types) == 0 {
		return all, err
	}
	out := all[:0]
	for _, l := range all {
		if slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, l.GroupType) }) {
			out = append(out, l)
		}
	}
	return out, err
}
