package replication

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const failoverLag = 2 * time.Second

func TestCheckFailoverDetects(t *testing.T) {
	t.Parallel()
	acked := map[string]harness.AckedRecord{
		"a": {Producer: 0, Seq: 0, Partition: 0}, "b": {Producer: 0, Seq: 1, Partition: 0}, "c": {Producer: 0, Seq: 2, Partition: 0}, "d": {Producer: 1, Seq: 0, Partition: 1},
	}
	res, _ := harness.CheckFailover(acked, map[int32][]string{0: {"b", "a", "c", "c", "x"}, 1: {}})
	want := harness.FailoverResult{Acked: 4, Lost: 1, Duplicated: 1, Reordered: 1, Unacked: 1}
	if res != want {
		t.Fatalf("got %+v want %+v", res, want)
	}
	if res, p := harness.CheckFailover(acked, map[int32][]string{0: {"a", "b", "c"}, 1: {"d"}}); res.Lost+res.Duplicated+res.Reordered != 0 || len(p) != 0 {
		t.Fatalf("clean history flagged: %+v %v", res, p)
	}
}

func TestFailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	rounds := harness.EnvRepeats(t, "RINGLOG_CHAOS_ROUNDS")
	c := harness.StartReplCluster(t, 5, "--replica-lag-time-max", failoverLag.String())
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...)))
	const topic, partitions = "chaos", 3
	harness.CreateRF3Topic(t, adm, topic, partitions)
	allISR := harness.FullISR(topic, partitions)

	load := &harness.FailoverLoad{Acked: map[string]harness.AckedRecord{}}
	load.Run(t, c.Addrs(), topic, partitions, 2)
	stopLoad := sync.OnceFunc(func() { load.Stopped.Store(true); load.Wg.Wait() })
	t.Cleanup(stopLoad)

	faults := 0
	load.WaitGrowth(t, partitions, 20, 30*time.Second, "load running on every partition")
	for round := range rounds {
		for k := range 2 {
			victim := harness.PartitionLeader(t, adm, topic, partitions, 0)
			t.Logf("round %d: kill -9 node %d (leader of %s-0)", round, victim, topic)
			c.Node(victim).Kill9()
			faults++
			// Real time: the fault is the leader down this long under load.
			time.Sleep(time.Duration(1500+500*k) * time.Millisecond)
			c.Node(victim).Restart()
			harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs after restart", allISR)
		}
		// A follower paused past the lag window leaves the ISR; resumed,
		// it catches up and rejoins.
		m := harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs", allISR)
		p1 := m.Topics[topic].Partitions[1]
		var follower int32 = -1
		for _, r := range p1.Replicas {
			if r != p1.Leader {
				follower = r
			}
		}
		t.Logf("round %d: SIGSTOP node %d (follower of %s-1) for %v", round, follower, topic, 2*failoverLag)
		c.Node(follower).Signal(syscall.SIGSTOP)
		faults++
		// Real time: paused past the lag window.
		time.Sleep(2 * failoverLag)
		c.Node(follower).Signal(syscall.SIGCONT)
		harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs after SIGCONT", allISR)
	}
	load.WaitGrowth(t, partitions, 20, 30*time.Second, "acks on every partition after the last fault")
	stopLoad()
	if len(load.Acked) == 0 {
		t.Fatal("nothing acknowledged")
	}

	// Every replica converges on the same bytes (the committed prefix is
	// the whole log once producers stop and the ISR is full).
	harness.WaitMetadata(t, adm, 30*time.Second, "full ISRs at the end", allISR)
	harness.WaitIdentical(t, c, topic, partitions, 20*time.Second)

	logs := harness.ReadBackValues(t, c, adm, topic, partitions)
	load.Mu.Lock()
	res, problems := harness.CheckFailover(load.Acked, logs)
	load.Mu.Unlock()
	total := 0
	for _, v := range logs {
		total += len(v)
	}
	fmt.Printf("chaos: rounds=%d faults=%d acknowledged=%d failed=%d in_log=%d lost=%d duplicated=%d reordered=%d\n",
		rounds, faults, res.Acked, load.Failed.Load(), total, res.Lost, res.Duplicated, res.Reordered)
	for _, p := range problems {
		t.Error(p)
	}
	if res.Lost+res.Duplicated+res.Reordered > 0 {
		t.Fatal(errors.New("checker found anomalies"))
	}
}
