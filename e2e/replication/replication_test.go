package replication

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationRF3 produces with acks=all to an RF=3 topic and checks
// that every replica holds byte-identical batches; then stops both
// followers of a partition and checks that acks=all produces are refused
// with NOT_ENOUGH_REPLICAS and none is acknowledged.
func TestReplicationRF3(t *testing.T) {
	c := harness.StartReplCluster(t, 5)
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	const topic = "rep"
	m := harness.CreateRF3Topic(t, adm, topic, 2)

	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	ctx := harness.Context(t, 60*time.Second)
	const n = 300
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprintf("v%05d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	// Every replica's log is byte-identical (the followers' HW and flush
	// may trail the acknowledgement by a fetch round).
	harness.WaitIdentical(t, c, topic, 2, 15*time.Second)
	// Everything acknowledged is readable from the leader.
	cons := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		got += fs.NumRecords()
	}

	// Both followers of partition 0 die: acks=all must not be acknowledged.
	p0 := m.Topics[topic].Partitions[0]
	for _, r := range p0.Replicas {
		if r != p0.Leader {
			c.Node(r).Kill9()
		}
	}
	pcl := c.Node(p0.Leader).Client(t, kgo.SeedBrokers(c.Node(p0.Leader).Addr),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(5*time.Second))
	deadline := time.Now().Add(30 * time.Second)
	sawNER := false
	for !sawNER {
		if time.Now().After(deadline) {
			for _, ln := range strings.Split(c.Node(p0.Leader).Out.String(), "\n") {
				if strings.Contains(ln, "ISR") || strings.Contains(ln, "lead") || strings.Contains(ln, "Alter") {
					t.Log(ln)
				}
			}
			t.Fatal("no NOT_ENOUGH_REPLICAS within 30s of killing both followers")
		}
		err := pcl.ProduceSync(harness.Context(t, 10*time.Second), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("x")}).FirstErr()
		switch {
		case err == nil:
			t.Fatal("acks=all produce acknowledged with both followers dead")
		case errors.Is(err, kerr.NotEnoughReplicas):
			sawNER = true
		default:
			t.Logf("while the ISR shrinks: %v", err)
		}
	}
}
