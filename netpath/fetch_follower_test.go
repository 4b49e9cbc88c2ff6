package netpath

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countReplicas is acceptReplicas counting the follower progress it is
// told of.
type countReplicas struct {
	acceptReplicas
	calls atomic.Int32
}

func (c *countReplicas) FollowerFetch(string, int32, replication.FollowerFetch) (*replication.EpochEndOffset, error) {
	c.calls.Add(1)
	return nil, nil
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

	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes = 11, 2, 1, 1<<20
	req.MaxWaitMillis = 10_000
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "once"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.LogStartOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = end, 0, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
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
	w, err := part.Append(batchtest.Values("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
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
