package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WaitMetadata polls kadm metadata through cl until ok accepts it.
func WaitMetadata(t *testing.T, adm *kadm.Client, limit time.Duration, what string, ok func(kadm.Metadata) bool) kadm.Metadata {
	t.Helper()
	var last kadm.Metadata
	EventuallyEvery(t, 100*time.Millisecond, limit, what, func() (bool, string) {
		m, err := adm.Metadata(Context(t, 5*time.Second))
		if err == nil {
			last = m
			if ok(m) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("last metadata brokers %v topics %+v (err %v)", last.Brokers.NodeIDs(), last.Topics, err)
	})
	return last
}

// WaitPath polls until path exists (or, with want false, is gone).
func WaitPath(t *testing.T, path string, want bool) {
	t.Helper()
	Eventually(t, 10*time.Second, path, func() (bool, string) {
		_, err := os.Stat(path)
		return (err == nil) == want, fmt.Sprintf("exists=%v, want %v", err == nil, want)
	})
}

// WaitAcks polls until ok accepts the per-partition acknowledged counts.
func WaitAcks(t *testing.T, l *FailoverLoad, limit time.Duration, what string, ok func(map[int32]int) bool) {
	t.Helper()
	Eventually(t, limit, what, func() (bool, string) {
		a := l.AckedByPartition()
		return ok(a), fmt.Sprintf("acked per partition %v, failed %d", a, l.Failed.Load())
	})
}

// WaitGrowth waits until each of partitions 0..partitions-1 has n more
// acknowledged records than when it was called: the load runs (again).
func (l *FailoverLoad) WaitGrowth(t *testing.T, partitions, n int, limit time.Duration, what string) {
	t.Helper()
	since := l.AckedByPartition()
	WaitAcks(t, l, limit, what, func(a map[int32]int) bool {
		for p := range int32(partitions) {
			if a[p] < since[p]+n {
				return false
			}
		}
		return true
	})
}

// TimeLeft is how long ctx has until its deadline (a day without one): the
// limit of a wait whose requests are bounded by ctx.
func TimeLeft(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return 24 * time.Hour
}

// WaitUpTo polls cond for at most limit and reports whether it came true:
// for a wait whose running out is no failure (a load given time to build
// up before a fault, whatever it reached).
func WaitUpTo(limit time.Duration, cond func() bool) bool {
	ok, _ := poll(pollEvery, limit, func() (bool, string) { return cond(), "" })
	return ok
}

// pollEvery is how often Eventually and Holds look at their condition.
const pollEvery = 50 * time.Millisecond

// Eventually polls cond until it holds, failing the test with cond's last
// description of the state after limit. It returns how long that took.
func Eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return EventuallyEvery(t, pollEvery, limit, what, cond)
}

// EventuallyEvery is Eventually looking every interval: less often for a
// costly condition, more often where the moment it holds is measured.
func EventuallyEvery(t *testing.T, every, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	if ok, state := poll(every, limit, cond); !ok {
		t.Fatalf("%s: not within %v: %s", what, limit, state)
	}
	return time.Since(start)
}

// poll calls cond every interval until it holds or limit has passed (cond
// is asked once more after that), and returns its last answer.
func poll(every, limit time.Duration, cond func() (bool, string)) (bool, string) {
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok || time.Since(start) > limit {
			return ok, state
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
	// Asked until every partition has a leader: a broker just back from
	// a fault may answer from a metadata image not yet caught up.
	m := WaitMetadata(t, adm, limit, fmt.Sprintf("%s: %d partitions with leaders", topic, partitions), func(m kadm.Metadata) bool {
		td := m.Topics[topic]
		if td.Err != nil || int32(len(td.Partitions)) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return true
	})
	for _, p := range m.Topics[topic].Partitions {
		EventuallyEvery(t, 100*time.Millisecond, limit, fmt.Sprintf("%s-%d: replicas identical after writes stopped", topic, p.Partition), func() (bool, string) {
			ref := SegmentBytes(c.Node(p.Leader), topic, p.Partition)
			same := len(ref) > 0
			var sizes []string
			for _, r := range p.Replicas {
				b := SegmentBytes(c.Node(r), topic, p.Partition)
				same = same && bytes.Equal(b, ref)
				sizes = append(sizes, fmt.Sprintf("node %d: %d bytes", r, len(b)))
			}
			return same, strings.Join(sizes, ", ")
		})
	}
}

// WaitStable waits until no transaction is open on topic: every
// partition's last stable offset is its high watermark. EndTxn answers
// before the markers are written, so this is how a test knows the outcome
// reached the partitions.
func WaitStable(ctx context.Context, t *testing.T, seeds []string, topic string) {
	t.Helper()
	adm := kadm.NewClient(NewClient(t, seeds))
	EventuallyEvery(t, 100*time.Millisecond, TimeLeft(ctx), topic+": no open transaction", func() (bool, string) {
		lso, err1 := adm.ListCommittedOffsets(ctx, topic)
		hw, err2 := adm.ListEndOffsets(ctx, topic)
		state := fmt.Sprintf("still open: last stable offsets %v, high watermarks %v", lso, hw)
		if err1 != nil || err2 != nil || lso.Error() != nil || hw.Error() != nil {
			return false, state
		}
		same := true
		hw.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(topic, o.Partition); !ok || l.Offset != o.Offset {
				same = false
			}
		})
		return same, state
	})
}
