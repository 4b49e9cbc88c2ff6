package group

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

func commitFail(req *OffsetCommitRequest, err error) *Future[OffsetCommitResponse] {
	var r OffsetCommitResponse
	for _, o := range req.Offsets {
		r.Partitions = append(r.Partitions, PartitionError{Topic: o.Topic, Partition: o.Partition, Err: err})
	}
	return resolved(r)
}

// CommitOffsets answers OffsetCommit. A group member must name the current
// generation (zombies get ErrIllegalGeneration, strangers
// ErrUnknownMemberID); generation -1 is a "simple" commit, accepted only
// while the group is Empty (no group management in use). The future
// resolves when the commit records are durable; only then does OffsetFetch
// see them.
func (m *Manager) CommitOffsets(req OffsetCommitRequest) *Future[OffsetCommitResponse] {
	if req.Group == "" {
		return commitFail(&req, ErrInvalidGroupID)
	}
	g, err := m.lockGroup(req.Group, req.Generation < 0)
	if err != nil {
		return commitFail(&req, err)
	}
	if g == nil {
		// Kafka's answer: a generation for a group we have never seen is
		// from a coordinator that lost it, or from a confused client.
		return commitFail(&req, ErrIllegalGeneration)
	}
	defer g.mu.Unlock()
	return g.commit(&req, m.clock.Now())
}

func (g *group) commit(req *OffsetCommitRequest, now time.Time) *Future[OffsetCommitResponse] {
	if g.share != nil {
		return commitFail(req, fmt.Errorf("%w: %s is a share group", ErrGroupIDNotFound, g.id))
	}
	if g.consumer != nil {
		if err := g.checkConsumerCommit(req, now); err != nil {
			return commitFail(req, err)
		}
	} else if err := g.checkInstance(req.InstanceID, req.MemberID); err != nil {
		return commitFail(req, err)
	}
	if g.consumer == nil && (req.Generation >= 0 || g.state != Empty) {
		mem := g.members[req.MemberID]
		switch {
		case mem == nil:
			return commitFail(req, ErrUnknownMemberID)
		case req.Generation != g.generation:
			return commitFail(req, ErrIllegalGeneration)
		case g.state == CompletingRebalance:
			// The member knows the new generation but not its assignment
			// yet; committing now could commit for partitions it is about
			// to lose.
			return commitFail(req, ErrRebalanceInProgress)
		}
		mem.deadline = now.Add(mem.session)
	}
	g.seq++
	seq := g.seq
	ts := now.UnixMilli()
	resp := OffsetCommitResponse{Partitions: make([]PartitionError, len(req.Offsets))}
	var kvs []statelog.KV
	var vals []OffsetValue
	var idx []int
	for i, o := range req.Offsets {
		resp.Partitions[i] = PartitionError{Topic: o.Topic, Partition: o.Partition}
		if len(o.Metadata) > g.m.cfg.MaxOffsetMetadataBytes {
			resp.Partitions[i].Err = ErrOffsetMetadataTooLarge
			continue
		}
		v := OffsetValue{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestamp: ts}
		kvs = append(kvs, statelog.KV{
			Key:   EncodeOffsetKey(OffsetKey{Group: g.id, Topic: o.Topic, Partition: o.Partition}),
			Value: EncodeOffsetValue(v),
		})
		vals = append(vals, v)
		idx = append(idx, i)
	}
	if len(kvs) == 0 {
		return resolved(resp)
	}
	w := g.append(kvs)
	g.inflight++
	fut := newFuture[OffsetCommitResponse]()
	go func() {
		err := appendErr(w.Wait())
		g.mu.Lock()
		g.inflight--
		for j, i := range idx {
			if err != nil {
				resp.Partitions[i].Err = err
				continue
			}
			tp := TopicPartition{req.Offsets[i].Topic, req.Offsets[i].Partition}
			g.applyCommit(tp, vals[j], seq)
		}
		if g.inflight == 0 {
			g.deletedAt = nil
		}
		g.mu.Unlock()
		fut.Resolve(resp)
	}()
	return fut
}

// applyCommit installs a durable commit unless a later commit or deletion
// of the same partition got there first: completions of different appends
// may run in any order, the log order (seq) is what counts.
func (g *group) applyCommit(tp TopicPartition, v OffsetValue, seq uint64) {
	if seq <= g.deletedAt[tp] {
		return
	}
	if e := g.offsets[tp]; e != nil && e.seq > seq {
		return
	}
	g.offsets[tp] = &offsetEntry{v: v, seq: seq}
}

// deleteOffset removes tp, committed and pending in any transaction, now
// and returns its tombstone. Deletions apply at once (Kafka does the
// same): the worst a lost tombstone does is bring the offset back after a
// coordinator move.
func (g *group) deleteOffset(tp TopicPartition, seq uint64) statelog.KV {
	delete(g.offsets, tp)
	g.dropPending(tp)
	if g.inflight > 0 {
		if g.deletedAt == nil {
			g.deletedAt = make(map[TopicPartition]uint64)
		}
		g.deletedAt[tp] = seq
	}
	return statelog.KV{Key: EncodeOffsetKey(OffsetKey{Group: g.id, Topic: tp.Topic, Partition: tp.Partition})}
}

// FetchOffsets answers OffsetFetch without require_stable: the listed
// partitions (Offset -1 where nothing is committed) or, with partitions
// nil, every committed partition sorted by topic and partition. Pending
// transactional offsets are not seen.
func (m *Manager) FetchOffsets(groupID string, partitions []TopicPartition) ([]FetchedOffset, error) {
	return m.FetchOffsetsOpts(groupID, partitions, FetchOptions{})
}

// FetchOffsetsOpts is FetchOffsets with the request's options. With
// RequireStable, a partition for which some transaction has a pending
// offset answers ErrUnstableOffsetCommit (Offset -1) instead of its
// committed offset, as Kafka does per partition; listing all partitions
// (nil) covers the committed ones, pending-only partitions are not listed.
func (m *Manager) FetchOffsetsOpts(groupID string, partitions []TopicPartition, opts FetchOptions) ([]FetchedOffset, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	g, err := m.lockGroup(groupID, false)
	if err != nil {
		return nil, err
	}
	var out []FetchedOffset
	if g == nil {
		for _, tp := range partitions {
			out = append(out, FetchedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1})
		}
		return out, nil
	}
	defer g.mu.Unlock()
	if g.consumer != nil && opts.MemberID != "" && opts.MemberEpoch >= 0 {
		mem := g.consumer.members[opts.MemberID]
		switch {
		case mem == nil:
			return nil, fmt.Errorf("%w: %s", ErrUnknownMemberID, opts.MemberID)
		case mem.epoch != opts.MemberEpoch:
			return nil, fmt.Errorf("%w: epoch %d, the member is at %d", ErrStaleMemberEpoch, opts.MemberEpoch, mem.epoch)
		}
	}
	if partitions == nil {
		for tp := range g.offsets {
			partitions = append(partitions, tp)
		}
		slices.SortFunc(partitions, func(a, b TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition) - int(b.Partition)
		})
	}
	for _, tp := range partitions {
		f := FetchedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1}
		if opts.RequireStable && g.hasPending(tp) {
			f.Err = ErrUnstableOffsetCommit
		} else if e := g.offsets[tp]; e != nil {
			f.Offset, f.LeaderEpoch, f.Metadata = e.v.Offset, e.v.LeaderEpoch, e.v.Metadata
		}
		out = append(out, f)
	}
	return out, nil
}

// DeleteOffsets answers OffsetDelete (KIP-496). An Empty group loses any
// listed offset; a consumer group with members keeps the offsets of topics
// its members subscribe to (ErrGroupSubscribedToTopic for those) because
// deleting them would reset a live consumer; any other group with members
// refuses with ErrNonEmptyGroup. A deleted partition's pending
// transactional offsets go too (the tombstone is written for them even
// with nothing committed), so the transaction's commit cannot revive it,
// as in Kafka.
func (m *Manager) DeleteOffsets(groupID string, partitions []TopicPartition) *Future[OffsetDeleteResponse] {
	fail := func(err error) *Future[OffsetDeleteResponse] { return resolved(OffsetDeleteResponse{Err: err}) }
	if groupID == "" {
		return fail(ErrInvalidGroupID)
	}
	g, err := m.lockGroup(groupID, false)
	if err != nil {
		return fail(err)
	}
	if g == nil {
		return fail(ErrGroupIDNotFound)
	}
	defer g.mu.Unlock()
	var subscribed func(string) bool
	switch {
	case g.state == Empty:
		subscribed = func(string) bool { return false }
	case g.consumer != nil:
		topics := g.consumerSubscribed()
		subscribed = func(t string) bool { return topics == nil || topics[t] }
	case g.protocolType == ConsumerProtocolType:
		topics, ok := g.subscribedTopics()
		// Undecodable subscriptions: assume the worst, a live consumer.
		subscribed = func(t string) bool { return !ok || topics[t] }
	default:
		return fail(ErrNonEmptyGroup)
	}
	g.seq++
	resp := OffsetDeleteResponse{Partitions: make([]PartitionError, len(partitions))}
	var kvs []statelog.KV
	for i, tp := range partitions {
		resp.Partitions[i] = PartitionError{Topic: tp.Topic, Partition: tp.Partition}
		if subscribed(tp.Topic) {
			resp.Partitions[i].Err = ErrGroupSubscribedToTopic
			continue
		}
		if g.offsets[tp] != nil || g.hasPending(tp) {
			kvs = append(kvs, g.deleteOffset(tp, g.seq))
		}
	}
	if len(kvs) == 0 {
		return resolved(resp)
	}
	w := g.append(kvs)
	fut := newFuture[OffsetDeleteResponse]()
	go func() {
		if err := appendErr(w.Wait()); err != nil {
			resp = OffsetDeleteResponse{Err: err}
		}
		fut.Resolve(resp)
	}()
	return fut
}

// ConsumerProtocolType is the protocol type of Kafka consumers; only for it
// do we understand member metadata (the subscription).
const ConsumerProtocolType = "consumer"

// subscribedTopics decodes the members' ConsumerProtocolSubscription
// (every version starts with version:int16 then topics:[string]) for the
// chosen protocol, or every protocol while none is chosen yet.
func (g *group) subscribedTopics() (map[string]bool, bool) {
	topics := make(map[string]bool)
	for _, mem := range g.members {
		for _, p := range mem.protocols {
			if g.protocol != "" && p.Name != g.protocol {
				continue
			}
			r := reader{b: p.Metadata}
			r.int16()
			n := r.int32()
			if r.err != nil || n < 0 || int(n) > len(r.b)/2 {
				return nil, false
			}
			for range n {
				topics[r.string()] = true
			}
			if r.err != nil {
				return nil, false
			}
		}
	}
	return topics, true
}

// expireOffsets drops offsets past retention, only while the group is
// Empty: a live group keeps its offsets however old. Retention counts from
// when the group became empty, or from the commit if that is later (a
// simple group commits while Empty), so nothing expires sooner than
// OffsetsRetention after it was written. An Empty group left with no
// offsets is deleted, as Kafka does.
//
// Open transactions hold expiry back, as in Kafka: an offset with a
// pending transactional commit does not expire (the tombstone would drop
// the pending offset with it), and a group with any open transaction is
// not deleted even with no offsets left. The transaction coordinator
// always ends a transaction, so this holds only until its marker.
func (g *group) expireOffsets(now time.Time) {
	if g.state != Empty {
		return
	}
	g.seq++
	var kvs []statelog.KV
	for tp, e := range g.offsets {
		if g.hasPending(tp) {
			continue
		}
		base := time.UnixMilli(e.v.CommitTimestamp)
		if g.stateTime.After(base) {
			base = g.stateTime
		}
		if now.Sub(base) >= g.m.cfg.OffsetsRetention {
			kvs = append(kvs, g.deleteOffset(tp, g.seq))
		}
	}
	if len(g.offsets) == 0 && g.inflight == 0 && len(g.pending) == 0 && len(g.txns) == 0 {
		kvs = append(kvs, g.groupTombstones()...)
		g.state = Dead
		g.m.forget(g)
	}
	if len(kvs) > 0 {
		g.append(kvs)
	}
}

// delete writes tombstones for an Empty group and kills it. Partitions
// with only pending transactional offsets get a tombstone too, which
// drops them (Kafka's DeleteGroups does the same): the group is gone
// whatever its open transactions later decide.
func (g *group) delete() statelog.Waiter {
	g.seq++
	tps := make(map[TopicPartition]bool, len(g.offsets))
	for tp := range g.offsets {
		tps[tp] = true
	}
	for _, t := range g.txns {
		for tp := range t.offsets {
			tps[tp] = true
		}
	}
	var kvs []statelog.KV
	for tp := range tps {
		kvs = append(kvs, g.deleteOffset(tp, g.seq))
	}
	kvs = append(kvs, g.groupTombstones()...)
	g.kill(ErrCoordinatorNotAvailable)
	g.m.forget(g)
	return g.append(kvs)
}
