package netpath

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lateReplicas is replication that takes up the leadership of every
// partition only once the broker reconciled (the image already said this
// broker leads): Leader is nil until then.
type lateReplicas struct {
	acceptReplicas
	reconciled atomic.Bool
	purg       *replication.Purgatory
}

func (r *lateReplicas) Leader(topic string, idx int32) Leadership {
	if !r.reconciled.Load() {
		return nil
	}
	return lateLeader{r, replication.TopicPartition{Topic: topic, Partition: idx}}
}

// lateLeader acknowledges every acks=all append at once (its high
// watermark is past any offset).
type lateLeader struct {
	r  *lateReplicas
	tp replication.TopicPartition
}

func (l lateLeader) CheckProduce(int16) (int32, error) { return 0, nil }
func (l lateLeader) AwaitHW(epoch int32, last int64, arrived, deadline time.Time) *replication.Waiter {
	l.r.purg.Lead(l.tp, epoch, 1<<62, 3, 2)
	return l.r.purg.Add(l.tp, epoch, last, arrived, deadline)
}
func (l lateLeader) Ended() <-chan struct{} { return nil }
func (l lateLeader) AwaitLowWatermark(int64, time.Time, time.Time) *replication.Waiter {
	return nil
}

type reconcileHook struct {
	*testCluster
	hook func()
}

func (c reconcileHook) Reconcile() error {
	err := c.testCluster.Reconcile()
	c.hook()
	return err
}

// A produce to a replicated partition the image says this broker leads,
// arriving while replication has not taken up the leadership yet (a topic
// created a moment ago: the reconcile pass that created its log is still
// stamping its leader epoch), catches up with a reconcile instead of
// answering NOT_LEADER_OR_FOLLOWER, which kcat retried only after
// librdkafka's 100 ms backoff.
func TestProduceCatchesUpWithReplicationLeadership(t *testing.T) {
	t.Parallel()
	srv, part := singleNodeServer(t, "late")
	repl := &lateReplicas{purg: replication.NewPurgatory()}
	srv.mu.Lock()
	srv.repl = repl
	srv.cluster = reconcileHook{srv.cluster.(*testCluster), func() { repl.reconciled.Store(true) }}
	srv.mu.Unlock()
	part.SetReplicated(true)

	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "late"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Values("v")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, srv, req).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce answered error %d, base offset %d; want 0, 0", p.ErrorCode, p.BaseOffset)
	}
	if !repl.reconciled.Load() {
		t.Fatal("no reconcile")
	}
}
