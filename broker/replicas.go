package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath"
	"github.com/ringlog/ringlog/replication"
)

// This file drives partition replication on this broker (package
// replication holds the rules; this is the glue):
//
//   - reconcile calls syncPartition for every hosted partition: RF=1
//     partitions keep the engine's own HW; for RF>1 the engine's HW is
//     handed to replication, and this broker becomes the leader
//     (LeaderState, epoch stamped into the log's epoch cache) or a
//     follower (a Fetcher per leader broker over the peer client).
//   - Leader side: follower fetches go through LeaderState.OnFollowerFetch
//     (netpath's Fetch handler calls FollowerFetch); local flushes
//     through OnLocalAppend (one watcher goroutine for all led
//     partitions, woken once per round of changes); Tick every
//     tickInterval. HW changes are set on the
//     log and advance the acks=all purgatory; AlterPartition proposals go
//     to the controller, each answered by exactly one OnAlterResult.
//   - Losing leadership fails the partition's acks=all waiters with
//     replication.ErrNotLeaderOrFollower.
//
// replicaManager is netpath.Replicas: the produce, fetch and list-offsets
// handlers reach replication only through that interface.

const tickInterval = 100 * time.Millisecond

type tpKey struct {
	topic string
	part  int32
}

// leaderPart is one partition this broker leads. mu serialises every call
// into st.
type leaderPart struct {
	m    *replicaManager
	tp   replication.TopicPartition
	part *engine.Partition
	stop chan struct{}

	mu  sync.Mutex
	st  *replication.LeaderState
	gen bool // false once replaced or dropped
	// reportedISR and reportedMin are the maximal ISR size and
	// min.insync.replicas last given to the purgatory (apply).
	reportedISR, reportedMin int
}

type replicaManager struct {
	s        *wireServer
	cfg      replication.Config
	purg     *replication.Purgatory
	fetchers *replication.Fetchers
	ctrl     replication.Controller
	throttle *replThrottle // throttle.go

	mu      sync.Mutex
	leaders map[tpKey]*leaderPart
	// follow holds the partitions handed to the fetchers, with the
	// topic id Follow keyed them by: Unfollow must name the same one.
	follow map[tpKey]replication.TopicPartition

	// local is registered with every led partition's log; localLoop
	// turns its wake-ups into OnLocalAppend for just the partitions that
	// changed, so a round of appends over many partitions costs one
	// goroutine wake-up, not one per partition.
	local   *engine.Waker
	localMu sync.Mutex
	byPart  map[*engine.Partition]*leaderPart
}

// EnableReplication turns on replication with cfg; call it before Start.
// Without it every partition behaves as RF=1 (its leader's log only).
func (s *wireServer) EnableReplication(cfg replication.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	m := &replicaManager{s: s, cfg: cfg, purg: replication.NewPurgatory(),
		leaders: map[tpKey]*leaderPart{}, follow: map[tpKey]replication.TopicPartition{},
		local: engine.NewTaggedWaker(), byPart: map[*engine.Partition]*leaderPart{}}
	// OnLocalAppend follows the log's durable end; the HW moves that
	// apply itself makes would only echo back here.
	m.local.SetWakeOn(engine.WakeOnDurable)
	m.fetchers = replication.NewFetchers(cfg, s.nodeID, s.peers, replication.RealClock{})
	m.throttle = newReplThrottle()
	m.fetchers.SetThrottle(&replication.FollowerThrottle{Limit: m.throttle.follower, Throttled: m.throttle.followerThrottled})
	s.repl = m
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		m.localLoop()
	}()
	go func() {
		defer s.wg.Done()
		m.purg.Run(s.ctx, replication.RealClock{})
	}()
	go func() {
		defer s.wg.Done()
		m.tickLoop()
	}()
	return nil
}

func (m *replicaManager) controller() replication.Controller {
	return replicationController{node: m.s.node}
}

func (m *replicaManager) tickLoop() {
	t := time.NewTicker(tickInterval)
	defer t.Stop()
	for {
		select {
		case <-m.s.ctx.Done():
			m.fetchers.Close()
			m.purg.Close()
			return
		case <-t.C:
		}
		m.mu.Lock()
		lps := make([]*leaderPart, 0, len(m.leaders))
		for _, lp := range m.leaders {
			lps = append(lps, lp)
		}
		m.mu.Unlock()
		// While the metadata is not fresh (the controller lease lapsed:
		// cut off from the quorum, or paused), the controller may have
		// fenced this broker and elected leaders it cannot hear of. Its
		// acks=all waiters could only be answered at the heal or their
		// timeouts; failed now with NOT_LEADER_OR_FOLLOWER, their clients
		// find the new leader, where idempotence drops a write that did
		// get replicated (leaderPartition refuses new requests meanwhile).
		// The epoch goes on: if the lease resumes unchanged, this broker
		// still leads. Only with leaderships: they exist once reconcile
		// ran, after the node was set (m.mu orders the two).
		var stale error
		if len(lps) > 0 {
			if err := m.s.node.Fresh(); err != nil {
				stale = fmt.Errorf("%w: %v", replication.ErrNotLeaderOrFollower, err)
			}
		}
		now := time.Now()
		failed := 0
		for _, lp := range lps {
			lp.mu.Lock()
			if lp.gen {
				m.apply(lp, lp.st.Tick(now))
				if stale != nil {
					failed += m.purg.FailWaiting(lp.tp, lp.st.LeaderEpoch(), stale)
				}
			}
			lp.mu.Unlock()
		}
		if failed > 0 {
			m.s.log.Warn("metadata not fresh: failed the acks=all waits of the partitions led here", "waits", failed, "why", stale)
		}
	}
}

// apply acts on a LeaderState update. The purgatory hears every change
// of what answers a waiter, the HW, the ISR counts or the low watermark
// (DeleteRecords): a waiter added
// below the HW (a deduplicated retry) is answered from the last report,
// which must be current. Unchanged reports are skipped: this runs for
// every partition of every follower fetch. lp.mu should be held.
func (m *replicaManager) apply(lp *leaderPart, u replication.Update) {
	if u.HWChanged {
		lp.part.SetHighWatermark(u.HW)
	}
	if isr, minISR := lp.st.MaximalISRSize(), lp.st.MinInsync(); u.HWChanged || isr != lp.reportedISR || minISR != lp.reportedMin {
		lp.reportedISR, lp.reportedMin = isr, minISR
		m.purg.Advance(lp.tp, lp.st.LeaderEpoch(), lp.st.HighWatermark(), isr, minISR)
	}
	if u.LowChanged {
		m.purg.AdvanceLow(lp.tp, lp.st.LeaderEpoch(), u.Low)
	}
	if u.Proposal != nil {
		prop := *u.Proposal
		go m.sendAlter(lp, prop)
	}
}

// sendAlter sends one AlterPartition and reports its outcome, whatever it
// is, with OnAlterResult.
func (m *replicaManager) sendAlter(lp *leaderPart, prop replication.AlterProposal) {
	ctx, cancel := context.WithTimeout(m.s.ctx, 5*time.Second)
	res, err := m.controller().AlterPartition(ctx, lp.tp, prop.LeaderEpoch, prop.PartitionEpoch, prop.NewISR)
	cancel()
	if err != nil {
		m.s.log.Info("AlterPartition", "topic", lp.tp.Topic, "partition", lp.tp.Partition, "leader_epoch", prop.LeaderEpoch, "isr", prop.NewISR, "err", err)
	} else {
		m.s.log.Info("ISR changed", "topic", lp.tp.Topic, "partition", lp.tp.Partition, "leader_epoch", prop.LeaderEpoch, "isr", res.ISR, "partition_epoch", res.PartitionEpoch)
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.gen {
		before := lp.st.ISR()
		m.apply(lp, lp.st.OnAlterResult(prop, res, err, time.Now()))
		m.s.isr.count(before, lp.st.ISR())
	}
}

// watchLocal starts feeding lp's own flushes into its HW: from now on
// every change of its log wakes localLoop, which applies OnLocalAppend.
// The first apply happens here, after the registration, so a change
// between the two is not lost.
func (m *replicaManager) watchLocal(lp *leaderPart) {
	m.localMu.Lock()
	m.byPart[lp.part] = lp
	m.localMu.Unlock()
	lp.part.Watch(m.local, m.local.Seen(lp.part))
	lp.mu.Lock()
	if lp.gen {
		m.apply(lp, lp.st.OnLocalAppend())
	}
	lp.mu.Unlock()
}

// unwatchLocal stops watching lp's log unless a newer leadership of the
// same log took the slot.
func (m *replicaManager) unwatchLocal(lp *leaderPart) {
	m.localMu.Lock()
	defer m.localMu.Unlock()
	if m.byPart[lp.part] == lp {
		delete(m.byPart, lp.part)
		lp.part.Unwatch(m.local)
	}
}

// localLoop applies OnLocalAppend to each led partition whose log
// changed, once per wake-up however many changed.
func (m *replicaManager) localLoop() {
	var changed []*engine.Partition
	for {
		select {
		case <-m.local.C():
		case <-m.s.ctx.Done():
			return
		}
		changed = m.local.Take(changed[:0])
		for i, part := range changed {
			changed[i] = nil
			m.localMu.Lock()
			lp := m.byPart[part]
			m.localMu.Unlock()
			if lp == nil {
				continue
			}
			lp.mu.Lock()
			if lp.gen {
				m.apply(lp, lp.st.OnLocalAppend())
			}
			lp.mu.Unlock()
		}
	}
}

func minInsync(cfg engine.TopicConfig) int {
	return max(int(cfg.MinInsyncReplicas), 1)
}

// syncPartition makes this broker leader, follower or neither of one
// hosted partition per the image. Called from reconcile (recMu held).
func (m *replicaManager) syncPartition(t metadata.Topic, idx int32, p metadata.Partition, part *engine.Partition, seen map[tpKey]bool) {
	key := tpKey{t.Name, idx}
	seen[key] = true
	me := m.s.nodeID
	tp := replication.TopicPartition{Topic: t.Name, TopicID: t.ID, Partition: idx}
	if len(p.Replicas) <= 1 {
		m.dropLeader(key, nil)
		m.unfollow(key)
		part.SetReplicated(false)
		if part.LeaderEpoch() != p.LeaderEpoch {
			part.SetLeaderEpoch(p.LeaderEpoch)
		}
		return
	}
	part.SetReplicated(true)
	if err := part.Failed(); err != nil {
		// Offline after a disk error (offline.go): neither lead nor
		// follow until a restart recovers the log.
		m.dropLeader(key, err)
		m.unfollow(key)
		return
	}
	state := partitionState(p)
	now := time.Now()
	if p.Leader == me {
		m.unfollow(key)
		m.mu.Lock()
		lp := m.leaders[key]
		m.mu.Unlock()
		if lp != nil && lp.part == part {
			lp.mu.Lock()
			if ti, ok := m.s.engine.Topic(t.Name); ok {
				lp.st.SetMinInsync(minInsync(ti.Config))
			}
			before := lp.st.ISR()
			u, err := lp.st.OnMetadata(state, now)
			if err == nil {
				m.s.isr.count(before, lp.st.ISR())
				m.apply(lp, u)
				lp.mu.Unlock()
				return
			}
			lp.mu.Unlock()
			m.dropLeader(key, err)
		} else if lp != nil {
			// The log was replaced under the leadership (the topic was
			// recreated): end the old one, whose waiters and watcher
			// would otherwise outlive it.
			m.dropLeader(key, fmt.Errorf("%s-%d: log replaced: %w", t.Name, idx, replication.ErrNotLeaderOrFollower))
		}
		mi := 1
		if ti, ok := m.s.engine.Topic(t.Name); ok {
			mi = minInsync(ti.Config)
		}
		st, err := replication.BecomeLeader(m.cfg, tp, me, mi, state, replicaLog{part}, now)
		if err != nil {
			m.s.log.Error("becoming leader", "topic", t.Name, "partition", idx, "leader_epoch", p.LeaderEpoch, "err", err)
			return
		}
		m.s.log.Info("leading partition", "topic", t.Name, "partition", idx, "leader_epoch", p.LeaderEpoch, "isr", p.ISR, "log_end", part.LogEndOffset(), "hw", part.HighWatermark())
		lp = &leaderPart{m: m, tp: tp, part: part, st: st, gen: true, stop: make(chan struct{}),
			reportedISR: st.MaximalISRSize(), reportedMin: st.MinInsync()}
		// The purgatory learns the new leadership's HW now: apply only
		// reports HW moves, and a HW that never moves must still answer
		// a duplicate below it.
		m.purg.Lead(tp, p.LeaderEpoch, st.HighWatermark(), lp.reportedISR, lp.reportedMin)
		m.mu.Lock()
		m.leaders[key] = lp
		m.mu.Unlock()
		lp.mu.Lock()
		m.apply(lp, st.Tick(now))
		lp.mu.Unlock()
		m.watchLocal(lp)
		return
	}
	m.dropLeader(key, fmt.Errorf("%s-%d: leader is now %d: %w", t.Name, idx, p.Leader, replication.ErrNotLeaderOrFollower))
	if p.Leader < 0 {
		m.unfollow(key)
		return
	}
	m.mu.Lock()
	old, had := m.follow[key]
	m.follow[key] = tp
	m.mu.Unlock()
	if had && old != tp {
		// The topic was re-created under its name: the old id's
		// partition is another fetcher entry.
		m.fetchers.Unfollow(old)
	}
	m.fetchers.Follow(tp, p.Leader, p.LeaderEpoch, replicaLog{part})
}

// dropLeader ends leadership of key (if held) and fails its waiters.
func (m *replicaManager) dropLeader(key tpKey, why error) {
	m.mu.Lock()
	lp := m.leaders[key]
	delete(m.leaders, key)
	m.mu.Unlock()
	if lp == nil {
		return
	}
	m.unwatchLocal(lp)
	lp.mu.Lock()
	lp.gen = false
	close(lp.stop)
	lp.mu.Unlock()
	if why == nil {
		why = replication.ErrNotLeaderOrFollower
	}
	if !errors.Is(why, replication.ErrNotLeaderOrFollower) {
		why = fmt.Errorf("%w: %v", replication.ErrNotLeaderOrFollower, why)
	}
	n := m.purg.FailPartition(lp.tp, lp.st.LeaderEpoch(), why)
	m.s.log.Info("no longer leading partition", "topic", key.topic, "partition", key.part, "leader_epoch", lp.st.LeaderEpoch(), "failed_waiters", n)
}

func (m *replicaManager) unfollow(key tpKey) {
	m.mu.Lock()
	tp, ok := m.follow[key]
	delete(m.follow, key)
	m.mu.Unlock()
	if ok {
		m.fetchers.Unfollow(tp)
	}
}

// dropMovedAway ends the roles of topic's partitions that have a local log
// (had) but are no longer assigned here (want), before SyncTopic deletes
// those logs: a leader moved off by a reassignment answers its waiting
// acks=all produces NOT_LEADER_OR_FOLLOWER (producers retry on the new
// leader) rather than finding its log gone under them.
func (m *replicaManager) dropMovedAway(topic string, had, want []int32) {
	for _, i := range had {
		if slices.Contains(want, i) {
			continue
		}
		key := tpKey{topic, i}
		m.dropLeader(key, fmt.Errorf("%s-%d: replica moved off broker %d: %w", topic, i, m.s.nodeID, replication.ErrNotLeaderOrFollower))
		m.unfollow(key)
	}
}

// forgetUnseen drops roles for partitions no longer hosted here.
func (m *replicaManager) forgetUnseen(seen map[tpKey]bool) {
	m.mu.Lock()
	var lead, fol []tpKey
	for k := range m.leaders {
		if !seen[k] {
			lead = append(lead, k)
		}
	}
	for k := range m.follow {
		if !seen[k] {
			fol = append(fol, k)
		}
	}
	m.mu.Unlock()
	for _, k := range lead {
		m.dropLeader(k, nil)
	}
	for _, k := range fol {
		m.unfollow(k)
	}
}

// leader returns the led partition for topic/idx, or nil.
func (m *replicaManager) leader(topic string, idx int32) *leaderPart {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaders[tpKey{topic, idx}]
}

// replicaLog adapts an engine partition to replication.Log.
type replicaLog struct{ *engine.Partition }

var _ replication.Log = replicaLog{}

func (l replicaLog) Position() replication.LogPosition {
	end, durable, start := l.Partition.Ends()
	return replication.LogPosition{LogEnd: end, DurableEnd: durable, LogStart: start}
}

func (l replicaLog) EndOffsetForEpoch(epoch int32) replication.EpochEndOffset {
	e, o := l.Partition.EndOffsetForEpoch(epoch)
	return replication.EpochEndOffset{Epoch: e, EndOffset: o}
}

func (l replicaLog) AppendReplicated(b []byte) (replication.Pending, error) {
	p, err := l.Partition.AppendReplicated(b)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// FollowerFetch is the leader side of one partition of a replica fetch:
// it records the follower's progress. An error or a diverging epoch means
// no records are returned. Under a KIP-227 fetch session (followers use
// one, netpath/peer) it must be called for every partition of the
// session on each fetch, listed in the request or not, with the
// session's fetch offset, as Kafka does, except while quietUntil (the
// answer of the last call) has not passed and the partition did not
// change: a quiet partition left out for longer keeps an old caught-up
// time, and LeaderState.Tick would drop the follower from its ISR the
// moment the leader's log end moved.
func (m *replicaManager) FollowerFetch(topic string, partition int32, f replication.FollowerFetch) (div *replication.EpochEndOffset, quietUntil time.Time, err error) {
	lp := m.leader(topic, partition)
	if lp == nil {
		return nil, time.Time{}, replication.ErrNotLeaderOrFollower
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if !lp.gen {
		return nil, time.Time{}, replication.ErrNotLeaderOrFollower
	}
	out, err := lp.st.OnFollowerFetch(f, time.Now())
	if err != nil {
		return nil, time.Time{}, err
	}
	m.apply(lp, out.Update)
	return out.Diverging, out.QuietUntil, nil
}

// OffsetsAvailable is the ListOffsets check of a replicated partition the
// image says we lead in epoch: ErrNotLeaderOrFollower while replication
// has not taken up that leadership yet (the log's HW is not a leader's
// then), ErrOffsetNotAvailable while the HW is below the epoch's start
// (LeaderState.CheckOffsetsAvailable). The HW only rises within an
// epoch, so a nil answer holds for the log read that follows.
func (m *replicaManager) OffsetsAvailable(topic string, idx, epoch int32) error {
	lp := m.leader(topic, idx)
	if lp == nil {
		return fmt.Errorf("%s-%d: not leading yet: %w", topic, idx, replication.ErrNotLeaderOrFollower)
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	switch {
	case !lp.gen:
		return fmt.Errorf("%s-%d: leadership ended: %w", topic, idx, replication.ErrNotLeaderOrFollower)
	case lp.st.LeaderEpoch() != epoch:
		// The image is ahead of reconcile (or behind it): the new
		// epoch's HW check has not started; retry.
		return fmt.Errorf("%s-%d: leading epoch %d, image says %d: %w", topic, idx, lp.st.LeaderEpoch(), epoch, replication.ErrOffsetNotAvailable)
	}
	return lp.st.CheckOffsetsAvailable()
}

// CheckProduce is LeaderState.CheckProduce under the partition lock. It
// returns the leader epoch the append that follows is made under: the
// acks=all waiter is tied to it (AwaitHW).
func (lp *leaderPart) CheckProduce(acks int16) (int32, error) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if !lp.gen {
		return 0, replication.ErrNotLeaderOrFollower
	}
	return lp.st.LeaderEpoch(), lp.st.CheckProduce(acks)
}

// AwaitLowWatermark parks a DeleteRecords wait until the low watermark
// reaches target, the log start this leadership just moved to. The
// purgatory first hears the low watermark with the leader's new start
// (alone in the ISR that answers at once), then followers' fetches
// reporting their starts move it (apply); the leadership ending fails the
// wait with NOT_LEADER_OR_FOLLOWER (dropLeader), and the deadline
// answers it at the latest. If the leadership ended before the wait was
// parked, the purgatory's FailPartition, run after gen turned false,
// answers it.
func (lp *leaderPart) AwaitLowWatermark(target int64, arrived, deadline time.Time) *replication.Waiter {
	lp.mu.Lock()
	epoch := lp.st.LeaderEpoch()
	if lp.gen {
		lp.m.apply(lp, lp.st.OnLogStart())
	}
	lp.mu.Unlock()
	return lp.m.purg.AddLow(lp.tp, epoch, target, arrived, deadline)
}

// Ended is closed when this leadership ends.
func (lp *leaderPart) Ended() <-chan struct{} { return lp.stop }

// Leader returns the leadership of topic/idx as the produce path sees it,
// or nil when this broker does not lead it in replication (yet).
func (m *replicaManager) Leader(topic string, idx int32) netpath.Leadership {
	if lp := m.leader(topic, idx); lp != nil {
		return lp
	}
	return nil
}

// AwaitHW parks an acks=all wait for an append ending at lastOffset, made
// while lp led in epoch (from CheckProduce). The purgatory answers it by
// the deadline at the latest; if the epoch already ended (the leadership
// was dropped while the local write ran) it fails at once with
// NOT_LEADER_OR_FOLLOWER. arrived is when the request came in.
func (lp *leaderPart) AwaitHW(epoch int32, lastOffset int64, arrived, deadline time.Time) *replication.Waiter {
	return lp.m.awaitHW(lp, epoch, lastOffset, arrived, deadline)
}

// Cancel withdraws a wait from the purgatory (the requester went away or
// timed out).
func (m *replicaManager) Cancel(w *replication.Waiter) { m.purg.Cancel(w) }

// Waiting is how many acks=all waits the purgatory holds.
func (m *replicaManager) Waiting() int { return m.purg.Len() }

// WaitingLow is how many DeleteRecords waits the purgatory holds.
func (m *replicaManager) WaitingLow() int { return m.purg.LenLow() }

var _ netpath.Replicas = (*replicaManager)(nil)

func (m *replicaManager) awaitHW(lp *leaderPart, epoch int32, lastOffset int64, arrived, deadline time.Time) *replication.Waiter {
	return m.purg.Add(lp.tp, epoch, lastOffset, arrived, deadline)
}
