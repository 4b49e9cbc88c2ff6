package replication

import (
	"encoding/binary"
	"testing"
)

// TestLeaderLowWatermark: the low watermark is the smallest log start over
// the leader and the ISR, unknown until every ISR follower reported one,
// and a follower outside the ISR does not hold it back.
func TestLeaderLowWatermark(t *testing.T) {
	l, log := leaderFixture(t)
	if got := l.LowWatermark(); got != NoOffset {
		t.Fatalf("low watermark before followers fetched: %d", got)
	}
	ff := func(id int32, off, start int64) {
		t.Helper()
		if _, err := l.OnFollowerFetch(FollowerFetch{ReplicaID: id, CurrentLeaderEpoch: l.LeaderEpoch(), FetchOffset: off, LastFetchedEpoch: NoEpoch, LogStartOffset: start}, t0); err != nil {
			t.Fatal(err)
		}
	}
	ff(2, 10, 0)
	ff(3, 10, 0)
	if got := l.LowWatermark(); got != 0 {
		t.Fatalf("low watermark %d, want 0", got)
	}
	if _, err := log.AdvanceLogStart(4); err != nil {
		t.Fatal(err)
	}
	ff(2, 10, 4)
	if got := l.LowWatermark(); got != 0 {
		t.Fatalf("low watermark %d while follower 3 is at 0", got)
	}
	ff(3, 10, 4)
	if got := l.LowWatermark(); got != 4 {
		t.Fatalf("low watermark %d, want 4", got)
	}
	// Follower 3 leaves the ISR: it no longer counts.
	l.setMembership([]int32{1, 2, 3}, []int32{1, 2}, t0)
	ff(3, 10, 1)
	if got := l.LowWatermark(); got != 4 {
		t.Fatalf("low watermark %d with an out-of-ISR follower at 1", got)
	}
}

// TestFollowerFollowsLeaderLogStart: a fetch response carrying a higher
// log start moves the follower's, never past its own high watermark, and
// the next request reports it.
func TestFollowerFollowsLeaderLogStart(t *testing.T) {
	log := logWith(3, 3, 3, 3, 3, 3)
	log.hw = 2
	f := NewFollower(DefaultConfig(), 2, 1)
	f.AddPartition(tpA, 3, log)
	req := f.BuildRequest(t0)
	if req.Partitions[0].LogStartOffset != 0 {
		t.Fatalf("reported start %d", req.Partitions[0].LogStartOffset)
	}
	f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 4, LogStartOffset: 5},
	}}, t0)
	if log.LogStartOffset() != 4 || log.hw != 4 {
		t.Fatalf("start %d hw %d, want 4 (capped at our HW)", log.LogStartOffset(), log.hw)
	}
	req = f.BuildRequest(t0)
	f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 6, LogStartOffset: 5},
	}}, t0)
	if log.LogStartOffset() != 5 {
		t.Fatalf("start %d, want 5", log.LogStartOffset())
	}
	if req = f.BuildRequest(t0); req.Partitions[0].LogStartOffset != 5 {
		t.Fatalf("next request reports start %d, want 5", req.Partitions[0].LogStartOffset)
	}
	// A lower start from the leader (e.g. after a leader change) never
	// moves ours back.
	f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 6, LogStartOffset: 0},
	}}, t0)
	if log.LogStartOffset() != 5 {
		t.Fatalf("start moved back to %d", log.LogStartOffset())
	}
}

// writtenHWLog caps its high watermark at its durable end, as the engine
// caps it at what it has written.
type writtenHWLog struct{ *memLog }

func (l writtenHWLog) SetHighWatermark(hw int64) { l.memLog.SetHighWatermark(min(hw, l.durable)) }

// A follower whose HW could not reach the leader's log start when the
// records came (their append was not written yet) follows the start once
// the append completes: the leader's session answers the partition no
// more while it stays quiet, and its DeleteRecords answer waits for our
// start.
func TestFollowerFollowsLogStartAfterAppend(t *testing.T) {
	log := logWith(3, 3, 3, 3)
	log.hw = 4
	f := NewFollower(DefaultConfig(), 2, 1)
	f.AddPartition(tpA, 3, writtenHWLog{log})
	req := f.BuildRequest(t0)
	res := f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 6, LogStartOffset: 6, Records: appendBatch(appendBatch(nil, 4, 3, 4), 5, 3, 5)},
	}}, t0)
	if len(res.Appended) != 1 || log.LogStartOffset() != 4 {
		t.Fatalf("appended %d, start %d: want one append and the start held at our HW 4", len(res.Appended), log.LogStartOffset())
	}
	log.flush()
	f.OnAppendDone(res.Appended[0], t0)
	if log.hw != 6 || log.LogStartOffset() != 6 {
		t.Fatalf("after the append: hw %d start %d, want both 6", log.hw, log.LogStartOffset())
	}
}

// TestFollowerRestartsAtStraddlingBatch: an empty replica restarted at the
// leader's log start gets the batch holding that offset, which starts
// below it; it restarts at the batch's base offset and appends it.
func TestFollowerRestartsAtStraddlingBatch(t *testing.T) {
	log := newMemLog()
	log.autoFlush = true
	if err := log.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	f := NewFollower(DefaultConfig(), 2, 1)
	f.AddPartition(tpA, 3, log)
	req := f.BuildRequest(t0)
	b := appendBatch(nil, 3, 3, 42) // offsets 3..7: lastOffsetDelta 4
	binary.BigEndian.PutUint32(b[23:], 4)
	res := f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 8, LogStartOffset: 5, Records: b},
	}}, t0)
	// Appended whole, then the start follows the leader's up to our HW.
	if len(res.Appended) != 1 || log.LogStartOffset() != 5 || log.LogEndOffset() != 8 {
		t.Fatalf("appended %d, log [%d, %d), want [5, 8)", len(res.Appended), log.LogStartOffset(), log.LogEndOffset())
	}
	// A log that is not empty refuses such a batch as before.
	if req = f.BuildRequest(t0); req == nil {
		t.Fatal("no request after the append")
	}
	res = f.HandleResponse(req, &FetchResponse{Partitions: []FetchPartitionResponse{
		{TopicPartition: tpA, HighWatermark: 8, LogStartOffset: 5, Records: b},
	}}, t0)
	if len(res.Appended) != 0 || log.LogEndOffset() != 8 {
		t.Fatalf("overlapping batch appended to a non-empty log: end %d", log.LogEndOffset())
	}
}
