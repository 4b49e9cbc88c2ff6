package groups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// collector is a franz-go group consumer that records every offset it
// receives per partition (duplicates counted).
type collector struct {
	cl   *kgo.Client
	mu   sync.Mutex
	seen map[int32]map[int64]int
	done chan struct{}
}

func startCollector(t *testing.T, addrs []string, group, topic string) *collector {
	t.Helper()
	c := &collector{seen: map[int32]map[int64]int{}, done: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				c.mu.Lock()
				if c.seen[r.Partition] == nil {
					c.seen[r.Partition] = map[int64]int{}
				}
				c.seen[r.Partition][r.Offset]++
				c.mu.Unlock()
			})
		}
	}()
	return c
}

func (c *collector) close() {
	c.cl.Close()
	<-c.done
}

// merged adds up what the collectors received: partition -> offset -> times.
func merged(cs []*collector) map[int32]map[int64]int {
	out := map[int32]map[int64]int{}
	for _, c := range cs {
		c.mu.Lock()
		for p, offs := range c.seen {
			if out[p] == nil {
				out[p] = map[int64]int{}
			}
			for o, n := range offs {
				out[p][o] += n
			}
		}
		c.mu.Unlock()
	}
	return out
}

// TestGroupsCoordinatorFailover: a group commits offsets through franz-go
// consumers on a 3-node cluster with a replicated __consumer_offsets; the
// broker coordinating the group is killed with SIGKILL. Another broker
// becomes the coordinator, OffsetFetch on it returns every committed
// offset exactly, and new consumers of the group resume exactly there:
// nothing below the committed offsets is redelivered, nothing skipped.
func TestGroupsCoordinatorFailover(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9
	c := harness.StartReplCluster(t, 3, groupBrokerArgs...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, group, parts = "fo-groups", "fo-group", 4
	harness.CreateTopic(t, adm, topic, parts, 3)
	harness.ProduceN(t, cl, topic, 400)
	// ends polls the end offsets until they add up to total records.
	ends := func(adm *kadm.Client, total int64) map[int32]int64 {
		t.Helper()
		var out map[int32]int64
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("end offsets adding up to %d", total), func() (bool, string) {
			out = map[int32]int64{}
			var sum int64
			lo, err := adm.ListEndOffsets(harness.Context(t, 10*time.Second), topic)
			if err == nil && lo.Error() == nil {
				lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset; sum += o.Offset })
			}
			return err == nil && lo.Error() == nil && len(out) == parts && sum == total, fmt.Sprintf("end offsets %v (sum %d): %v", out, sum, err)
		})
		return out
	}
	end1 := ends(adm, 400)

	// Phase 1: two consumers consume everything and commit it.
	cs := []*collector{startCollector(t, c.Addrs(), group, topic), startCollector(t, c.Addrs(), group, topic)}
	harness.Eventually(t, 60*time.Second, fmt.Sprintf("phase 1: the end offsets %v committed", end1), func() (bool, string) {
		got := map[int32]int64{}
		fo, err := adm.FetchOffsets(harness.Context(t, 10*time.Second), group)
		if err == nil && fo.Error() == nil {
			for p, o := range fo[topic] {
				got[p] = o.At
			}
		}
		ok := len(got) == parts
		for p, e := range end1 {
			ok = ok && got[p] == e
		}
		return ok, fmt.Sprint("committed ", got)
	})
	for _, cc := range cs {
		cc.close()
	}
	committed := harness.CommittedOffsets(t, adm, group, topic)
	// Phase 2 records, then kill -9 the coordinator.
	harness.ProduceN(t, cl, topic, 300)
	end2 := ends(adm, 700)

	fc := adm.FindGroupCoordinators(harness.Context(t, 10*time.Second), group)[group]
	if fc.Err != nil {
		t.Fatalf("find coordinator: %v", fc.Err)
	}
	victim := fc.NodeID
	t.Logf("coordinator of %s is node %d; committed %v; kill -9", group, victim, committed)
	c.Node(victim).Kill9()
	killed := time.Now()

	cl2, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(victim)...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	adm2 := kadm.NewClient(cl2)
	var newCoord int32 = -1
	deadline := killed.Add(60 * time.Second)
	harness.Eventually(t, time.Until(deadline), "a new coordinator within 60s of the kill", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fc := adm2.FindGroupCoordinators(ctx, group)[group]
		cancel()
		newCoord = fc.NodeID
		return fc.Err == nil && fc.NodeID != victim, fmt.Sprintf("%+v", fc)
	})
	found := time.Since(killed)
	// OffsetFetch straight to the new coordinator (retried while it
	// answers COORDINATOR_LOAD_IN_PROGRESS).
	var fetched map[int32]int64
	func() {
		// The surviving nodes' logs, for a coordinator that never answers.
		defer func() {
			if d := os.Getenv("RINGLOG_TEST_LOGDIR"); t.Failed() && d != "" {
				for id := int32(1); id <= 3; id++ {
					if id != victim {
						os.WriteFile(filepath.Join(d, fmt.Sprintf("node%d.log", id)), []byte(c.Node(id).Out.String()), 0o644)
					}
				}
			}
		}()
		harness.Eventually(t, time.Until(deadline), fmt.Sprintf("node %d answers OffsetFetch within 60s of the kill", newCoord), func() (bool, string) {
			req := kmsg.NewPtrOffsetFetchRequest() // v8: the Groups form
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = group
			req.Groups = append(req.Groups, rg)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := req.RequestWith(ctx, cl2.Broker(int(newCoord)))
			cancel()
			if err == nil && len(resp.Groups) != 1 {
				err = fmt.Errorf("OffsetFetch v%d answered %d groups", req.Version, len(resp.Groups))
			}
			if err == nil {
				err = kerr.ErrorForCode(resp.Groups[0].ErrorCode)
			}
			if err != nil {
				return false, err.Error()
			}
			fetched = map[int32]int64{}
			for _, rt := range resp.Groups[0].Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == topic && rp.ErrorCode == 0 {
						fetched[rp.Partition] = rp.Offset
					}
				}
			}
			return true, ""
		})
	}()
	t.Logf("node %d killed: node %d is the coordinator %v later, answers OffsetFetch %v after the kill",
		victim, newCoord, found.Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond))
	if len(fetched) != len(committed) {
		t.Fatalf("after failover OffsetFetch returned %v, committed %v", fetched, committed)
	}
	for p, o := range committed {
		if fetched[p] != o {
			t.Fatalf("after failover partition %d: OffsetFetch %d, committed %d (all: %v vs %v)", p, fetched[p], o, fetched, committed)
		}
	}

	// Phase 2: the group's consumers resume exactly at the committed offsets.
	cs = []*collector{startCollector(t, c.Addrs(victim), group, topic), startCollector(t, c.Addrs(victim), group, topic)}
	defer func() {
		for _, cc := range cs {
			cc.close()
		}
	}()
	want := 0
	for p := range end2 {
		want += int(end2[p] - committed[p])
	}
	var got map[int32]map[int64]int
	var distinct, dups int
	harness.Eventually(t, 90*time.Second, fmt.Sprintf("phase 2: all %d records after the committed offsets received", want), func() (bool, string) {
		got = merged(cs)
		distinct, dups = 0, 0
		for p, offs := range got {
			for o, n := range offs {
				if o < committed[p] {
					t.Fatalf("partition %d: offset %d redelivered after the failover, below the committed %d", p, o, committed[p])
				}
				if o >= end2[p] {
					t.Fatalf("partition %d: offset %d beyond the end %d", p, o, end2[p])
				}
				distinct++
				dups += n - 1
			}
		}
		return distinct == want, fmt.Sprintf("%d of %d received", distinct, want)
	})
	for p := range end2 {
		var first []int64
		for o := range got[p] {
			first = append(first, o)
		}
		sort.Slice(first, func(i, j int) bool { return first[i] < first[j] })
		if end2[p] > committed[p] && (len(first) == 0 || first[0] != committed[p]) {
			t.Fatalf("partition %d resumed at %v, committed %d", p, first, committed[p])
		}
	}
	t.Logf("resumed: %d records from the committed offsets to the end, %d redelivered at or above them", distinct, dups)
}
