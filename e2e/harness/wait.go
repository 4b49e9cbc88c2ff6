package harness

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WaitMetadata polls kadm metadata through cl until ok accepts it.
func WaitMetadata(t *testing.T, adm *kadm.Client, limit time.Duration, what string, ok func(kadm.Metadata) bool) kadm.Metadata {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last kadm.Metadata
	for {
		ctx := Context(t, 5*time.Second)
		m, err := adm.Metadata(ctx)
		if err == nil {
			last = m
			if ok(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within %v; last metadata brokers %v topics %+v (err %v)", what, limit, last.Brokers.NodeIDs(), last.Topics, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitPath polls until path exists (or, with want false, is gone).
func WaitPath(t *testing.T, path string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(path)
		if (err == nil) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: exists=%v after 10s, want %v", path, err == nil, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitAcks polls until ok accepts the per-partition acknowledged counts.
func WaitAcks(t *testing.T, l *FailoverLoad, limit time.Duration, what string, ok func(map[int32]int) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok(l.AckedByPartition()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (acked per partition %v, failed %d)", what, limit, l.AckedByPartition(), l.Failed.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pollEvery is how often Eventually and Holds look at their condition.
const pollEvery = 50 * time.Millisecond

// Eventually polls cond until it holds, failing the test with cond's last
// description of the state after limit. It returns how long that took.
func Eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v: %s", what, limit, state)
		}
		<-tick.C
	}
}

// Holds checks that cond stays true for d, looking every 50 ms, and fails
// the test the first time it does not. It is how a test shows that
// something does not happen; the caller's comment says why d is long
// enough to have seen it if it did.
func Holds(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if ok, state := cond(); !ok {
			t.Fatalf("%s: broken after %v of %v: %s", what, d-time.Until(end), d, state)
		}
		if !time.Now().Before(end) {
			return
		}
		<-tick.C
	}
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

// WaitStable waits until no transaction is open on topic: every
// partition's last stable offset is its high watermark. EndTxn answers
// before the markers are written, so this is how a test knows the outcome
// reached the partitions.
func WaitStable(ctx context.Context, t *testing.T, seeds []string, topic string) {
	t.Helper()
	adm := kadm.NewClient(NewClient(t, seeds))
	for {
		lso, err1 := adm.ListCommittedOffsets(ctx, topic)
		hw, err2 := adm.ListEndOffsets(ctx, topic)
		if err1 == nil && err2 == nil && lso.Error() == nil && hw.Error() == nil {
			same := true
			hw.Each(func(o kadm.ListedOffset) {
				if l, ok := lso.Lookup(topic, o.Partition); !ok || l.Offset != o.Offset {
					same = false
				}
			})
			if same {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still has open transactions: last stable offsets %v, high watermarks %v", topic, lso, hw)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
