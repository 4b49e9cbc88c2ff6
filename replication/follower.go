package replication

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/internal/records"
)

// FetchRequest is one replica fetch to one leader, covering every
// partition this broker follows there. netpath/peer's FetchClient encodes it as
// a Kafka Fetch (v12+ for LastFetchedEpoch, replica id = ReplicaID).
type FetchRequest struct {
	ReplicaID  int32
	MaxWait    time.Duration
	MinBytes   int32
	MaxBytes   int32
	Partitions []FetchPartition
}

// FetchPartition is one partition of a FetchRequest.
type FetchPartition struct {
	TopicPartition
	CurrentLeaderEpoch int32
	// FetchOffset is the follower's log end offset, which is also its
	// durable end: partitions with unflushed appends are left out of
	// requests until the flush completes, so a fetch offset always means
	// "these offsets are on my disk" and the leader may count it for the
	// HW (see LogView.DurableEnd).
	FetchOffset      int64
	LastFetchedEpoch int32 // NoEpoch when the log has no epoch
	LogStartOffset   int64
	MaxBytes         int32
}

// FetchResponse is the leader's answer, decoded by the FetchClient.
type FetchResponse struct {
	Partitions []FetchPartitionResponse
	// Release, when set, hands the memory behind the Records back to the
	// client (see FetchClient for when it may be called).
	Release func()
}

// FetchPartitionResponse is one partition's answer. Err holds the
// partition error translated to this package's errors (nil for NONE);
// HighWatermark and LogStartOffset are filled on OFFSET_OUT_OF_RANGE too.
type FetchPartitionResponse struct {
	TopicPartition
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	DivergingEpoch *EpochEndOffset
	Records        []byte // whole batches, offsets as the leader assigned
}

type followStatus int

const (
	statusFetching followStatus = iota
	// statusDelayed: retried after delayUntil (partition errors).
	statusDelayed
	// statusFenced: our leader epoch is stale; nothing to do until
	// metadata brings a new one (AddPartition).
	statusFenced
	// statusRemote: building remote state. The leader answered
	// OFFSET_MOVED_TO_TIERED_STORAGE and Config.RemoteRestart runs off
	// the fetch loop (RemoteRestartJob); OnRemoteRestart resumes.
	statusRemote
)

type followPart struct {
	tp         TopicPartition
	epoch      int32
	log        Log
	status     followStatus
	delayUntil time.Time
	// lastErr is kept for metrics/debugging.
	lastErr error
	// lagErrs counts consecutive metadata-lag errors, the first of which
	// came at lagSince (lagDelay).
	lagErrs  int
	lagSince time.Time
	// caughtUp: the last answer left the log at or past the leader's
	// high watermark (Kafka's isReplicaInSync): never throttled, even
	// before the metadata shows it back in the ISR.
	caughtUp bool
	// remoteJob numbers the RemoteRestartJobs started for the partition:
	// only the latest one's outcome applies.
	remoteJob uint64
	// restartedAt is where the last remote restart put the log (-1:
	// none since). The same answer again there means the remote tier
	// does not reach the leader's local log yet (our metadata lags):
	// back off before asking the store again.
	restartedAt int64
	// reqAt is the partition's index in the request BuildRequestInto
	// built last (-1: left out), for HandleResponse.
	reqAt int
}

// AppendedPartition is an append whose durability the caller should wait
// for before the next fetch (the partition is left out of requests until
// then anyway), then report with OnAppendDone.
type AppendedPartition struct {
	TopicPartition
	Pending Pending
	// HighWatermark and LogStartOffset are the leader's, from the answer
	// that carried the records; OnAppendDone applies them.
	HighWatermark, LogStartOffset int64
	log                           Log
	epoch                         int32
}

// HandleResult says what HandleResponse did.
type HandleResult struct {
	Appended  []AppendedPartition
	Truncated []TopicPartition // truncated for DivergingEpoch or out of range
	Fenced    []TopicPartition // waiting for metadata
	Delayed   []TopicPartition // backing off after an error
	// RemoteRestarts are the partitions parked for a restart from the
	// remote tier: the caller runs each (Config.RemoteRestart, off the
	// fetch loop) and reports with OnRemoteRestart.
	RemoteRestarts []RemoteRestartJob
}

// RemoteRestartJob is a partition parked until Config.RemoteRestart
// answers where to restart its log.
type RemoteRestartJob struct {
	TopicPartition
	part *followPart
	seq  uint64
}

// RemoteRestartResult is what Config.RemoteRestart returned for a job.
type RemoteRestartResult struct {
	Offset           int64
	ProducerSnapshot []byte
	Epochs           []epochcache.Entry
	Err              error
}

// Follower is the fetch state machine for the partitions this broker
// follows on one leader broker. It does its I/O through each partition's
// Log and never reads a clock. It is not safe for concurrent use (Fetcher
// serialises it).
type Follower struct {
	cfg      Config
	localID  int32
	leaderID int32
	parts    map[TopicPartition]*followPart
	order    []*followPart // request order; rotated for fairness
	next     int
	// throttle, when set, holds back throttled partitions while the
	// follower rate is exceeded; throttleWake is when the last request
	// built without them may take them again (zero: none held back).
	throttle     *FollowerThrottle
	throttleWake time.Time
	answered     []bool              // HandleResponse's, reused
	appended     []AppendedPartition // HandleResponse's Appended, reused
}

// NewFollower returns a follower of leaderID with no partitions.
func NewFollower(cfg Config, localID, leaderID int32) *Follower {
	return &Follower{cfg: cfg, localID: localID, leaderID: leaderID, parts: map[TopicPartition]*followPart{}}
}

// SetThrottle makes BuildRequest leave throttled partitions out while
// ft's rate is exceeded (nil: no throttle).
func (f *Follower) SetThrottle(ft *FollowerThrottle) { f.throttle = ft }

// Leader is the broker followed.
func (f *Follower) Leader() int32 { return f.leaderID }

// Len is the number of partitions followed.
func (f *Follower) Len() int { return len(f.parts) }

// AddPartition starts (or, with a new epoch, restarts) following tp in
// leaderEpoch. This is a follower's whole reaction to a leader change:
// nothing is truncated here; the first fetch carries the log's latest
// epoch and the new leader answers DivergingEpoch where our log parted
// from its own (KIP-101/KIP-320), which is safe where truncating to the
// high watermark is not.
//
// It reports whether anything changed: a new partition, epoch or log, or a
// fenced one revived. A request built before such a change does not carry
// it, so the Fetcher interrupts that request's long poll.
func (f *Follower) AddPartition(tp TopicPartition, leaderEpoch int32, log Log) bool {
	if p := f.parts[tp]; p != nil {
		if p.epoch == leaderEpoch && p.log == log && p.status != statusFenced {
			return false
		}
		p.epoch, p.log, p.status, p.lastErr, p.lagErrs = leaderEpoch, log, statusFetching, nil, 0
		return true
	}
	p := &followPart{tp: tp, epoch: leaderEpoch, log: log, restartedAt: NoOffset, reqAt: -1}
	f.parts[tp] = p
	f.order = append(f.order, p)
	return true
}

// RemovePartition stops following tp (leader change, deletion). After it
// returns this Follower never touches tp's log again.
func (f *Follower) RemovePartition(tp TopicPartition) {
	p := f.parts[tp]
	if p == nil {
		return
	}
	delete(f.parts, tp)
	i := slices.Index(f.order, p)
	f.order = slices.Delete(f.order, i, i+1)
	if f.next > i {
		f.next--
	}
}

// ready reports whether p can be fetched now, with its log's position.
func (f *Follower) ready(p *followPart, now time.Time) (LogPosition, bool) {
	switch p.status {
	case statusFenced, statusRemote:
		return LogPosition{}, false
	case statusDelayed:
		if now.Before(p.delayUntil) {
			return LogPosition{}, false
		}
		p.status = statusFetching
	}
	// One read of the three ends: each alone took the partition's lock,
	// for every partition of every round.
	pos := p.log.Position()
	// Unflushed appends: wait, so the fetch offset stays a durable one.
	return pos, pos.DurableEnd >= pos.LogEnd
}

// BuildRequest returns the fetch to send now, or nil when no partition is
// ready (see NextWake).
//
// A partition backing off is not in the request, so the request's long
// poll is cut to when the first of them may fetch again: otherwise a
// partition retried MetadataLagBackoff after a topic creation would wait
// for the long poll of the others (FetchMaxWait) to end, and with it
// every acks=all produce to the new topic.
//
// While the follower throttle's rate is exceeded, throttled partitions
// are left out (Kafka's shouldFollowerThrottle; the fetch session then
// forgets them, so the leader sends nothing for them either) and the
// request's long poll is cut to when the rate allows them again. Only
// partitions this broker is out of the ISR of, and behind the leader's
// high watermark in, are throttled, so leaving one out never makes the
// leader think an in-sync follower stalled.
func (f *Follower) BuildRequest(now time.Time) *FetchRequest {
	return f.BuildRequestInto(now, new(FetchRequest))
}

// BuildRequestInto is BuildRequest filling req, whose Partitions slice it
// reuses: a fetcher with one request in flight at a time keeps one, where
// a request per round cost two allocations on every follower for every
// acknowledged message.
func (f *Follower) BuildRequestInto(now time.Time, req *FetchRequest) *FetchRequest {
	clear(req.Partitions) // drop the last round's topic names
	*req = FetchRequest{ReplicaID: f.localID, MaxWait: f.cfg.FetchMaxWait, MinBytes: f.cfg.FetchMinBytes, MaxBytes: f.cfg.FetchMaxBytes, Partitions: req.Partitions[:0]}
	n := len(f.order)
	hold := f.throttle.delay(now)
	withheld := false
	f.throttleWake = time.Time{}
	var retryAt time.Time // earliest delayUntil of a partition left out
	for i := range n {
		p := f.order[(f.next+i)%n]
		p.reqAt = -1
		pos, ok := f.ready(p, now)
		if !ok {
			if p.status == statusDelayed && (retryAt.IsZero() || p.delayUntil.Before(retryAt)) {
				retryAt = p.delayUntil
			}
			continue
		}
		if hold > 0 && !p.caughtUp && f.throttle.Throttled(p.tp) {
			withheld = true
			continue
		}
		p.reqAt = len(req.Partitions)
		req.Partitions = append(req.Partitions, FetchPartition{
			TopicPartition:     p.tp,
			CurrentLeaderEpoch: p.epoch,
			FetchOffset:        pos.LogEnd,
			LastFetchedEpoch:   p.log.LatestEpoch(),
			LogStartOffset:     pos.LogStart,
			MaxBytes:           f.cfg.PartitionMaxBytes,
		})
	}
	if n > 0 {
		// The leader fills the response in request order until MaxBytes;
		// rotating the start keeps one busy partition from starving the rest.
		f.next = (f.next + 1) % n
	}
	if withheld {
		f.throttle.Limit.CountWithheld()
		f.throttleWake = now.Add(hold)
		req.MaxWait = min(req.MaxWait, hold)
	}
	if !retryAt.IsZero() {
		// Rounded up to the millisecond the leader counts in, so the
		// answer does not come just before the partition is ready.
		wait := retryAt.Sub(now)
		if r := wait % time.Millisecond; r != 0 {
			wait += time.Millisecond - r
		}
		req.MaxWait = min(req.MaxWait, wait)
	}
	if len(req.Partitions) == 0 {
		return nil
	}
	return req
}

// NextWake is the earliest time a delayed or throttled partition becomes
// ready.
func (f *Follower) NextWake() (time.Time, bool) {
	t := f.throttleWake
	ok := !t.IsZero()
	for _, p := range f.parts {
		if p.status == statusDelayed && (!ok || p.delayUntil.Before(t)) {
			t, ok = p.delayUntil, true
		}
	}
	return t, ok
}

func (f *Follower) delay(p *followPart, err error, now time.Time) {
	p.status, p.delayUntil, p.lastErr = statusDelayed, now.Add(f.cfg.FetchBackoff), err
}

// lagDelay backs p off after an error that says the leader has not caught
// up with the metadata we acted on. Such errors clear when the leader
// applies the metadata entry we already have, usually within tens of
// milliseconds of a topic creation or leader election (the controller's
// commit reaching it), and until they do every acks=all produce to the
// partition waits for this follower. So the retry comes after
// MetadataLagBackoff, or an eighth of how long the errors have lasted
// when that is longer (each retry costs at most an eighth of the lag),
// capped at FetchBackoff: a leader a moment behind is retried every few
// milliseconds, one that stays behind (or a stale view of ours) about
// once per FetchBackoff.
//
// Doubling the delay per error instead left a retry up to half the lag
// late: a leader that learned of a new topic 85 ms after its follower
// was retried (at 10, 30, 70, 150 ms) 68 ms after it could answer.
func (f *Follower) lagDelay(p *followPart, err error, now time.Time) {
	if p.lagErrs == 0 {
		p.lagSince = now
	}
	p.lagErrs++
	d := min(max(f.cfg.MetadataLagBackoff, now.Sub(p.lagSince)/lagAgeDivisor), f.cfg.FetchBackoff)
	p.status, p.delayUntil, p.lastErr = statusDelayed, now.Add(d), err
}

// lagAgeDivisor: a metadata-lag retry waits at most this fraction of how
// long the lag has lasted (lagDelay).
const lagAgeDivisor = 8

// metadataLag reports whether a partition error only says the leader's
// metadata is behind ours.
func metadataLag(err error) bool {
	return errors.Is(err, ErrUnknownTopicOrPartition) || errors.Is(err, ErrNotLeaderOrFollower) || errors.Is(err, ErrUnknownLeaderEpoch)
}

// OnRequestError backs off every partition of a request that failed as a
// whole (connection error, timeout).
func (f *Follower) OnRequestError(req *FetchRequest, err error, now time.Time) {
	for _, rp := range req.Partitions {
		if p := f.parts[rp.TopicPartition]; p != nil && p.status == statusFetching {
			f.delay(p, err, now)
		}
	}
}

// OnAppendDone applies the leader's high watermark that came with an
// append once the append completed without error. HandleResponse set it
// already, but the log caps its HW at what it has written, which did not
// include the append yet. A follower that fetched its last catch-up chunk
// (up to PartitionMaxBytes; 672 records in the issue-18 run) and was made
// leader before its next answer (a reassignment completes in the apply
// that admits it to the ISR) took over with a HW one chunk below what the
// old leader had acknowledged, until its followers' first fetches.
// The leader's log start is followed as far as that HW allows, for the
// same reason: the leader answers a quiet partition no more (the fetch
// session leaves it out), so nothing else would move it, and the
// leader's low watermark (a DeleteRecords answer) would wait for us.
// Nothing is done when tp was removed, moved to another log or epoch, or
// backed off since.
func (f *Follower) OnAppendDone(a AppendedPartition, now time.Time) {
	p := f.parts[a.TopicPartition]
	if p == nil || p.log != a.log || p.epoch != a.epoch || p.status != statusFetching {
		return
	}
	if hw := min(a.HighWatermark, p.log.LogEndOffset()); hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
	}
	f.followLogStart(p, a.LogStartOffset, now)
}

// OnStorageError backs off a partition whose append failed to become
// durable. The engine treats a failed flush as fatal for the log; the
// backoff only keeps us from spinning until that is handled.
func (f *Follower) OnStorageError(tp TopicPartition, err error, now time.Time) {
	if p := f.parts[tp]; p != nil {
		f.delay(p, err, now)
	}
}

// TruncationOffset is the follower's decision after the leader answered
// DivergingEpoch div (Kafka's AbstractFetcherThread truncation rules):
//   - we do not know div.Epoch either: truncate to where our largest
//     epoch below it ends (complete=false: the next fetch, carrying the
//     new last epoch, lets the leader check again);
//   - we know it: truncate to the smaller of its end on both sides;
//   - we have no epoch at or below it: truncate to div.EndOffset.
//
// The result never exceeds our log end offset.
func TruncationOffset(log LogView, div EpochEndOffset) (offset int64, complete bool) {
	leo := log.LogEndOffset()
	ours := log.EndOffsetForEpoch(div.Epoch)
	switch {
	case ours.Epoch == NoEpoch || ours.EndOffset == NoOffset:
		return min(div.EndOffset, leo), true
	case ours.Epoch != div.Epoch:
		return min(ours.EndOffset, leo), false
	default:
		return min(div.EndOffset, ours.EndOffset, leo), true
	}
}

// HandleResponse applies the leader's answer to req. Partitions that were
// removed, moved to another epoch or truncated since req was built are
// skipped: their answer describes a log we no longer have. The result's
// Appended list is valid until the next call.
func (f *Follower) HandleResponse(req *FetchRequest, resp *FetchResponse, now time.Time) HandleResult {
	var res HandleResult
	// Appended reuses the last call's list: one per round otherwise,
	// for a list the caller is done with before it asks again.
	clear(f.appended)
	res.Appended = f.appended[:0]
	// Each asked partition is handled once, for its first answer. A
	// partition's place in the request is where BuildRequestInto put it
	// (reqAt), checked against req. The Fetcher always hands back the
	// request it built; another one (tests, a request built by hand) is
	// scanned from where the last answer was found. The leader answers
	// only the partitions with news, so the request is not indexed as a
	// whole: a map of it per round cost a hash per partition.
	if cap(f.answered) < len(req.Partitions) {
		f.answered = make([]bool, len(req.Partitions))
	}
	answered := f.answered[:len(req.Partitions)]
	clear(answered)
	at := 0
	for i := range resp.Partitions {
		r := &resp.Partitions[i]
		p := f.parts[r.TopicPartition]
		var k int
		if p != nil && p.reqAt >= 0 && p.reqAt < len(req.Partitions) && req.Partitions[p.reqAt].TopicPartition == r.TopicPartition {
			k = p.reqAt
		} else {
			k = indexFrom(req.Partitions, r.TopicPartition, at)
		}
		if k < 0 || answered[k] {
			continue
		}
		at = k + 1
		rp := req.Partitions[k]
		if p == nil || p.status != statusFetching || p.epoch != rp.CurrentLeaderEpoch || p.log.LogEndOffset() != rp.FetchOffset {
			continue
		}
		answered[k] = true
		f.handlePartition(p, rp, r, now, &res)
	}
	f.appended = res.Appended
	return res
}

// indexFrom is tp's index in sent, looked for from at on (-1 when it
// was not asked for).
func indexFrom(sent []FetchPartition, tp TopicPartition, at int) int {
	for i := range sent {
		k := (at + i) % len(sent)
		if sent[k].TopicPartition == tp {
			return k
		}
	}
	return -1
}

func (f *Follower) handlePartition(p *followPart, rp FetchPartition, r *FetchPartitionResponse, now time.Time, res *HandleResult) {
	log := p.log
	switch {
	case r.Err == nil:
		p.lagErrs = 0
	case errors.Is(r.Err, ErrFencedLeaderEpoch):
		// Kafka removes the partition from its fetcher here; we keep it
		// parked so the new metadata only has to call AddPartition.
		p.status, p.lastErr = statusFenced, r.Err
		res.Fenced = append(res.Fenced, p.tp)
		return
	case errors.Is(r.Err, ErrOffsetOutOfRange):
		if err := f.outOfRange(p, rp, r); err != nil {
			f.delay(p, err, now)
			res.Delayed = append(res.Delayed, p.tp)
			return
		}
		res.Truncated = append(res.Truncated, p.tp)
		return
	case errors.Is(r.Err, ErrOffsetMovedToTieredStorage):
		f.movedToTiered(p, rp, r.Err, now, res)
		return
	case metadataLag(r.Err):
		// NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, unknown
		// partition: the leader has not seen the metadata yet.
		f.lagDelay(p, r.Err, now)
		res.Delayed = append(res.Delayed, p.tp)
		return
	default:
		// Storage and other errors.
		f.delay(p, r.Err, now)
		res.Delayed = append(res.Delayed, p.tp)
		return
	}
	if r.DivergingEpoch != nil {
		off, _ := TruncationOffset(log, *r.DivergingEpoch)
		if err := log.TruncateTo(off); err != nil {
			f.delay(p, fmt.Errorf("truncate to %d: %w: %w", off, ErrStorage, err), now)
			res.Delayed = append(res.Delayed, p.tp)
			return
		}
		res.Truncated = append(res.Truncated, p.tp)
	} else if len(r.Records) > 0 {
		// The leader's log start (where an empty replica restarted, see
		// outOfRange) may lie inside a batch, which the leader sends
		// whole: an empty log then restarts at that batch's base offset
		// (Kafka's UnexpectedAppendOffsetException handling in
		// Partition.appendRecordsToFollowerOrFutureReplica). Without it
		// a replica added after DeleteRecords never catches up.
		if h, err := records.ParseHeader(r.Records); err == nil && log.LogEndOffset() == log.LogStartOffset() &&
			h.BaseOffset < log.LogEndOffset() && h.LastOffset() >= log.LogEndOffset() {
			if err := log.TruncateFullyAndStartAt(h.BaseOffset); err != nil {
				f.delay(p, fmt.Errorf("restart at batch base %d: %w: %w", h.BaseOffset, ErrStorage, err), now)
				res.Delayed = append(res.Delayed, p.tp)
				return
			}
		}
		pend, err := log.AppendReplicated(r.Records)
		if err != nil {
			f.delay(p, fmt.Errorf("append at %d: %w: %w", rp.FetchOffset, ErrStorage, err), now)
			res.Delayed = append(res.Delayed, p.tp)
			return
		}
		res.Appended = append(res.Appended, AppendedPartition{TopicPartition: p.tp, Pending: pend, HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset, log: log, epoch: p.epoch})
		f.throttle.record(p.tp, len(r.Records), now)
	}
	p.restartedAt = NoOffset
	// A follower never exposes more than it has; its HW may drop after a
	// truncation or under a new leader whose HW still lags.
	log.SetHighWatermark(min(r.HighWatermark, log.LogEndOffset()))
	p.caughtUp = log.LogEndOffset() >= r.HighWatermark
	if !f.followLogStart(p, r.LogStartOffset, now) {
		res.Delayed = append(res.Delayed, p.tp)
	}
}

// followLogStart follows the leader's log start (DeleteRecords,
// retention) as far as our HW allows (Kafka's LeaderOffsetIncremented);
// the next fetch reports it, which moves the leader's low watermark. It
// reports false when the log failed to move, and backs p off then.
func (f *Follower) followLogStart(p *followPart, leaderStart int64, now time.Time) bool {
	ls := min(leaderStart, p.log.HighWatermark())
	if ls <= p.log.LogStartOffset() {
		return true
	}
	if _, err := p.log.AdvanceLogStart(ls); err != nil {
		f.delay(p, fmt.Errorf("advance log start to %d: %w: %w", ls, ErrStorage, err), now)
		return false
	}
	return true
}

// outOfRange handles OFFSET_OUT_OF_RANGE (Kafka's handleOffsetOutOfRange):
// below the leader's log start we restart empty there; otherwise the
// leader's log is shorter than ours and, lacking epochs to compare, we
// truncate to its high watermark, which every ISR member has.
func (f *Follower) outOfRange(p *followPart, rp FetchPartition, r *FetchPartitionResponse) error {
	switch {
	case rp.FetchOffset < r.LogStartOffset:
		if err := p.log.TruncateFullyAndStartAt(r.LogStartOffset); err != nil {
			return fmt.Errorf("restart at %d: %w: %w", r.LogStartOffset, ErrStorage, err)
		}
		p.log.SetHighWatermark(r.LogStartOffset)
	case r.HighWatermark >= 0 && r.HighWatermark < rp.FetchOffset:
		if err := p.log.TruncateTo(r.HighWatermark); err != nil {
			return fmt.Errorf("truncate to %d: %w: %w", r.HighWatermark, ErrStorage, err)
		}
	default:
		return r.Err
	}
	return nil
}

// movedToTiered handles OFFSET_MOVED_TO_TIERED_STORAGE: our fetch offset
// is below the leader's local log start, in data only the remote tier
// holds (a new replica, or one down longer than the local window).
// Kafka's follower rebuilds its log's auxiliary state from the remote
// tier (ReplicaFetcherTierStateMachine); here the partition is parked
// and a RemoteRestartJob handed to the caller, so the object-store reads
// never hold up the other partitions' fetches. Without RemoteRestart,
// or when the last restart landed at this very offset (our remote-log
// metadata lags the leader's: asking again at once would only repeat
// it), the partition backs off instead.
func (f *Follower) movedToTiered(p *followPart, rp FetchPartition, err error, now time.Time, res *HandleResult) {
	if f.cfg.RemoteRestart == nil || p.restartedAt == rp.FetchOffset {
		p.restartedAt = NoOffset
		f.delay(p, err, now)
		res.Delayed = append(res.Delayed, p.tp)
		return
	}
	p.remoteJob++
	p.status, p.lastErr, p.caughtUp = statusRemote, err, false
	res.RemoteRestarts = append(res.RemoteRestarts, RemoteRestartJob{TopicPartition: p.tp, part: p, seq: p.remoteJob})
}

// OnRemoteRestart applies job's outcome: the log restarts at r.Offset
// with the remote producer state and epochs, its high watermark there,
// and fetching resumes from it. An outcome for a partition no longer
// parked by that job (removed, re-added, or moved to another epoch or
// log meanwhile: the restart point may describe a leader we no longer
// follow) is dropped; errors back the partition off by FetchBackoff, after
// which it fetches (and is answered) again. It reports whether the
// partition restarted (and can fetch at once), and the error it backed
// off with; neither means the outcome was dropped.
func (f *Follower) OnRemoteRestart(job RemoteRestartJob, r RemoteRestartResult, now time.Time) (restarted bool, err error) {
	p := job.part
	if f.parts[job.TopicPartition] != p || p.status != statusRemote || p.remoteJob != job.seq {
		return false, nil
	}
	err = r.Err
	if err == nil {
		err = f.restartFromRemote(p, r)
	}
	if err != nil {
		f.delay(p, err, now)
		return false, err
	}
	p.status, p.lastErr, p.restartedAt = statusFetching, nil, r.Offset
	return true, nil
}

func (f *Follower) restartFromRemote(p *followPart, r RemoteRestartResult) error {
	leo := p.log.LogEndOffset()
	if r.Offset <= leo {
		// Nothing gained, and our log may hold data the restart would
		// drop: the remote tier as our metadata sees it ends below what
		// we have. Ask again after the backoff.
		return fmt.Errorf("%w: remote tier ends at %d, not above our log end %d", ErrOffsetMovedToTieredStorage, r.Offset, leo)
	}
	if err := p.log.RestartFromRemote(r.Offset, r.ProducerSnapshot, r.Epochs); err != nil {
		return fmt.Errorf("restart at %d from the remote tier: %w: %w", r.Offset, ErrStorage, err)
	}
	p.log.SetHighWatermark(r.Offset)
	return nil
}
