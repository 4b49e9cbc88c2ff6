package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Disk errors on a real 3-node cluster (docs/disk-errors.md). The brokers
// run with --fault-injection; faults are added through the admin endpoint
// (faults.go) and reach whichever write path RINGLOG_TEST_IO selects.

const diskLag = 2 * time.Second

// startDiskCluster skips under -short, else starts 3 nodes with fault injection and a short
// replica.lag.time.max, and an admin client whose metadata cache (kadm
// answers Metadata from it) is short, so measured failover times are the
// brokers'.
func startDiskCluster(t *testing.T) (*testCluster, *kadm.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	c := startReplCluster(t, 3, "--replica-lag-time-max", diskLag.String(), "--fault-injection")
	logTailsOnFailure(t, c)
	return c, kadm.NewClient(c.node(1).client(t, kgo.SeedBrokers(c.addrs()...), kgo.MetadataMinAge(50*time.Millisecond)))
}

// injectFault posts one fault to b's /debug/ringlog/faults; method DELETE
// clears them.
func (b *brokerProc) injectFault(t *testing.T, method string, f vfs.FaultRequest) {
	t.Helper()
	body, _ := json.Marshal(f)
	req, err := http.NewRequest(method, "http://"+b.admin+"/debug/ringlog/faults", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		msg.ReadFrom(resp.Body)
		t.Fatalf("%s fault: %s: %s", method, resp.Status, msg.String())
	}
}

// waitAcks polls until ok accepts the per-partition acknowledged counts.
func waitAcks(t *testing.T, l *failoverLoad, limit time.Duration, what string, ok func(map[int32]int) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok(l.ackedByPartition()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (acked per partition %v, failed %d)", what, limit, l.ackedByPartition(), l.failed.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkNoLoss reads topic back and fails on a lost or reordered
// acknowledged record. Duplicates are reported, not failed: the load is
// not idempotent, and a record the failed leader had already replicated
// before its fsync failed is retried by the client (at-least-once, as in
// Kafka without idempotence).
func checkNoLoss(t *testing.T, c *testCluster, adm *kadm.Client, l *failoverLoad, topic string, partitions int) failoverResult {
	t.Helper()
	logs := readBackValues(t, c, adm, topic, partitions)
	l.mu.Lock()
	res, problems := checkFailover(l.acked, logs)
	l.mu.Unlock()
	if res.Lost+res.Reordered > 0 {
		for _, p := range problems {
			t.Error(p)
		}
		t.Fatalf("checker: %+v", res)
	}
	if res.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
	return res
}

// EIO on fsync for one partition on its leader: that replica goes
// offline, the controller moves leadership to an in-sync replica and
// acks=all continues there; the other partitions never stop; the offline
// replica stays out of the ISR until its broker restarts; no acknowledged
// record is lost.
func TestDiskErrorMovesLeadership(t *testing.T) {
	c, adm := startDiskCluster(t)
	const topic, partitions = "diskerr", 3
	m := createRF3Topic(t, adm, topic, partitions)
	load := &failoverLoad{acked: map[string]ackedRecord{}}
	load.run(t, c.addrs(), topic, partitions, 1)
	stopLoad := sync.OnceFunc(func() { load.stopped.Store(true); load.wg.Wait() })
	t.Cleanup(stopLoad)
	waitAcks(t, load, 20*time.Second, "load running", func(a map[int32]int) bool {
		return a[0] >= 20 && a[1] >= 20 && a[2] >= 20
	})

	victim := m.Topics[topic].Partitions[0].Leader
	before := load.ackedByPartition()
	start := time.Now()
	c.node(victim).injectFault(t, http.MethodPost, vfs.FaultRequest{Op: "fsync", Topic: topic, Partition: 0, Errno: "EIO"})
	m = waitMetadata(t, adm, 20*time.Second, "leadership of partition 0 moved off the failed replica", func(m kadm.Metadata) bool {
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
		if v, ok := sumSeries(scrape(t, c.node(id).admin), "ringlog_disk_offline_partitions"); !ok || v != want {
			t.Errorf("node %d: ringlog_disk_offline_partitions %v (present %v), want %v", id, v, ok, want)
		}
	}
	atMove := load.ackedByPartition()[0]
	waitAcks(t, load, 20*time.Second, "acks=all on partition 0 under its new leader", func(a map[int32]int) bool {
		return a[0] >= atMove+20
	})
	resumed := time.Since(start)
	// The other partitions kept acknowledging throughout (a bounded wait,
	// not a window: on a loaded machine 0.1 s may hold no ack at all).
	waitAcks(t, load, 10*time.Second, "acks=all on the other partitions", func(a map[int32]int) bool {
		return a[1] >= before[1]+20 && a[2] >= before[2]+20
	})
	// The offline replica is not re-added while its broker runs.
	time.Sleep(2 * diskLag)
	m = waitMetadata(t, adm, 10*time.Second, "metadata", func(kadm.Metadata) bool { return true })
	if p := m.Topics[topic].Partitions[0]; slices.Contains(p.ISR, victim) || p.Leader == victim {
		t.Fatalf("offline replica %d back in partition 0 without a restart: %+v", victim, p)
	}
	// A restart recovers the log and the replica rejoins.
	c.node(victim).stop()
	c.node(victim).restart()
	waitMetadata(t, adm, 30*time.Second, "full ISRs after the restart", fullISR(topic, partitions))
	if v, _ := sumSeries(scrape(t, c.node(victim).admin), "ringlog_disk_offline_partitions"); v != 0 {
		t.Errorf("node %d: ringlog_disk_offline_partitions %v after the restart recovered the log", victim, v)
	}
	stopLoad()
	res := checkNoLoss(t, c, adm, load, topic, partitions)
	fmt.Printf("diskerr: io=%s leader moved after %v, partition 0 acking again after %v; acknowledged=%d failed=%d lost=%d duplicated=%d\n",
		ioMode(), moved.Round(time.Millisecond), resumed.Round(time.Millisecond), res.Acked, load.failed.Load(), res.Lost, res.Duplicated)
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
	m := createRF3Topic(t, adm, topic, partitions)
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
	load := &failoverLoad{acked: map[string]ackedRecord{}}
	load.run(t, c.addrs(), topic, partitions, 2)
	stopLoad := sync.OnceFunc(func() { load.stopped.Store(true); load.wg.Wait() })
	t.Cleanup(stopLoad)
	time.Sleep(2 * time.Second)
	baseEnd := time.Now()

	const stall = 4 * time.Second
	start := time.Now()
	c.node(victim).injectFault(t, http.MethodPost, vfs.FaultRequest{Op: "fsync", PathContains: "/" + topic + "-", DelayMs: stall.Milliseconds()})
	waitMetadata(t, adm, 20*time.Second, "the slow follower out of every ISR", func(m kadm.Metadata) bool {
		for _, p := range m.Topics[topic].Partitions {
			if slices.Contains(p.ISR, victim) || len(p.ISR) != 2 {
				return false
			}
		}
		return true
	})
	shrunk := time.Since(start)
	outFrom := time.Now()
	time.Sleep(3 * time.Second)
	m = waitMetadata(t, adm, 10*time.Second, "metadata", func(kadm.Metadata) bool { return true })
	for _, p := range m.Topics[topic].Partitions {
		if slices.Contains(p.ISR, victim) {
			t.Fatalf("the slow follower rejoined %s-%d while its fsyncs stall: %+v", topic, p.Partition, p)
		}
	}
	base, during := load.latencies(time.Time{}, baseEnd), load.latencies(outFrom, time.Now())
	if len(during) < 20 || pct(during, 0.99) > time.Second {
		t.Fatalf("acks=all with the slow follower out: %d acks in 3s, p99 %v (before the fault: %d acks, p99 %v)", len(during), pct(during, 0.99), len(base), pct(base, 0.99))
	}
	// The disk recovers: the follower catches up and rejoins.
	c.node(victim).injectFault(t, http.MethodDelete, vfs.FaultRequest{})
	waitMetadata(t, adm, 30*time.Second, "the follower back in every ISR", fullISR(topic, partitions))
	stopLoad()
	res := checkNoLoss(t, c, adm, load, topic, partitions)
	fmt.Printf("slowdisk: io=%s follower %d left the ISR after %v (lag max %v); acks=all p50/p99 before %v/%v, while out %v/%v (%d acks in 3s); acknowledged=%d failed=%d lost=%d\n",
		ioMode(), victim, shrunk.Round(time.Millisecond), diskLag, pct(base, 0.5), pct(base, 0.99), pct(during, 0.5), pct(during, 0.99), len(during), res.Acked, load.failed.Load(), res.Lost)
}

// latencies returns the sorted latencies of produces acknowledged in
// [from, to).
func (l *failoverLoad) latencies(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, a := range l.lats {
		if !a.at.Before(from) && a.at.Before(to) {
			out = append(out, a.d)
		}
	}
	slices.Sort(out)
	return out
}

// pct is the q quantile of sorted latencies (an hour when there are none,
// so a bound on it fails).
func pct(ls []time.Duration, q float64) time.Duration {
	if len(ls) == 0 {
		return time.Hour
	}
	return ls[int(q*float64(len(ls)-1))]
}
