package netpath

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countReplicas is acceptReplicas counting the follower progress it is
// told of.
type countReplicas struct {
	acceptReplicas
	calls atomic.Int32
}

func (c *countReplicas) FollowerFetch(string, int32, replication.FollowerFetch) (*replication.EpochEndOffset, time.Time, error) {
	c.calls.Add(1)
	return nil, time.Time{}, nil
}

// replicaFetchAt is broker 2's fetch of topic's partitions 0, 1, ... at
// the given offsets, long-polling for 10 s.
func replicaFetchAt(topic string, offsets ...int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes = 11, 2, 1, 1<<20
	req.MaxWaitMillis = 10_000
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for i, off := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = int32(i), off, 0, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// A replica fetch records the follower's progress once, when it arrives,
// as Kafka does: the read after the wake that data brings to its long
// poll returns the data without recording the same offsets again.
func TestReplicaFetchRecordsProgressOnce(t *testing.T) {
	srv, part := singleNodeServer(t, "once")
	repl := &countReplicas{}
	srv.mu.Lock()
	srv.repl = repl
	srv.mu.Unlock()
	part.SetReplicated(true)
	end := part.LogEndOffset()

	read := make(chan struct{}, 1)
	afterFetchRead = func() {
		select {
		case read <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { afterFetchRead = nil })

	req := replicaFetchAt("once", end)
	got := make(chan int64, 1)
	go func() {
		resp := srv.fetch(req, time.Now().Add(10*time.Second), make(chan struct{}), nil, new(time.Duration))
		var n int64
		for _, p := range resp.parts {
			if p.file != nil {
				n += int64(p.file.Len())
			}
		}
		resp.releaseAll()
		got <- n
	}()
	// The first read found nothing past the follower's offset; the
	// append lands after it, so the answer comes from a second read.
	<-read
	appendOne(t, part)
	select {
	case n := <-got:
		if n == 0 {
			t.Fatal("the fetch answered without the appended batch")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the fetch did not wake for the append")
	}
	if n := repl.calls.Load(); n != 1 {
		t.Fatalf("follower progress recorded %d times for one request, want 1", n)
	}
}

// After a wake, a replica fetch reads again only the partitions that
// changed since its first read: here the one appended to (which woke it)
// and one whose high watermark alone moved (which does not wake a replica
// fetch, yet its answer must carry the new HW); the third answers as
// before, without a read.
func TestReplicaFetchRereadsOnlyChanged(t *testing.T) {
	srv, eng := clusterServer(t, nil, 3, "few")
	parts := partitionsOf(t, eng, "few", 3)
	srv.mu.Lock()
	srv.repl = &countReplicas{}
	srv.mu.Unlock()
	for _, p := range parts {
		p.SetReplicated(true)
	}
	// Partition 1 holds a record above its HW.
	appendOne(t, parts[1])

	var reads atomic.Int32
	firstDone := make(chan struct{})
	afterFetchRead = func() {
		if reads.Add(1) == 3 {
			close(firstDone)
		}
	}
	t.Cleanup(func() { afterFetchRead = nil })

	req := replicaFetchAt("few", parts[0].LogEndOffset(), parts[1].LogEndOffset(), parts[2].LogEndOffset())
	type answer struct {
		resp  *kmsg.FetchResponse
		bytes map[int32]int
	}
	got := make(chan answer, 1)
	go func() {
		kr, n := doFetch(t, srv, req)
		got <- answer{kr, n}
	}()
	<-firstDone
	parts[1].SetHighWatermark(parts[1].LogEndOffset())
	appendOne(t, parts[0])
	var a answer
	select {
	case a = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the fetch did not wake for the append")
	}
	if a.bytes[0] == 0 || a.bytes[1] != 0 || a.bytes[2] != 0 {
		t.Fatalf("record bytes per partition %v, want only partition 0's", a.bytes)
	}
	for _, rp := range a.resp.Topics[0].Partitions {
		if rp.Partition == 1 && rp.HighWatermark != parts[1].LogEndOffset() {
			t.Fatalf("partition 1 answered HW %d, want the moved one %d", rp.HighWatermark, parts[1].LogEndOffset())
		}
	}
	if n := reads.Load(); n != 5 {
		t.Fatalf("%d partition reads, want 5 (three, then the two that changed)", n)
	}
}

// quietReplicas is acceptReplicas answering every follower fetch as in
// sync at the log end until quietFor from now, and counting the records
// per partition.
type quietReplicas struct {
	acceptReplicas
	mu       sync.Mutex
	quietFor time.Duration
	calls    map[int32]int
}

func (q *quietReplicas) FollowerFetch(_ string, idx int32, _ replication.FollowerFetch) (*replication.EpochEndOffset, time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls[idx]++
	return nil, time.Now().Add(q.quietFor), nil
}

// take returns the records counted since the last take.
func (q *quietReplicas) take(quietFor time.Duration) map[int32]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.calls
	q.calls, q.quietFor = map[int32]int{}, quietFor
	return c
}

// A replica fetch session's partitions that were quiet at its last fetch
// (the follower in sync at the log end, nothing to send) and have not
// changed since cost the next fetch neither a read nor a FollowerFetch
// record, until the leader's quiet time runs out; one appended to, or
// listed again by the follower, is read and recorded.
func TestSessionSkipsQuietPartitions(t *testing.T) {
	srv, eng := clusterServer(t, nil, 3, "quiet")
	parts := partitionsOf(t, eng, "quiet", 3)
	repl := &quietReplicas{calls: map[int32]int{}, quietFor: time.Hour}
	srv.mu.Lock()
	srv.repl = repl
	srv.mu.Unlock()
	for _, p := range parts {
		p.SetReplicated(true)
	}
	var reads atomic.Int32
	afterFetchRead = func() { reads.Add(1) }
	t.Cleanup(func() { afterFetchRead = nil })

	full := replicaFetchAt("quiet", parts[0].LogEndOffset(), parts[1].LogEndOffset(), parts[2].LogEndOffset())
	full.MaxWaitMillis, full.SessionEpoch = 0, 0 // opens a session
	kr, _ := doFetch(t, srv, full)
	if kr.SessionID == 0 {
		t.Fatal("no session created")
	}
	epoch := int32(1)
	// step sends the next incremental fetch (listing partitions of
	// listed at their log ends) and returns what it recorded, read and
	// answered with records. A metadata change between the reads makes
	// every partition read again, so a step that saw one is repeated.
	step := func(quietFor time.Duration, listed ...int32) (map[int32]int, int32, map[int32]int) {
		t.Helper()
		for try := 0; ; try++ {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes = 11, 2, 1, 1<<20
			req.SessionID, req.SessionEpoch = kr.SessionID, epoch
			epoch++
			if len(listed) > 0 {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "quiet"
				for _, i := range listed {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = i, parts[i].LogEndOffset(), 0, -1, 1<<20
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			repl.take(quietFor)
			reads.Store(0)
			img := srv.node.MetadataImage()
			resp, bytes := doFetch(t, srv, req)
			if resp.ErrorCode != 0 {
				t.Fatalf("fetch error %d", resp.ErrorCode)
			}
			if srv.node.MetadataImage() == img || try == 5 {
				return repl.take(quietFor), reads.Load(), bytes
			}
		}
	}

	if calls, n, _ := step(time.Hour); len(calls) != 0 || n != 0 {
		t.Fatalf("quiet session fetch: records %v and %d reads, want none", calls, n)
	}
	appendOne(t, parts[0])
	calls, n, bytes := step(time.Hour)
	if calls[0] != 1 || len(calls) != 1 || n != 1 || bytes[0] == 0 {
		t.Fatalf("after an append to partition 0: records %v, %d reads, record bytes %v; want partition 0 alone, with its records", calls, n, bytes)
	}
	// Listed again (the follower's fetch state changed), partition 2 is
	// read and recorded; partition 0 still has records to send.
	calls, n, _ = step(0, 2)
	if calls[2] != 1 || calls[1] != 0 || n != 2 {
		t.Fatalf("partition 2 listed: records %v, %d reads; want partitions 0 and 2", calls, n)
	}
	// Its quiet time was nil this time, so the next fetch records it
	// again; partition 1 is still quiet.
	calls, _, _ = step(time.Hour)
	if calls[2] != 1 || calls[1] != 0 {
		t.Fatalf("after partition 2's quiet time ran out: records %v, want partition 2's and not 1's", calls)
	}
}
