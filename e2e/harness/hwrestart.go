package harness

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch asks b (the leader) where epoch ends, as a consumer
// would.
func OffsetForLeaderEpoch(t *testing.T, b *BrokerProc, topic string, p int32, epoch int32) int64 {
	t.Helper()
	cl := b.Client(t, kgo.SeedBrokers(b.Addr))
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t, 10*time.Second), cl.SeedBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetForLeaderEpoch %s-%d epoch %d: %+v", topic, p, epoch, resp)
	}
	return resp.Topics[0].Partitions[0].EndOffset
}

// AnswerName names a request's outcome: a Kafka error, acknowledged, or
// no answer.
func AnswerName(code int16, err error) string {
	if err != nil {
		return "no answer"
	}
	return ErrName(code)
}
