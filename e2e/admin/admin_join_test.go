package admin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAdminBrokerJoins: a fourth broker, not a controller voter, joins a
// running 3-voter cluster under acks=all load. It registers, is unfenced
// and listed by every broker; like Kafka it receives nothing of the
// existing topic by itself, while a topic created afterwards places
// replicas on it. Stopped and restarted, it rejoins with the data it has.
// The load sees no error and the checker finds no loss.
func TestAdminBrokerJoins(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // broker 4 restarted
	c := harness.StartCluster(t, 3)
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...))
	adm := kadm.NewClient(cl)
	const old, fresh, partitions = "joinold", "joinnew", 8
	harness.CreateRF3Topic(t, adm, old, partitions)
	harness.WaitMetadata(t, adm, 20*time.Second, "full ISRs", harness.FullISR(old, partitions))

	load := &harness.FailoverLoad{Acked: map[string]harness.AckedRecord{}}
	load.Run(t, c.Addrs(), old, partitions, 1)
	stopLoad := sync.OnceFunc(func() { load.Stopped.Store(true); load.Wg.Wait() })
	t.Cleanup(stopLoad)
	acked := func() int {
		load.Mu.Lock()
		defer load.Mu.Unlock()
		return len(load.Acked)
	}
	harness.Eventually(t, 10*time.Second, "the load acknowledged", func() (bool, string) { return acked() >= 100, fmt.Sprint(acked()) })

	start := time.Now()
	b4 := addBroker(t, c, 4)
	t.Logf("broker 4 joined (ready and listed by all four) in %v", time.Since(start).Round(time.Millisecond))

	// Nothing of the existing topic moves to it.
	m := harness.WaitMetadata(t, adm, 10*time.Second, "metadata", func(kadm.Metadata) bool { return true })
	for _, p := range m.Topics[old].Partitions {
		if slices.Contains(p.Replicas, 4) {
			t.Fatalf("%s-%d placed on the new broker by itself: %+v", old, p.Partition, p)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(b4.DataDir, old+"-*")); len(dirs) != 0 {
		t.Fatalf("the new broker holds %v", dirs)
	}

	// A topic created now uses it: 24 replicas over 4 brokers.
	harness.CreateRF3Topic(t, adm, fresh, partitions)
	m = harness.WaitMetadata(t, adm, 20*time.Second, "full ISRs of the new topic", harness.FullISR(fresh, partitions))
	var on4 []int32
	for _, p := range m.Topics[fresh].Partitions {
		if slices.Contains(p.Replicas, 4) {
			on4 = append(on4, p.Partition)
		}
	}
	if len(on4) < 2 {
		t.Fatalf("new topic: broker 4 hosts partitions %v, want about a quarter of the replicas", on4)
	}
	pcl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceOn4 := func(what string) {
		t.Helper()
		for _, p := range on4 {
			var recs []*kgo.Record
			for i := range 50 {
				recs = append(recs, &kgo.Record{Topic: fresh, Partition: p, Value: []byte(fmt.Sprintf("v%d", i))})
			}
			if err := pcl.ProduceSync(harness.Context(t, 10*time.Second), recs...).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d %s: %v", fresh, p, what, err)
			}
		}
	}
	produceOn4("(replicated on broker 4)")

	// Stopped and restarted, the non-voter rejoins with its data (its
	// segment files are the same files, not fetched again from scratch)
	// and catches up on what was written meanwhile.
	type fileID struct{ ino, size uint64 }
	seg := func(p int32) fileID {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(b4.DataDir, fmt.Sprintf("%s-%d", fresh, p), "00000000000000000000.log"), &st); err != nil {
			t.Fatal(err)
		}
		return fileID{st.Ino, uint64(st.Size)}
	}
	harness.Eventually(t, 10*time.Second, "broker 4 replicated the records", func() (bool, string) {
		for _, p := range on4 {
			if s := seg(p); s.size == 0 {
				return false, fmt.Sprintf("%s-%d empty", fresh, p)
			}
		}
		return true, ""
	})
	before := map[int32]fileID{}
	for _, p := range on4 {
		before[p] = seg(p)
	}
	b4.Stop()
	waitLiveBrokers(t, c, []int32{1, 2, 3}, 3*harness.SessionTimeout)
	// Written while it is away (fenced, so out of the ISRs): it must
	// catch up to rejoin them.
	produceOn4("while broker 4 is stopped")
	b4.Launch()
	b4.WaitReady(60 * time.Second)
	waitLiveBrokers(t, c, []int32{1, 2, 3, 4}, 30*time.Second)
	for _, p := range on4 {
		if got := seg(p); got.ino != before[p].ino || got.size < before[p].size {
			t.Fatalf("%s-%d on broker 4 after the restart: %+v, before %+v", fresh, p, got, before[p])
		}
	}
	harness.WaitMetadata(t, adm, 20*time.Second, "full ISRs of the new topic after the restart", harness.FullISR(fresh, partitions))
	if _, err := os.Stat(filepath.Join(b4.DataDir, old+"-0")); err == nil {
		t.Fatalf("broker 4 holds %s after the restart", old)
	}

	stopLoad()
	res := harness.CheckNoLoss(t, c, adm, load, old, partitions)
	if f := load.Failed.Load(); f != 0 {
		t.Fatalf("the load saw %d failed produces while broker 4 joined", f)
	}
	t.Logf("acknowledged %d, failed %d, lost %d, duplicated %d", res.Acked, load.Failed.Load(), res.Lost, res.Duplicated)
}
