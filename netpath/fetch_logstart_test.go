package netpath

import (
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// acceptReplicas takes every follower fetch (a leader with no ISR rules):
// enough for the fetch path's replica mode.
type acceptReplicas struct{}

func (acceptReplicas) Leader(string, int32) Leadership { return nil }
func (acceptReplicas) FollowerFetch(string, int32, replication.FollowerFetch) (*replication.EpochEndOffset, time.Time, error) {
	return nil, time.Time{}, nil
}
func (acceptReplicas) OffsetsAvailable(string, int32, int32) error { return nil }
func (acceptReplicas) Cancel(*replication.Waiter)                  {}
func (acceptReplicas) Waiting() int                                { return 0 }
func (acceptReplicas) WaitingLow() int                             { return 0 }
func (acceptReplicas) LeaderThrottle(string, int32, int32) (bool, time.Duration) {
	return false, 0
}
func (acceptReplicas) RecordLeaderThrottle(int64, bool) {}

// A DeleteRecords answer waits for the followers to report the leader's
// new log start. A follower's fetch parked at the log end therefore
// answers when the start moves past the one it reported, and a fetch
// reporting a start below ours answers at once; one reporting our start
// waits for data as before.
func TestReplicaFetchAnswersLogStartMove(t *testing.T) {
	srv, part := singleNodeServer(t, "ls")
	for range 10 {
		w, err := part.Append(batchtest.Values("v"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
	}
	srv.mu.Lock()
	srv.repl = acceptReplicas{}
	srv.mu.Unlock()
	part.SetReplicated(true)
	end := part.LogEndOffset()
	done := make(chan struct{})
	fetch := func(reported int64, wait time.Duration) time.Duration {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes = 11, 2, 1, 1<<20
		req.MaxWaitMillis = int32(wait / time.Millisecond)
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "ls"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.LogStartOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = end, reported, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		t0 := time.Now()
		srv.fetch(req, t0.Add(wait), done, nil, new(time.Duration)).releaseAll()
		return time.Since(t0)
	}
	const short = 150 * time.Millisecond
	if d := fetch(0, short); d < short*8/10 {
		t.Fatalf("fetch reporting our start answered after %v, want the long poll (%v)", d, short)
	}
	took := make(chan time.Duration, 1)
	go func() { took <- fetch(0, 10*time.Second) }()
	// Reporting our start with no data past its offset, it parks: no
	// answer for 100 ms (it would come at once if it were not waiting).
	select {
	case d := <-took:
		t.Fatalf("fetch reporting our start answered after %v, before the log start moved", d)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := part.AdvanceLogStart(4); err != nil {
		t.Fatal(err)
	}
	if d := <-took; d > 5*time.Second {
		t.Fatalf("parked fetch answered %v after its start, not at the log start move", d)
	}
	if d := fetch(0, 10*time.Second); d > 5*time.Second {
		t.Fatalf("fetch reporting start 0 below ours (4) waited %v", d)
	}
	if d := fetch(4, short); d < short*8/10 {
		t.Fatalf("fetch reporting our new start answered after %v, want the long poll", d)
	}
}
