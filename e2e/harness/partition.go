package harness

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const PartitionLag = 2 * time.Second

// RunSilent is failoverLoad.run with client timeouts for a network that
// drops packets: a request to a broker that is cut off gets no answer and
// no connection error, so it must give up on its own, quickly, for the
// producer to move on to the new leader.
func (l *FailoverLoad) RunSilent(t *testing.T, seeds []string, topic string, partitions, perPartition int) {
	for p := range partitions {
		for k := range perPartition {
			id := p*perPartition + k
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				// No retries: a write that timed out may still commit
				// (REQUEST_TIMED_OUT is no "not written"), and a retry
				// of it would be a duplicate of the client's making.
				kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(4*time.Second),
				kgo.ProduceRequestTimeout(2*time.Second), kgo.RequestTimeoutOverhead(time.Second),
				kgo.DialTimeout(2*time.Second),
				kgo.MetadataMinAge(100*time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
			if err != nil {
				t.Fatal(err)
			}
			l.Wg.Add(1)
			go func() {
				defer l.Wg.Done()
				defer cl.Close()
				for seq := 0; !l.Stopped.Load() && seq < 1_000_000; seq++ {
					v := FailoverValue(id, seq)
					ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
					err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}).FirstErr()
					cancel()
					if err != nil {
						l.Failed.Add(1)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					l.Mu.Lock()
					l.Acked[v] = AckedRecord{Producer: id, Seq: seq, Partition: int32(p)}
					l.Mu.Unlock()
				}
			}()
		}
	}
}

// LogTailsOnFailure logs the last lines each broker wrote when the test
// fails. Register it after the cluster starts, so
// it runs before the brokers are stopped.
func LogTailsOnFailure(t *testing.T, c *Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, b := range c.Nodes {
			var keep []string
			for _, ln := range strings.Split(b.Out.String(), "\n") {
				// Debug lines and raft's retry noise left out.
				if ln != "" && !strings.Contains(ln, "level=DEBUG") && !strings.Contains(ln, "component=raft") {
					keep = append(keep, ln)
				}
			}
			t.Logf("node %d, last lines:\n%s", i+1, strings.Join(keep[max(0, len(keep)-60):], "\n"))
		}
	})
}

// AckedByPartition counts acknowledged records per partition.
func (l *FailoverLoad) AckedByPartition() map[int32]int {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	out := map[int32]int{}
	for _, a := range l.Acked {
		out[a.Partition]++
	}
	return out
}

// ErrName names a Kafka error code.
func ErrName(code int16) string {
	if code == 0 {
		return "acknowledged"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}

// WaitIdentical waits until every replica of each partition holds the same
// bytes as its leader (once writes stop and the ISR is full, the committed
// prefix is the whole log).
func WaitIdentical(t *testing.T, c *Cluster, topic string, partitions int32, limit time.Duration) {
	t.Helper()
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	m, err := adm.Metadata(Context(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	td := m.Topics[topic]
	if int32(len(td.Partitions)) != partitions {
		t.Fatalf("%s: %d partitions in metadata, want %d", topic, len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		deadline := time.Now().Add(limit)
		for {
			ref := SegmentBytes(c.Node(p.Leader), topic, p.Partition)
			same := len(ref) > 0
			for _, r := range p.Replicas {
				if !bytes.Equal(SegmentBytes(c.Node(r), topic, p.Partition), ref) {
					same = false
				}
			}
			if same {
				break
			}
			if time.Now().After(deadline) {
				for _, r := range p.Replicas {
					t.Logf("node %d: %d bytes", r, len(SegmentBytes(c.Node(r), topic, p.Partition)))
				}
				t.Fatalf("%s-%d: replicas differ %v after writes stopped", topic, p.Partition, limit)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// ReadBack consumes every partition from its start to its end offset.
func ReadBack(t *testing.T, c *Cluster, topic string, partitions int32) map[int32][]*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	ends := ListedEnds(t, adm, topic)
	cons := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	logs := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	ctx := Context(t, 60*time.Second)
	done := func() bool {
		for p := range partitions {
			e, _ := ends.Lookup(topic, p)
			if next[p] < e.Offset {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: stuck at %v of %v", next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			logs[r.Partition] = append(logs[r.Partition], r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return logs
}

func RecordValues(logs map[int32][]*kgo.Record) map[int32][]string {
	out := map[int32][]string{}
	for p, rs := range logs {
		for _, r := range rs {
			out[p] = append(out[p], string(r.Value))
		}
	}
	return out
}

// CreateAssigned creates topic with an explicit replica assignment
// (partition i on assign[i], the first replica leading).
func CreateAssigned(t *testing.T, cl *kgo.Client, topic string, assign [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, reps := range assign {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t, 30*time.Second), cl)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s with assignment %v: %v", topic, assign, err)
	}
}

// RawProduce sends one single-record Produce request to b and returns the
// partition's error code (0: acknowledged), or an error when no answer
// came within the timeout plus a margin. franz-go rewrites a raw
// Produce's acks to its client's RequiredAcks, so b's client must be
// configured with acks (the default is all).
func RawProduce(b *kgo.Broker, topic string, partition int32, acks int16, timeout time.Duration, value string) (int16, error) {
	return RawProduceN(b, topic, partition, acks, timeout, 1, value)
}

// RawProduceN is rawProduce with a batch of n records of the same value.
func RawProduceN(b *kgo.Broker, topic string, partition int32, acks int16, timeout time.Duration, n int, value string) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, int32(timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, EncodeBatch(n, []byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("malformed produce response %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}
