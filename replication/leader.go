package replication

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// AlterProposal is an ISR change LeaderState wants the controller to make.
// The caller sends it with Controller.AlterPartition and must report the
// outcome, whatever it is (a network error too), with OnAlterResult.
type AlterProposal struct {
	Seq            uint64 // identifies the proposal within its LeaderState
	LeaderEpoch    int32
	PartitionEpoch int32 // the epoch the change is based on
	NewISR         []int32
}

// Update is what a LeaderState event changed.
type Update struct {
	// HWChanged says HighWatermark advanced to HW: the caller sets it on
	// the log and calls Purgatory.Advance.
	HWChanged bool
	HW        int64
	// LowChanged says LowWatermark moved (up, or down when a lagging
	// follower rejoined the ISR) to Low: the caller calls
	// Purgatory.AdvanceLow, which answers DeleteRecords waits.
	LowChanged bool
	Low        int64
	// Proposal, when set, is an AlterPartition to send now.
	Proposal *AlterProposal
}

// FollowerFetch is what one partition of a follower's Fetch says.
type FollowerFetch struct {
	ReplicaID int32
	// CurrentLeaderEpoch is the leader epoch the follower believes in, or
	// NoEpoch when its Fetch version does not carry one.
	CurrentLeaderEpoch int32
	// FetchOffset is the follower's durable log end (see LogView.DurableEnd).
	FetchOffset int64
	// LastFetchedEpoch is the epoch of the follower's last batch (Fetch
	// v12+), NoEpoch when unknown.
	LastFetchedEpoch int32
	// LogStartOffset is the follower's log start (Fetch v5+), NoOffset
	// when its Fetch version does not carry one.
	LogStartOffset int64
}

// FetchOutcome is the leader's answer to a follower fetch, apart from the
// records, which the caller reads from FetchOffset as for any fetch (but
// up to the log end offset, not the high watermark).
type FetchOutcome struct {
	Update
	// Diverging, when set, goes back as the partition's DivergingEpoch and
	// no records are returned: the follower must truncate first.
	Diverging *EpochEndOffset
	// QuietUntil, when set, says the follower is in sync and at our log
	// end: until then its fetches that find the partition unchanged (no
	// append, HW, log start or durable end move) and carry the same
	// fetch state need not be recorded. Skipping them only leaves its
	// caught-up time up to an eighth of ReplicaLagTimeMax older than
	// Kafka's would be (quietMargin).
	QuietUntil time.Time
}

// quietMargin is the part of ReplicaLagTimeMax by which a fetch session
// may leave a quiet partition's caught-up time unrefreshed
// (FetchOutcome.QuietUntil). While the partition stays quiet the
// follower's log end equals ours and Tick keeps it anyway; after the next
// append its first fetch proves it caught up at its last recorded fetch,
// at most this much older than its last real one. So a follower that
// really stops is dropped at most an eighth of the lag time early, and
// one that keeps fetching never is.
const quietMargin = 8

type followerState struct {
	// leo is the offset the follower reported it has durably, NoOffset
	// until it fetches from this leader (so the HW waits for it).
	leo int64
	// logStart is the follower's reported log start, NoOffset until it
	// fetches from this leader (LowWatermark waits for it).
	logStart int64
	// lastCaughtUp is the last time the follower was known to have
	// reached the leader's log end offset (Kafka's lastCaughtUpTimeMs).
	lastCaughtUp time.Time
	// leaderLEOAtLastFetch and lastFetch let a fetch prove the follower
	// was caught up at the time of the previous one.
	leaderLEOAtLastFetch int64
	lastFetch            time.Time
}

type pendingAlter struct {
	prop     AlterProposal
	inFlight bool
	// waitMetadata: the controller said our epochs are stale, so the
	// change may or may not have been applied by someone; only metadata
	// tells. Until then the maximal ISR stays in force.
	waitMetadata bool
	resendAt     time.Time
}

// LeaderState is one partition's replication state on its leader: ISR,
// follower progress, high watermark and the in-flight ISR change. It does
// no I/O beyond reading its LogView and never reads a clock: every event
// carries now. It is not safe for concurrent use; the caller serialises
// calls (the partition lock).
//
// A LeaderState lives for one leader epoch. When metadata shows another
// leader or epoch, OnMetadata returns ErrNotLeaderOrFollower and the
// caller drops it (and fails its purgatory waiters).
type LeaderState struct {
	cfg     Config
	tp      TopicPartition
	localID int32
	minISR  int
	log     LogView

	replicas       []int32
	isr            []int32 // committed: what the controller last told us
	leaderEpoch    int32
	partitionEpoch int32
	// epochStartOffset is the log end offset when this epoch began; a
	// follower below it has not yet truncated against us and may not
	// join the ISR.
	epochStartOffset int64
	hw               int64
	// low is the low watermark last reported in an Update; lowDirty says
	// an input of it (a follower's start, the ISR) changed since.
	low      int64
	lowDirty bool

	followers map[int32]*followerState
	pending   *pendingAlter
	retryAt   time.Time // no new proposal before this
	seq       uint64
}

// BecomeLeader is a new leader's first action: it stamps the new epoch
// into the log's epoch cache at the log end offset (so followers can
// truncate against it) and returns the partition's LeaderState.
func BecomeLeader(cfg Config, tp TopicPartition, localID int32, minISR int, p PartitionState, log Log, now time.Time) (*LeaderState, error) {
	if p.Leader != localID {
		return nil, fmt.Errorf("replication: %s-%d: leader is %d, not %d: %w", tp.Topic, tp.Partition, p.Leader, localID, ErrNotLeaderOrFollower)
	}
	if err := log.AssignLeaderEpoch(p.LeaderEpoch); err != nil {
		return nil, fmt.Errorf("replication: %s-%d: assign leader epoch %d: %w", tp.Topic, tp.Partition, p.LeaderEpoch, err)
	}
	return NewLeaderState(cfg, tp, localID, minISR, p, log, now)
}

// NewLeaderState builds the state for a log whose epoch was already
// assigned (BecomeLeader does both). The high watermark starts at the
// log's and only moves up; every follower's progress is unknown, so the
// HW waits until each ISR member has fetched from us (Kafka resets
// follower state on leader change the same way). ISR members count as
// caught up now, which gives them a full lag window to show up.
func NewLeaderState(cfg Config, tp TopicPartition, localID int32, minISR int, p PartitionState, log LogView, now time.Time) (*LeaderState, error) {
	if p.Leader != localID {
		return nil, fmt.Errorf("replication: %s-%d: leader is %d, not %d: %w", tp.Topic, tp.Partition, p.Leader, localID, ErrNotLeaderOrFollower)
	}
	if !containsID(p.ISR, localID) {
		return nil, fmt.Errorf("replication: %s-%d: leader %d not in ISR %v", tp.Topic, tp.Partition, localID, p.ISR)
	}
	l := &LeaderState{
		cfg: cfg, tp: tp, localID: localID, minISR: minISR, log: log,
		leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch,
		epochStartOffset: log.LogEndOffset(),
		hw:               log.HighWatermark(),
		low:              NoOffset,
		followers:        map[int32]*followerState{},
	}
	l.setMembership(p.Replicas, p.ISR, now)
	return l, nil
}

// setMembership adopts replicas and committed ISR, keeping the progress of
// followers we already track.
func (l *LeaderState) setMembership(replicas, isr []int32, now time.Time) {
	l.lowDirty = true
	l.replicas = slices.Clone(replicas)
	l.isr = slices.Clone(isr)
	for id := range l.followers {
		if !containsID(replicas, id) {
			delete(l.followers, id)
		}
	}
	for _, id := range replicas {
		if id == l.localID || l.followers[id] != nil {
			continue
		}
		fs := &followerState{leo: NoOffset, logStart: NoOffset, leaderLEOAtLastFetch: NoOffset}
		if containsID(isr, id) {
			fs.lastCaughtUp = now
		}
		l.followers[id] = fs
	}
}

// LowWatermark is the smallest log start offset over the leader and the
// ISR's followers: what DeleteRecords answers and waits on (Kafka's
// lowWatermarkIfLeader takes the replicas on live brokers; the ISR is
// our view of those that keep up, so a dead follower cannot hold a
// DeleteRecords until its timeout). NoOffset while an ISR follower has
// not reported its start to this leader yet.
func (l *LeaderState) LowWatermark() int64 {
	low := l.log.LogStartOffset()
	for _, id := range l.isr {
		fs := l.followers[id]
		if fs == nil {
			continue // ourselves
		}
		if fs.logStart == NoOffset {
			return NoOffset
		}
		low = min(low, fs.logStart)
	}
	return low
}

// HighWatermark is the offset below which records are committed.
func (l *LeaderState) HighWatermark() int64 { return l.hw }

// CheckOffsetsAvailable returns ErrOffsetNotAvailable while the high
// watermark is below the log end this epoch began with. A new leader's HW
// starts at its own, which may lag its predecessor's, and reaches the
// epoch start only once every ISR member has fetched from it; until then
// an end offset read from it could be lower than what the previous leader
// acknowledged, so ListOffsets refuses (Kafka's KIP-207 check in
// Partition.fetchOffsetForTimestamp).
func (l *LeaderState) CheckOffsetsAvailable() error {
	if l.hw < l.epochStartOffset {
		return fmt.Errorf("%s-%d: high watermark %d, leader epoch %d started at %d: %w",
			l.tp.Topic, l.tp.Partition, l.hw, l.leaderEpoch, l.epochStartOffset, ErrOffsetNotAvailable)
	}
	return nil
}

// LeaderEpoch is the epoch this state leads in.
func (l *LeaderState) LeaderEpoch() int32 { return l.leaderEpoch }

// PartitionEpoch is the partition epoch of the committed ISR.
func (l *LeaderState) PartitionEpoch() int32 { return l.partitionEpoch }

// ISR is the committed ISR (a copy).
func (l *LeaderState) ISR() []int32 { return slices.Clone(l.isr) }

// MaximalISR is the committed ISR plus the members of an in-flight
// change (KIP-497): the HW waits for all of them, because the controller
// may already have applied the change, making any of them electable.
func (l *LeaderState) MaximalISR() []int32 {
	if l.pending == nil {
		return slices.Clone(l.isr)
	}
	return union(l.isr, l.pending.prop.NewISR)
}

// InMaximalISR reports whether id is in MaximalISR() without building it
// (the replication throttle asks per partition of a follower fetch).
func (l *LeaderState) InMaximalISR(id int32) bool {
	return containsID(l.isr, id) || l.pending != nil && containsID(l.pending.prop.NewISR, id)
}

// MaximalISRSize is len(MaximalISR()) without building the set: callers
// on the fetch path only need the count.
func (l *LeaderState) MaximalISRSize() int {
	n := len(l.isr)
	if l.pending != nil {
		for _, id := range l.pending.prop.NewISR {
			if !containsID(l.isr, id) {
				n++
			}
		}
	}
	return n
}

// MinInsync is min.insync.replicas for this partition.
func (l *LeaderState) MinInsync() int { return l.minISR }

// SetMinInsync follows a topic config change.
func (l *LeaderState) SetMinInsync(n int) { l.minISR = n }

// AlterPending reports whether an ISR change is outstanding.
func (l *LeaderState) AlterPending() bool { return l.pending != nil }

// CheckProduce is the check before appending a produce request with the
// given acks. Like Kafka it counts the committed ISR; the count that
// matters at acknowledgement (maximal ISR) is Purgatory's AFTER_APPEND
// check.
func (l *LeaderState) CheckProduce(acks int16) error {
	switch acks {
	case 0, 1:
		return nil
	case -1:
		if len(l.isr) < l.minISR {
			return fmt.Errorf("%s-%d: ISR %v, min.insync.replicas %d: %w", l.tp.Topic, l.tp.Partition, l.isr, l.minISR, ErrNotEnoughReplicas)
		}
		return nil
	default:
		return fmt.Errorf("acks=%d: %w", acks, ErrInvalidRequiredAcks)
	}
}

// DivergingEpoch is the leader-side Fetch v12+ check: a follower whose
// last fetched epoch is lastFetchedEpoch and whose log ends at fetchOffset
// has diverged from ours unless we know that epoch and it reaches
// fetchOffset here. The answer names the largest epoch <= lastFetchedEpoch
// we have and where it ends for us. An epoch we cannot place at all is
// ErrOffsetOutOfRange (as in Kafka).
func DivergingEpoch(src EpochSource, lastFetchedEpoch int32, fetchOffset int64) (EpochEndOffset, bool, error) {
	eo := src.EndOffsetForEpoch(lastFetchedEpoch)
	if eo.Epoch == NoEpoch || eo.EndOffset == NoOffset {
		return EpochEndOffset{}, false, fmt.Errorf("cannot place last fetched epoch %d: %w", lastFetchedEpoch, ErrOffsetOutOfRange)
	}
	if eo.Epoch < lastFetchedEpoch || eo.EndOffset < fetchOffset {
		return eo, true, nil
	}
	return EpochEndOffset{}, false, nil
}

// OnFollowerFetch records a follower's fetch of this partition. Errors
// are per-partition Fetch errors. On success the follower's progress is
// recorded (not when it diverged: its offset means nothing until it
// truncates), the HW may advance, and a follower that caught up to the HW
// may be proposed back into the ISR.
func (l *LeaderState) OnFollowerFetch(f FollowerFetch, now time.Time) (FetchOutcome, error) {
	switch {
	case f.CurrentLeaderEpoch != NoEpoch && f.CurrentLeaderEpoch < l.leaderEpoch:
		return FetchOutcome{}, ErrFencedLeaderEpoch
	case f.CurrentLeaderEpoch > l.leaderEpoch:
		return FetchOutcome{}, ErrUnknownLeaderEpoch
	}
	fs := l.followers[f.ReplicaID]
	if fs == nil {
		// Not an assigned replica (or ourselves). Kafka answers
		// NOT_LEADER_OR_FOLLOWER too; the sender waits for metadata.
		return FetchOutcome{}, fmt.Errorf("broker %d is not a follower of %s-%d: %w", f.ReplicaID, l.tp.Topic, l.tp.Partition, ErrNotLeaderOrFollower)
	}
	if f.LastFetchedEpoch != NoEpoch {
		div, diverged, err := DivergingEpoch(l.log, f.LastFetchedEpoch, f.FetchOffset)
		if err != nil {
			return FetchOutcome{}, err
		}
		if diverged {
			// A copy, so div itself stays on the stack on every other fetch.
			d := div
			return FetchOutcome{Diverging: &d}, nil
		}
	}
	leo := l.log.LogEndOffset()
	if f.FetchOffset < l.log.LogStartOffset() || f.FetchOffset > leo {
		return FetchOutcome{}, fmt.Errorf("follower %d fetch offset %d outside [%d, %d]: %w", f.ReplicaID, f.FetchOffset, l.log.LogStartOffset(), leo, ErrOffsetOutOfRange)
	}
	// Kafka's Replica.updateFetchState: reaching our end now proves
	// "caught up now"; reaching the end we had at the previous fetch
	// proves "caught up then".
	switch {
	case f.FetchOffset >= leo:
		fs.lastCaughtUp = later(fs.lastCaughtUp, now)
	case f.FetchOffset >= fs.leaderLEOAtLastFetch && fs.leaderLEOAtLastFetch != NoOffset:
		fs.lastCaughtUp = later(fs.lastCaughtUp, fs.lastFetch)
	}
	fs.leaderLEOAtLastFetch = leo
	fs.lastFetch = now
	fs.leo = f.FetchOffset
	if fs.logStart != f.LogStartOffset {
		fs.logStart = f.LogStartOffset
		l.lowDirty = true
	}

	var out FetchOutcome
	out.Update = l.advance()
	inISR := containsID(l.isr, f.ReplicaID)
	if l.canPropose(now) && !inISR &&
		f.FetchOffset >= l.hw && f.FetchOffset >= l.epochStartOffset {
		out.Proposal = l.propose(union(l.isr, []int32{f.ReplicaID}))
	}
	// Not while an ISR change is in flight, or for a follower outside the
	// ISR: their fetches may have to propose one.
	if inISR && l.pending == nil && f.FetchOffset >= leo && l.cfg.ReplicaLagTimeMax > 0 {
		out.QuietUntil = now.Add(l.cfg.ReplicaLagTimeMax / quietMargin)
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// OnLocalAppend is called after the leader's own log grew or flushed: its
// DurableEnd is part of the HW minimum.
func (l *LeaderState) OnLocalAppend() Update { return l.advance() }

// OnLogStart is called after the leader's own log start moved
// (DeleteRecords): it is part of the low watermark minimum. With
// followers in the ISR their starts still hold the low watermark; alone
// in the ISR the leader's move answers at once.
func (l *LeaderState) OnLogStart() Update {
	l.lowDirty = true
	return l.advance()
}

// advance recomputes the HW and, when one of its inputs changed, the low
// watermark.
func (l *LeaderState) advance() Update {
	u := l.advanceHW()
	if l.lowDirty {
		l.lowDirty = false
		if low := l.LowWatermark(); low != l.low {
			l.low = low
			u.LowChanged = true
		}
	}
	u.Low = l.low
	return u
}

// advanceHW recomputes the HW: the minimum of our durable end and the
// reported durable ends of the maximal ISR. It never moves down.
func (l *LeaderState) advanceHW() Update {
	hw := l.log.DurableEnd()
	// The maximal ISR without building it: this runs for every partition
	// of every follower fetch.
	member := func(id int32) bool {
		if id == l.localID {
			return true
		}
		fs := l.followers[id]
		if fs == nil {
			// A member we do not track (not in replicas): nothing can be
			// proven about it, so hold the HW.
			return false
		}
		hw = min(hw, fs.leo)
		return true
	}
	for _, id := range l.isr {
		if !member(id) {
			return Update{HW: l.hw}
		}
	}
	if l.pending != nil {
		for _, id := range l.pending.prop.NewISR {
			if !containsID(l.isr, id) && !member(id) {
				return Update{HW: l.hw}
			}
		}
	}
	if hw > l.hw {
		l.hw = hw
		return Update{HWChanged: true, HW: hw}
	}
	return Update{HW: l.hw}
}

func (l *LeaderState) canPropose(now time.Time) bool {
	return l.pending == nil && !now.Before(l.retryAt)
}

func (l *LeaderState) propose(newISR []int32) *AlterProposal {
	l.seq++
	p := AlterProposal{Seq: l.seq, LeaderEpoch: l.leaderEpoch, PartitionEpoch: l.partitionEpoch, NewISR: newISR}
	l.pending = &pendingAlter{prop: p, inFlight: true}
	cp := p
	cp.NewISR = slices.Clone(newISR)
	return &cp
}

// Tick runs the periodic checks (call it at least every few hundred ms):
// it proposes removing ISR members that have not been caught up within
// ReplicaLagTimeMax, and re-sends an AlterPartition whose outcome was
// unknown. A new leader's HW may also advance here when nothing else
// triggers it, and the low watermark follows a leader start that moved
// without OnLogStart (retention).
func (l *LeaderState) Tick(now time.Time) Update {
	l.lowDirty = true
	u := l.advance()
	if p := l.pending; p != nil {
		if !p.inFlight && !p.waitMetadata && !now.Before(p.resendAt) {
			p.inFlight = true
			cp := p.prop
			cp.NewISR = slices.Clone(p.prop.NewISR)
			u.Proposal = &cp
		}
		return u
	}
	if !l.canPropose(now) {
		return u
	}
	leo := l.log.LogEndOffset()
	var keep []int32
	for _, id := range l.isr {
		fs := l.followers[id]
		if id == l.localID || fs == nil || fs.leo == leo || now.Sub(fs.lastCaughtUp) <= l.cfg.ReplicaLagTimeMax {
			keep = append(keep, id)
		}
	}
	if len(keep) < len(l.isr) {
		u.Proposal = l.propose(keep)
	}
	return u
}

// OnAlterResult reports the controller's answer to prop (res is valid when
// err is nil). The outcomes, as in Kafka's Partition.handleAlterPartitionError:
//   - accepted: the new ISR and partition epoch are committed; if the
//     answer shows another leader or leader epoch, the maximal ISR stays
//     in force until metadata ends this leadership;
//   - ErrIneligibleReplica: rejected before applying anything, so the old
//     ISR is back in force and a new proposal waits AlterPartitionBackoff;
//   - ErrInvalidUpdateVersion, ErrFencedLeaderEpoch, ErrNotLeaderOrFollower,
//     ErrUnknownTopicOrPartition: our epochs are stale and the change may
//     have been applied (a retry of a lost response, say); keep the
//     maximal ISR until metadata tells the truth (OnMetadata);
//   - anything else (timeouts, no controller): unknown outcome; keep the
//     maximal ISR and re-send the same proposal from Tick after
//     AlterPartitionBackoff. Re-sending is safe: if the first one was
//     applied, the epoch check turns the second into a stale rejection.
func (l *LeaderState) OnAlterResult(prop AlterProposal, res PartitionState, err error, now time.Time) Update {
	p := l.pending
	if p == nil || p.prop.Seq != prop.Seq || !p.inFlight {
		return Update{HW: l.hw, Low: l.low} // superseded by metadata
	}
	p.inFlight = false
	switch {
	case err == nil && (res.LeaderEpoch != l.leaderEpoch || res.Leader != l.localID):
		// Accepted, and the same controller step moved leadership away
		// (a reassignment that completes when its last replica joins
		// the ISR removes us and elects a member of the new ISR, maybe
		// the one just added). That member only has what it had when we
		// proposed it: dropping back to the committed ISR here would let
		// the HW pass it and acknowledge records the new leader lacks.
		// Keep the maximal ISR until metadata ends this leadership.
		p.waitMetadata = true
	case err == nil:
		l.pending = nil
		if res.PartitionEpoch >= l.partitionEpoch {
			l.partitionEpoch = res.PartitionEpoch
			l.setMembership(res.Replicas, res.ISR, now)
		}
	case errors.Is(err, ErrIneligibleReplica):
		l.pending = nil
		l.retryAt = now.Add(l.cfg.AlterPartitionBackoff)
	case errors.Is(err, ErrInvalidUpdateVersion), errors.Is(err, ErrFencedLeaderEpoch),
		errors.Is(err, ErrNotLeaderOrFollower), errors.Is(err, ErrUnknownTopicOrPartition):
		p.waitMetadata = true
	default:
		p.resendAt = now.Add(l.cfg.AlterPartitionBackoff)
	}
	return l.advance()
}

// OnMetadata applies the controller's current state of the partition. A
// newer partition epoch in our leader epoch replaces the committed ISR and
// ends any pending change (the metadata includes its outcome). Another
// leader or a newer leader epoch returns ErrNotLeaderOrFollower: this
// LeaderState is over. Older metadata is ignored.
func (l *LeaderState) OnMetadata(p PartitionState, now time.Time) (Update, error) {
	if p.LeaderEpoch < l.leaderEpoch {
		return Update{HW: l.hw, Low: l.low}, nil
	}
	if p.LeaderEpoch > l.leaderEpoch || p.Leader != l.localID {
		return Update{HW: l.hw, Low: l.low}, fmt.Errorf("%s-%d: leader %d epoch %d: %w", l.tp.Topic, l.tp.Partition, p.Leader, p.LeaderEpoch, ErrNotLeaderOrFollower)
	}
	if p.PartitionEpoch > l.partitionEpoch {
		l.partitionEpoch = p.PartitionEpoch
		l.setMembership(p.Replicas, p.ISR, now)
		l.pending = nil
	}
	return l.advance(), nil
}
