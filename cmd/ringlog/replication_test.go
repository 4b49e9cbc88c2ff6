package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Replication tests: real brokers on loopback, RF=3 topics, franz-go
// producers with acks=all.

const testReplicaLag = 3 * time.Second

// startReplCluster starts n voter+broker nodes like startCluster, with a
// short replica.lag.time.max and extra flags.
func startReplCluster(t *testing.T, n int, extra ...string) *testCluster {
	t.Helper()
	return startReplClusterAt(t, freshNodeSpecs(t, n), extra...)
}

// startReplClusterAt is startReplCluster on explicit addresses: node i+1
// listens where specs[i] says.
func startReplClusterAt(t *testing.T, specs []nodeSpec, extra ...string) *testCluster {
	t.Helper()
	flags := append([]string{"--replica-lag-time-max", testReplicaLag.String()}, extra...)
	return startClusterAt(t, specs, len(specs), func(int) []string { return flags })
}

// createRF3Topic creates topic with partitions partitions, RF=3 and
// min.insync.replicas=2, and waits until every partition has a leader and
// a full ISR.
func createRF3Topic(t *testing.T, adm *kadm.Client, topic string, partitions int) kadm.Metadata {
	t.Helper()
	resp, err := adm.CreateTopic(testContext(t, 30*time.Second), int32(partitions), 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return waitMetadata(t, adm, 30*time.Second, "full ISRs", fullISR(topic, partitions))
}

// fullISR is a waitMetadata condition: every partition of topic has a
// leader and all three replicas in its ISR.
func fullISR(topic string, partitions int) func(kadm.Metadata) bool {
	return func(m kadm.Metadata) bool {
		td := m.Topics[topic]
		if len(td.Partitions) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	}
}

// segmentBytes reads a partition's first segment file on one node.
func segmentBytes(b *brokerProc, topic string, p int32) []byte {
	data, _ := os.ReadFile(filepath.Join(b.dataDir, fmt.Sprintf("%s-%d", topic, p), "00000000000000000000.log"))
	return data
}

// TestReplicationRF3 produces with acks=all to an RF=3 topic and checks
// that every replica holds byte-identical batches; then stops both
// followers of a partition and checks that acks=all produces are refused
// with NOT_ENOUGH_REPLICAS and none is acknowledged.
func TestReplicationRF3(t *testing.T) {
	c := startReplCluster(t, 5)
	adm := kadm.NewClient(c.node(1).client(t, kgo.SeedBrokers(c.addrs()...)))
	const topic = "rep"
	m := createRF3Topic(t, adm, topic, 2)

	cl := c.node(1).client(t, kgo.SeedBrokers(c.addrs()...),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	ctx := testContext(t, 60*time.Second)
	const n = 300
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprintf("v%05d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	// Every replica's log is byte-identical (the followers' HW and flush
	// may trail the acknowledgement by a fetch round).
	for _, p := range m.Topics[topic].Partitions {
		deadline := time.Now().Add(15 * time.Second)
		for {
			ref := segmentBytes(c.node(p.Leader), topic, p.Partition)
			same := len(ref) > 0
			for _, r := range p.Replicas {
				if !bytes.Equal(segmentBytes(c.node(r), topic, p.Partition), ref) {
					same = false
				}
			}
			if same {
				t.Logf("%s-%d: %d bytes identical on replicas %v", topic, p.Partition, len(ref), p.Replicas)
				break
			}
			if time.Now().After(deadline) {
				for _, r := range p.Replicas {
					t.Logf("node %d: %d bytes", r, len(segmentBytes(c.node(r), topic, p.Partition)))
				}
				t.Fatalf("%s-%d: replicas differ after 15s", topic, p.Partition)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Everything acknowledged is readable from the leader.
	cons := c.node(1).client(t, kgo.SeedBrokers(c.addrs()...), kgo.ConsumeTopics(topic),
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
			c.node(r).kill9()
		}
	}
	pcl := c.node(p0.Leader).client(t, kgo.SeedBrokers(c.node(p0.Leader).addr),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(5*time.Second))
	deadline := time.Now().Add(30 * time.Second)
	sawNER := false
	for !sawNER {
		if time.Now().After(deadline) {
			for _, ln := range strings.Split(c.node(p0.Leader).out.String(), "\n") {
				if strings.Contains(ln, "ISR") || strings.Contains(ln, "lead") || strings.Contains(ln, "Alter") {
					t.Log(ln)
				}
			}
			t.Fatal("no NOT_ENOUGH_REPLICAS within 30s of killing both followers")
		}
		err := pcl.ProduceSync(testContext(t, 10*time.Second), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("x")}).FirstErr()
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
