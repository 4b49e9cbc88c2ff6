package faults

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const diskLag = 2 * time.Second

// startDiskCluster skips under -short, else starts 3 nodes with fault injection and a short
// replica.lag.time.max, and an admin client whose metadata cache (kadm
// answers Metadata from it) is short, so measured failover times are the
// brokers'.
func startDiskCluster(t *testing.T) (*harness.Cluster, *kadm.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	c := harness.StartReplCluster(t, 3, "--replica-lag-time-max", diskLag.String(), "--fault-injection")
	harness.LogTailsOnFailure(t, c)
	return c, kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(50*time.Millisecond)))
}

// EIO on fsync for one partition on its leader: that replica goes
// offline, the controller moves leadership to an in-sync replica and
// acks=all continues there; the other partitions never stop; the offline
// replica stays out of the ISR until its broker restarts; no acknowledged
// record is lost.
func TestDiskErrorMovesLeadership(t *testing.T) {
	t.Parallel()
	c, adm := startDiskCluster(t)
	const topic, partitions = "diskerr", 3
	m := harness.CreateRF3Topic(t, adm, topic, partitions)
	load := &harness.FailoverLoad{Acked: map[string]harness.AckedRecord{}}
	load.Run(t, c.Addrs(), topic, partitions, 1)
	stopLoad := sync.OnceFunc(func() { load.Stopped.Store(true); load.Wg.Wait() })
	t.Cleanup(stopLoad)
	harness.WaitAcks(t, load, 20*time.Second, "load running", func(a map[int32]int) bool {
		return a[0] >= 20 && a[1] >= 20 && a[2] >= 20
	})

	victim := m.Topics[topic].Partitions[0].Leader
	before := load.AckedByPartition()
	start := time.Now()
	c.Node(victim).InjectFault(t, http.MethodPost, vfs.FaultRequest{Op: "fsync", Topic: topic, Partition: 0, Errno: "EIO"})
	m = harness.WaitMetadata(t, adm, 20*time.Second, "leadership of partition 0 moved off the failed replica", func(m kadm.Metadata) bool {
		p := m.Topics[topic].Partitions[0]
		return p.Leader >= 0 && p.Leader != victim && !slices.Contains(p.ISR, victim)
	})
	moved := time.Since(start)
	if p := m.Topics[topic].Partitions[0]; !slices.Contains(p.OfflineReplicas, victim) {
		t.Errorf("metadata does not list replica %d offline: %+v", victim, p)
	}
	// The failing disk shows on the victim's dashboard, nowhere else.
	for _, id := range []int32{1, 2, 3} {
		want := 0.0
		if id == victim {
			want = 1
		}
		if v, ok := harness.SumSeries(harness.Scrape(t, c.Node(id).Admin), "ringlog_disk_offline_partitions"); !ok || v != want {
			t.Errorf("node %d: ringlog_disk_offline_partitions %v (present %v), want %v", id, v, ok, want)
		}
	}
	atMove := load.AckedByPartition()[0]
	harness.WaitAcks(t, load, 20*time.Second, "acks=all on partition 0 under its new leader", func(a map[int32]int) bool {
		return a[0] >= atMove+20
	})
	resumed := time.Since(start)
	// The other partitions kept acknowledging throughout (a bounded wait,
	// not a window: on a loaded machine 0.1 s may hold no ack at all).
	harness.WaitAcks(t, load, 10*time.Second, "acks=all on the other partitions", func(a map[int32]int) bool {
		return a[1] >= before[1]+20 && a[2] >= before[2]+20
	})
	// The offline replica is not re-added while its broker runs. Two lag
	// windows: a replica fetching again would be back within one.
	harness.Holds(t, 2*diskLag, fmt.Sprintf("replica %d out of partition 0", victim), func() (bool, string) {
		m, err := adm.Metadata(harness.Context(t, 5*time.Second), topic)
		if err != nil {
			return true, "" // no answer, nothing seen
		}
		p := m.Topics[topic].Partitions[0]
		return !slices.Contains(p.ISR, victim) && p.Leader != victim, fmt.Sprintf("%+v", p)
	})
	m = harness.WaitMetadata(t, adm, 10*time.Second, "metadata", func(kadm.Metadata) bool { return true })
	if p := m.Topics[topic].Partitions[0]; slices.Contains(p.ISR, victim) || p.Leader == victim {
		t.Fatalf("offline replica %d back in partition 0 without a restart: %+v", victim, p)
	}
	// A restart recovers the log and the replica rejoins.
	c.Node(victim).Stop()
	c.Node(victim).Restart()
	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs after the restart", harness.FullISR(topic, partitions))
	if v, _ := harness.SumSeries(harness.Scrape(t, c.Node(victim).Admin), "ringlog_disk_offline_partitions"); v != 0 {
		t.Errorf("node %d: ringlog_disk_offline_partitions %v after the restart recovered the log", victim, v)
	}
	stopLoad()
	res := harness.CheckNoLoss(t, c, adm, load, topic, partitions)
	fmt.Printf("diskerr: io=%s leader moved after %v, partition 0 acking again after %v; acknowledged=%d failed=%d lost=%d duplicated=%d\n",
		harness.IOMode(), moved.Round(time.Millisecond), resumed.Round(time.Millisecond), res.Acked, load.Failed.Load(), res.Lost, res.Duplicated)
}

// A follower whose fsyncs stall for seconds stops reporting progress (a
// follower fetches only from its durable end), leaves the ISR after
// replica.lag.time.max, and acks=all continues at normal latency on the
// other two; once the disk is healthy again it catches up and rejoins.
func TestSlowFsyncFollowerLeavesISR(t *testing.T) {
	c, adm := startDiskCluster(t)
	// Two partitions on three brokers: one broker leads neither, so its
	// slow disk delays no leader's own fsync.
	const topic, partitions = "slowdisk", 2
	m := harness.CreateRF3Topic(t, adm, topic, partitions)
	victim := int32(-1)
	for id := int32(1); id <= 3; id++ {
		if m.Topics[topic].Partitions[0].Leader != id && m.Topics[topic].Partitions[1].Leader != id {
			victim = id
		}
	}
	if victim < 0 {
		t.Fatalf("no broker free of leaderships: %+v", m.Topics[topic].Partitions)
	}
	// One producer per partition, so a stalled partition does not hold
	// back the others' load (which would let the slow follower catch up
	// on an idle partition and rejoin).
	load := &harness.FailoverLoad{Acked: map[string]harness.AckedRecord{}}
	load.Run(t, c.Addrs(), topic, partitions, 2)
	stopLoad := sync.OnceFunc(func() { load.Stopped.Store(true); load.Wg.Wait() })
	t.Cleanup(stopLoad)
	load.WaitGrowth(t, partitions, 50, 20*time.Second, "a baseline of acks=all on every partition")
	baseEnd := time.Now()

	const stall = 4 * time.Second
	start := time.Now()
	c.Node(victim).InjectFault(t, http.MethodPost, vfs.FaultRequest{Op: "fsync", PathContains: "/" + topic + "-", DelayMs: stall.Milliseconds()})
	harness.WaitMetadata(t, adm, 20*time.Second, "the slow follower out of every ISR", func(m kadm.Metadata) bool {
		for _, p := range m.Topics[topic].Partitions {
			if slices.Contains(p.ISR, victim) || len(p.ISR) != 2 {
				return false
			}
		}
		return true
	})
	shrunk := time.Since(start)
	outFrom := time.Now()
	// 3 s: the window whose acks=all latencies are checked below, most of
	// one 4 s fsync stall; the follower must not rejoin at any time in it.
	harness.Holds(t, 3*time.Second, "the slow follower out of every ISR", func() (bool, string) {
		m, err := adm.Metadata(harness.Context(t, 5*time.Second), topic)
		if err != nil {
			return true, "" // no answer, nothing seen
		}
		for _, p := range m.Topics[topic].Partitions {
			if slices.Contains(p.ISR, victim) {
				return false, fmt.Sprintf("rejoined %s-%d while its fsyncs stall: %+v", topic, p.Partition, p)
			}
		}
		return true, ""
	})
	m = harness.WaitMetadata(t, adm, 10*time.Second, "metadata", func(kadm.Metadata) bool { return true })
	for _, p := range m.Topics[topic].Partitions {
		if slices.Contains(p.ISR, victim) {
			t.Fatalf("the slow follower rejoined %s-%d while its fsyncs stall: %+v", topic, p.Partition, p)
		}
	}
	base, during := load.Latencies(time.Time{}, baseEnd), load.Latencies(outFrom, time.Now())
	if len(during) < 20 || pct(during, 0.99) > time.Second {
		t.Fatalf("acks=all with the slow follower out: %d acks in 3s, p99 %v (before the fault: %d acks, p99 %v)", len(during), pct(during, 0.99), len(base), pct(base, 0.99))
	}
	// The disk recovers: the follower catches up and rejoins.
	c.Node(victim).InjectFault(t, http.MethodDelete, vfs.FaultRequest{})
	harness.WaitMetadata(t, adm, 30*time.Second, "the follower back in every ISR", harness.FullISR(topic, partitions))
	stopLoad()
	res := harness.CheckNoLoss(t, c, adm, load, topic, partitions)
	fmt.Printf("slowdisk: io=%s follower %d left the ISR after %v (lag max %v); acks=all p50/p99 before %v/%v, while out %v/%v (%d acks in 3s); acknowledged=%d failed=%d lost=%d\n",
		harness.IOMode(), victim, shrunk.Round(time.Millisecond), diskLag, pct(base, 0.5), pct(base, 0.99), pct(during, 0.5), pct(during, 0.99), len(during), res.Acked, load.Failed.Load(), res.Lost)
}

// pct is the q quantile of sorted latencies (an hour when there are none,
// so a bound on it fails).
func pct(ls []time.Duration, q float64) time.Duration {
	if len(ls) == 0 {
		return time.Hour
	}
	return ls[int(q*float64(len(ls)-1))]
}
