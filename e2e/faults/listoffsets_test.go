package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsByTimestamp: ListOffsets with a timestamp answers the
// first record stamped at or after it, inside a compressed batch too,
// plus earliest, latest and max-timestamp (-3).
func TestListOffsetsByTimestamp(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir())
	ctx := harness.Context(t, 30*time.Second)
	adm := kadm.NewClient(b.Client(t))
	const topic = "by-time"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// One zstd batch of 10 records, 1 s apart (linger keeps them together).
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(50*time.Millisecond))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if rs[0].Offset != 0 || rs[9].Offset != 9 {
		t.Fatalf("offsets %d..%d", rs[0].Offset, rs[9].Offset)
	}
	for _, c := range []struct {
		after time.Duration
		want  int64
	}{{-time.Second, 0}, {0, 0}, {1500 * time.Millisecond, 2}, {9 * time.Second, 9}, {10 * time.Second, 10}} {
		res, err := adm.ListOffsetsAfterMilli(ctx, base.Add(c.after).UnixMilli(), topic)
		if err != nil || res.Error() != nil {
			t.Fatalf("ListOffsetsAfterMilli: %v %v", err, res.Error())
		}
		lo, _ := res.Lookup(topic, 0)
		if lo.Offset != c.want {
			t.Errorf("first record at or after base%+v: offset %d, want %d", c.after, lo.Offset, c.want)
		}
		if c.want < 10 && lo.Timestamp != base.Add(time.Duration(c.want)*time.Second).UnixMilli() {
			t.Errorf("first record at or after base%+v: timestamp %d, want record %d's", c.after, lo.Timestamp, c.want)
		}
	}
	start, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := start.Lookup(topic, 0)
	e, _ := end.Lookup(topic, 0)
	if s.Offset != 0 || e.Offset != 10 {
		t.Fatalf("earliest %d, latest %d; want 0, 10", s.Offset, e.Offset)
	}
	mx, err := adm.ListMaxTimestampOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := mx.Lookup(topic, 0); m.Offset != 9 || m.Timestamp != rs[9].Timestamp.UnixMilli() {
		t.Fatalf("max timestamp: offset %d at %d, want 9 at %d", m.Offset, m.Timestamp, rs[9].Timestamp.UnixMilli())
	}
}

// TestListOffsetsAfterLeaderChange: a short read-back after a leader change. Three
// brokers, RF=3; acks=all records go to every partition until the moment
// partition 0's leader is killed with SIGKILL (the followers may not yet
// have heard the HW of the last acknowledgement). Then ListOffsets for the
// end offset (-1) is sent raw (no client retry) to each surviving broker
// every 20 ms. No answer may be an end offset below what was
// acknowledged on the partition: a new leader whose HW has not reached
// its epoch start answers OFFSET_NOT_AVAILABLE (KIP-207) instead, and the
// full end once its followers have fetched from it. The log start (-2)
// and a timestamp lookup matching below the HW are answered throughout.
func TestListOffsetsAfterLeaderChange(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	c := harness.StartReplCluster(t, 3)
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(50*time.Millisecond))
	adm := kadm.NewClient(cl)
	const topic, partitions = "lo-failover", 6
	m := harness.CreateRF3Topic(t, adm, topic, partitions)
	victim := m.Topics[topic].Partitions[0].Leader
	var moved []int32 // partitions whose leader is killed
	for _, p := range m.Topics[topic].Partitions {
		if p.Leader == victim {
			moved = append(moved, p.Partition)
		}
	}

	prod := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	ctx := harness.Context(t, 60*time.Second)
	acked := make([]int64, partitions) // end of the acknowledged records
	for start := time.Now(); time.Since(start) < 2*time.Second; {
		var rs []*kgo.Record
		for p := range int32(partitions) {
			for range 20 {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")})
			}
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			acked[r.Partition] = max(acked[r.Partition], r.Offset+1)
		}
	}
	c.Node(victim).Kill9()
	t.Logf("node %d (leader of partitions %v) killed; acknowledged ends %v", victim, moved, acked)

	// Each poll asks for the end (-1), the start (-2) and the first record
	// at or after timestamp 0 (offset 0, below any HW). Only the end may
	// be refused while the HW lags: Kafka answers the start as usual and a
	// timestamp match below the HW stands.
	lookup := func(ts int64) *kmsg.ListOffsetsRequest {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := range int32(partitions) {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	}
	answered := map[int32]bool{} // partitions answered with their end
	notAvailable, bad := 0, 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	harness.EventuallyEvery(t, 20*time.Millisecond, 20*time.Second, "every partition answered an end offset after the kill", func() (bool, string) {
		for _, id := range []int32{1, 2, 3} {
			if id == victim {
				continue
			}
			for _, ts := range []int64{-1, -2, 0} {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				kresp, err := cl.Broker(int(id)).Request(rctx, lookup(ts))
				cancel()
				if err != nil {
					continue // a connection refused or reset meanwhile
				}
				for _, st := range kresp.(*kmsg.ListOffsetsResponse).Topics {
					for _, sp := range st.Partitions {
						switch {
						case sp.ErrorCode == kerr.NotLeaderForPartition.Code:
						case sp.ErrorCode == kerr.OffsetNotAvailable.Code && ts == -1:
							notAvailable++
						case sp.ErrorCode != 0:
							fail("node %d: partition %d, timestamp %d: %v", id, sp.Partition, ts, kerr.ErrorForCode(sp.ErrorCode))
						case ts != -1:
							if sp.Offset != 0 {
								fail("node %d: partition %d, timestamp %d: offset %d, want 0", id, sp.Partition, ts, sp.Offset)
							}
						case sp.Offset < acked[sp.Partition]:
							fail("node %d: partition %d end offset %d, %d records acknowledged", id, sp.Partition, sp.Offset, acked[sp.Partition])
						default:
							answered[sp.Partition] = true
						}
					}
				}
			}
		}
		return len(answered) == partitions, fmt.Sprintf("only partitions %v answered", answered)
	})
	fmt.Printf("listoffsets-failover: io=%s moved_partitions=%d offset_not_available_answers=%d wrong_answers=%d\n",
		harness.IOMode(), len(moved), notAvailable, bad)
}
