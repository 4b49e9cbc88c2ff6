package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// cmember is one member of a consumer (KIP-848) group.
type cmember struct {
	id         string
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string
	names      []string // subscribed topic names, sorted
	regex      *string
	assignor   *string // the ServerAssignor it asked for
	rebalance  time.Duration

	epoch     int32 // member epoch; StaticLeaveEpoch while a static member is away
	prevEpoch int32
	state     int8
	assigned  Assignment // what it owns (or may own) now
	pending   Assignment // what it was asked to give up and has not yet

	deadline       time.Time // session expiry
	revokeDeadline time.Time // while MemberUnrevokedPartitions
}

// cgroup is the consumer-protocol state of a group (group.consumer). The
// group's classic fields stay unused, except state, which is Empty
// without members and Stable with some, so that offsets expiry and
// DeleteGroups treat both kinds alike.
type cgroup struct {
	epoch       int32 // group epoch
	assignEpoch int32 // epoch of the target assignment
	assignor    string
	target      map[string]Assignment
	members     map[string]*cmember
	static      map[string]string // instance id -> member id
	// owners indexes assigned and pending-revocation partitions by
	// member: a partition may go to a member only when no other member
	// holds it.
	owners map[tpKey]string
	// subHash is metadataHash of the subscribed topics the target was
	// computed for; hashKnown is false after a restore until the first
	// heartbeat checks the loaded target against the topics.
	subHash   uint64
	hashKnown bool
	regexes   regexCache
	// last is the group's latest heartbeat append: an answer that writes
	// nothing still waits for it, so no member acts on state a new
	// coordinator might not load (Kafka defers such answers the same way).
	last *durable
}

// durable is one append's outcome, readable by any number of waiters.
type durable struct {
	done chan struct{}
	err  error
}

func watch(w statelog.Waiter) *durable {
	d := &durable{done: make(chan struct{})}
	go func() {
		d.err = appendErr(w.Wait())
		close(d.done)
	}()
	return d
}

// whenDurable resolves to resp once d is done, or to failed(err) when its
// append failed.
func whenDurable[T any](d *durable, resp T, failed func(error) T) *Future[T] {
	fut := newFuture[T]()
	go func() {
		<-d.done
		if d.err != nil {
			resp = failed(d.err)
		}
		fut.Resolve(resp)
	}()
	return fut
}

func (d *durable) pending() bool {
	if d == nil {
		return false
	}
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

func newCgroup() *cgroup {
	return &cgroup{
		target:    make(map[string]Assignment),
		members:   make(map[string]*cmember),
		static:    make(map[string]string),
		owners:    make(map[tpKey]string),
		hashKnown: true,
	}
}

func (cg *cgroup) memberIDs() []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// setOwned replaces mem's assigned and pending sets, keeping the owners
// index in step.
func (cg *cgroup) setOwned(mem *cmember, assigned, pending Assignment) {
	drop := func(k tpKey) {
		if cg.owners[k] == mem.id {
			delete(cg.owners, k)
		}
	}
	mem.assigned.each(drop)
	mem.pending.each(drop)
	mem.assigned, mem.pending = assigned, pending
	add := func(k tpKey) { cg.owners[k] = mem.id }
	mem.assigned.each(add)
	mem.pending.each(add)
}

// free reports whether no member other than id holds k.
func (cg *cgroup) free(k tpKey, id string) bool {
	o, ok := cg.owners[k]
	return !ok || o == id
}

// state is the group state Kafka reports.
func (cg *cgroup) state() ConsumerGroupState {
	if len(cg.members) == 0 {
		return ConsumerEmpty
	}
	if cg.epoch > cg.assignEpoch {
		return ConsumerAssigning
	}
	for _, mem := range cg.members {
		if mem.epoch != cg.assignEpoch || mem.state != MemberStable {
			return ConsumerReconciling
		}
	}
	return ConsumerStable
}

// syncState keeps the classic state field in step (see cgroup).
func (g *group) syncConsumerState(now time.Time) {
	if len(g.consumer.members) == 0 {
		if g.state != Empty {
			g.state, g.stateTime = Empty, now
		}
		return
	}
	g.state = Stable
}

func (mem *cmember) record() *ConsumerMemberRecord {
	return &ConsumerMemberRecord{
		InstanceID:           mem.instanceID,
		RackID:               mem.rackID,
		ClientID:             mem.clientID,
		ClientHost:           mem.clientHost,
		SubscribedTopicNames: slices.Clone(mem.names),
		SubscribedTopicRegex: mem.regex,
		RebalanceTimeoutMs:   int32(min(mem.rebalance/time.Millisecond, 1<<31-1)),
		ServerAssignor:       mem.assignor,
	}
}

func (mem *cmember) assignmentRecord() *ConsumerAssignmentRecord {
	return &ConsumerAssignmentRecord{
		MemberEpoch:         mem.epoch,
		PreviousMemberEpoch: mem.prevEpoch,
		State:               mem.state,
		Assigned:            cloneAssignment(mem.assigned),
		PendingRevocation:   cloneAssignment(mem.pending),
	}
}

func eqStrPtr(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func sameMemberRecord(a, b *ConsumerMemberRecord) bool {
	return eqStrPtr(a.InstanceID, b.InstanceID) && eqStrPtr(a.RackID, b.RackID) &&
		a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames) &&
		eqStrPtr(a.SubscribedTopicRegex, b.SubscribedTopicRegex) &&
		a.RebalanceTimeoutMs == b.RebalanceTimeoutMs && eqStrPtr(a.ServerAssignor, b.ServerAssignor)
}

type reconcileState struct {
	epoch, prevEpoch int32
	state            int8
	assigned         Assignment
	pending          Assignment
}

func (mem *cmember) snapshot() reconcileState {
	return reconcileState{mem.epoch, mem.prevEpoch, mem.state, mem.assigned, mem.pending}
}

func (s reconcileState) same(mem *cmember) bool {
	return s.epoch == mem.epoch && s.prevEpoch == mem.prevEpoch && s.state == mem.state &&
		equalAssignment(s.assigned, mem.assigned) && equalAssignment(s.pending, mem.pending)
}

// reconcile moves mem towards its target (Kafka's CurrentAssignmentBuilder).
// owned is what the member reported (nil: unchanged).
func (g *group) reconcile(mem *cmember, owned Assignment, now time.Time) {
	cg := g.consumer
	switch mem.state {
	case MemberUnrevokedPartitions:
		// It advances once it no longer owns what it must give up.
		if owned == nil || intersects(owned, mem.pending) {
			return
		}
	case MemberStable:
		if mem.epoch == cg.assignEpoch {
			return
		}
	}
	g.computeNext(mem, now)
}

func (g *group) computeNext(mem *cmember, now time.Time) {
	cg := g.consumer
	target := cg.target[mem.id]
	var kept, revoke, add []tpKey
	mem.assigned.each(func(k tpKey) {
		if target.has(k) {
			kept = append(kept, k)
		} else {
			revoke = append(revoke, k)
		}
	})
	if len(revoke) > 0 {
		// Nothing new until the member confirms the revocation: it keeps
		// its epoch and holds the revoked partitions until then.
		cg.setOwned(mem, assignmentOf(kept), assignmentOf(revoke))
		mem.state = MemberUnrevokedPartitions
		mem.revokeDeadline = now.Add(g.revokeTimeout(mem))
		return
	}
	unreleased := false
	target.each(func(k tpKey) {
		if mem.assigned.has(k) {
			return
		}
		if cg.free(k, mem.id) {
			add = append(add, k)
		} else {
			unreleased = true
		}
	})
	cg.setOwned(mem, assignmentOf(append(kept, add...)), Assignment{})
	if mem.epoch != cg.assignEpoch {
		mem.prevEpoch, mem.epoch = mem.epoch, cg.assignEpoch
	}
	mem.revokeDeadline = time.Time{}
	if unreleased {
		mem.state = MemberUnreleasedPartitions
	} else {
		mem.state = MemberStable
	}
}

// removeConsumerMember drops mem, frees its partitions and returns its
// tombstones (current assignment, target, metadata), Kafka's order. The
// caller bumps the group epoch.
func (g *group) removeConsumerMember(mem *cmember) []statelog.KV {
	cg := g.consumer
	cg.setOwned(mem, nil, nil)
	delete(cg.members, mem.id)
	delete(cg.target, mem.id)
	if mem.instanceID != nil && cg.static[*mem.instanceID] == mem.id {
		delete(cg.static, *mem.instanceID)
	}
	return []statelog.KV{
		g.m.crec.current(g.id, mem.id, nil),
		g.m.crec.targetMember(g.id, mem.id, nil, true),
		g.m.crec.member(g.id, mem.id, nil),
	}
}

// bumpEpoch starts a new group epoch and returns its record.
func (g *group) bumpEpoch() statelog.KV {
	g.consumer.epoch++
	return g.m.crec.groupMeta(g.id, g.consumer.epoch, false)
}

// consumerTombstones are the records that delete a consumer group's
// state (not its offsets): members left, target metadata, group epoch.
func (g *group) consumerTombstones() []statelog.KV {
	cg := g.consumer
	var kvs []statelog.KV
	for _, id := range cg.memberIDs() {
		kvs = append(kvs, g.removeConsumerMember(cg.members[id])...)
	}
	return append(kvs, g.m.crec.targetMeta(g.id, 0, true), g.m.crec.groupMeta(g.id, 0, true))
}

// consumerTick expires sessions (static members away included) and fences
// members that did not revoke in time.
func (g *group) consumerTick(now time.Time) {
	cg := g.consumer
	var kvs []statelog.KV
	for _, id := range cg.memberIDs() {
		mem := cg.members[id]
		expired := !now.Before(mem.deadline)
		stuck := mem.state == MemberUnrevokedPartitions && !mem.revokeDeadline.IsZero() && !now.Before(mem.revokeDeadline)
		if expired || stuck {
			kvs = append(kvs, g.removeConsumerMember(mem)...)
		}
	}
	if len(kvs) == 0 {
		return
	}
	kvs = append(kvs, g.bumpEpoch())
	g.syncConsumerState(now)
	// Nobody waits for these (as for classic expiry: a lost record only
	// brings the member back after a move, where it expires again), but
	// later answers do.
	cg.last = watch(g.append(kvs))
}

// restoreConsumer rebuilds a consumer group from its loaded records.
func (g *group) restoreConsumer(lc *LoadedConsumerGroup, now time.Time) {
	cg := newCgroup()
	cg.epoch, cg.assignEpoch = lc.GroupEpoch, lc.AssignmentEpoch
	cg.hashKnown = false
	g.consumer = cg
	g.protocolType = ConsumerProtocolType
	for id, lm := range lc.Members {
		md := lm.Metadata
		mem := &cmember{
			id: id, instanceID: md.InstanceID, rackID: md.RackID,
			clientID: md.ClientID, clientHost: md.ClientHost,
			names: slices.Clone(md.SubscribedTopicNames), regex: md.SubscribedTopicRegex,
			assignor: md.ServerAssignor, rebalance: time.Duration(max(md.RebalanceTimeoutMs, 0)) * time.Millisecond,
			state: MemberStable, assigned: Assignment{}, pending: Assignment{},
			deadline: now.Add(g.m.cfg.ConsumerSessionTimeout),
		}
		slices.Sort(mem.names)
		cg.members[id] = mem
		if mem.instanceID != nil {
			cg.static[*mem.instanceID] = id
		}
		if c := lm.Current; c != nil {
			mem.epoch, mem.prevEpoch = c.MemberEpoch, c.PreviousMemberEpoch
			mem.state = c.State
			if mem.state != MemberUnrevokedPartitions && mem.state != MemberUnreleasedPartitions {
				mem.state = MemberStable
			}
			if mem.state == MemberUnrevokedPartitions {
				mem.revokeDeadline = now.Add(g.revokeTimeout(mem))
			}
			// A partition two records both claim stays with the first
			// member seen: never two owners, whatever the log says.
			var as, ps []tpKey
			normalize(c.Assigned).each(func(k tpKey) {
				if _, taken := cg.owners[k]; !taken {
					as = append(as, k)
				}
			})
			normalize(c.PendingRevocation).each(func(k tpKey) {
				if _, taken := cg.owners[k]; !taken {
					ps = append(ps, k)
				}
			})
			cg.setOwned(mem, assignmentOf(as), assignmentOf(ps))
		}
	}
	for id, a := range lc.Target {
		if cg.members[id] != nil {
			cg.target[id] = normalize(a)
		}
	}
	for id := range cg.members {
		if cg.target[id] == nil {
			cg.target[id] = Assignment{}
		}
	}
	if len(cg.members) > 0 {
		g.state = Stable
	}
}

// toClassic converts an empty consumer group for a classic JoinGroup,
// per Config.MigrationPolicy; the group's consumer records get
// tombstones first, its offsets stay.
func (g *group) toClassic(memberID string) error {
	if len(g.consumer.members) > 0 {
		return fmt.Errorf("%w: %s is a consumer group with members", ErrInconsistentGroupProtocol, g.id)
	}
	if memberID != "" {
		// Only a first join converts: a member id cannot be ours.
		return fmt.Errorf("%w: %s", ErrUnknownMemberID, memberID)
	}
	if p := g.m.cfg.MigrationPolicy; p != "bidirectional" && p != "downgrade" {
		return fmt.Errorf("%w: %s is a consumer group and migration policy %q forbids downgrading it", ErrInconsistentGroupProtocol, g.id, p)
	}
	g.append(g.consumerTombstones())
	g.consumer = nil
	g.protocolType, g.protocol, g.leader = "", "", ""
	return nil
}

// isClassicInUse reports whether the group has classic state that a
// conversion would discard (anything beyond a fresh, empty group).
func (g *group) isClassicInUse() bool {
	return g.protocolType != "" || g.generation > 0 || len(g.offsets) > 0 || len(g.txns) > 0
}

// groupTombstones are the records that delete the group's own state (its
// offsets have their own): a GroupMetadata tombstone for a classic group,
// the consumer records' tombstones for a consumer group, the share
// records' for a share group.
func (g *group) groupTombstones() []statelog.KV {
	if g.consumer != nil {
		return g.consumerTombstones()
	}
	if g.share != nil {
		return g.shareTombstones()
	}
	return []statelog.KV{{Key: EncodeGroupKey(g.id)}}
}

// consumerSubscribed is the set of topic names the members subscribe to,
// regexes resolved; nil when the topic view is not set (assume all).
func (g *group) consumerSubscribed() map[string]bool {
	topics := g.m.topicView()
	if topics == nil {
		return nil
	}
	r := &resolver{topics: topics, cache: &g.consumer.regexes}
	set := make(map[string]bool)
	for _, mem := range g.consumer.members {
		for _, n := range mem.names {
			set[n] = true
		}
		if mem.regex != nil {
			for _, n := range r.regexTopics(*mem.regex) {
				set[n] = true
			}
		}
	}
	return set
}

// checkConsumerCommit applies KIP-848's OffsetCommit rules: the generation
// is the member epoch. A commit from an older epoch is accepted when the
// member still owns every committed partition (Kafka 4.3's relaxed rule:
// a member mid-reconciliation may commit what it still holds).
func (g *group) checkConsumerCommit(req *OffsetCommitRequest, now time.Time) error {
	cg := g.consumer
	if req.MemberID == "" && req.Generation < 0 {
		if len(cg.members) > 0 {
			return fmt.Errorf("%w: a simple commit to consumer group %s with members", ErrUnknownMemberID, g.id)
		}
		return nil
	}
	mem := cg.members[req.MemberID]
	if mem == nil {
		return fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID)
	}
	stale := func() error {
		err := ErrStaleMemberEpoch
		if req.Version < 9 {
			err = ErrIllegalGeneration
		}
		return fmt.Errorf("%w: epoch %d, the member is at %d", err, req.Generation, mem.epoch)
	}
	switch {
	case req.Generation == mem.epoch:
	case req.Generation < mem.epoch && req.Generation >= 0:
		topics := g.m.topicView()
		for _, o := range req.Offsets {
			var t TopicInfo
			ok := topics != nil
			if ok {
				t, ok = topics.TopicByName(o.Topic)
			}
			k := tpKey{t.ID, o.Partition}
			if !ok || !(mem.assigned.has(k) || mem.pending.has(k)) {
				return stale()
			}
		}
	default:
		return stale()
	}
	mem.deadline = now.Add(g.m.cfg.ConsumerSessionTimeout)
	return nil
}

// revokeTimeout is how long mem may take to give partitions up: its
// rebalance timeout, or the session timeout when it gave none (0), so a
// member is never fenced on the spot.
func (g *group) revokeTimeout(mem *cmember) time.Duration {
	if mem.rebalance > 0 {
		return mem.rebalance
	}
	return g.m.cfg.ConsumerSessionTimeout
}
