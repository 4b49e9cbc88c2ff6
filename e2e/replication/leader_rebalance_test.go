package replication

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// preferredLed reports whether every partition of topic is led by its
// preferred replica with a full ISR of rf.
func preferredLed(m kadm.Metadata, topic string, partitions, rf int) bool {
	td, ok := m.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) != partitions {
		return false
	}
	for _, p := range td.Partitions {
		if len(p.Replicas) != rf || p.Leader != p.Replicas[0] || len(p.ISR) != rf {
			return false
		}
	}
	return true
}

// TestLeaderRebalanceAfterRestart kills a broker, lets its leaderships
// move, restarts it, and checks that once it is back in every ISR the
// controller's periodic rebalance returns each partition to its preferred
// replica, with no acknowledged record lost; and that ElectLeaders answers
// as Kafka does.
func TestLeaderRebalanceAfterRestart(t *testing.T) {
	t.Parallel()
	const (
		topic    = "rebal"
		parts    = 6
		interval = 2 * time.Second
	)
	c := harness.StartVoterCluster(t, 3, []string{"", "", ""}, "--leader-rebalance-interval", interval.String())
	cl := c.Node(1).Client(t, kgo.SeedBrokers(c.Addrs()...), harness.FreshMetadata)
	adm := kadm.NewClient(cl)
	harness.CreateTopic(t, adm, topic, parts, 3)
	m := harness.WaitMetadata(t, adm, 10*time.Second, "topic led by its preferred replicas", func(m kadm.Metadata) bool {
		return preferredLed(m, topic, parts, 3)
	})
	ctx := harness.Context(t, 120*time.Second)
	produced := 0
	produce := func(cl *kgo.Client, n int) {
		t.Helper()
		for range n {
			r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", produced)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", produced, err)
			}
			produced++
		}
	}
	produce(cl, 30)

	// A broker that is not the controller, so no controller election adds
	// to the timings.
	ctrl := c.Controller(10 * time.Second)
	victim := int32(1)
	for victim == ctrl {
		victim++
	}
	var victimParts []int32
	for _, p := range m.Topics[topic].Partitions {
		if p.Replicas[0] == victim {
			victimParts = append(victimParts, p.Partition)
		}
	}
	if len(victimParts) != parts/3 {
		t.Fatalf("node %d is preferred leader of %v, want %d partitions", victim, victimParts, parts/3)
	}
	c.Node(victim).Kill9()
	killed := time.Now()
	scl := c.Node(ctrl).Client(t, kgo.SeedBrokers(c.Addrs(victim)...), harness.FreshMetadata)
	sadm := kadm.NewClient(scl)
	harness.WaitMetadata(t, sadm, harness.SessionTimeout+6*time.Second, "leaderships moved off the killed broker", func(m kadm.Metadata) bool {
		td := m.Topics[topic]
		if slices.Contains(m.Brokers.NodeIDs(), victim) || len(td.Partitions) != parts {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader == victim || p.Leader < 0 || slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})
	t.Logf("node %d killed; leaderships moved %v later", victim, time.Since(killed).Round(10*time.Millisecond))
	res, err := sadm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {victimParts[0]: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[topic][victimParts[0]].Err; !errors.Is(got, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred election with the preferred replica down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", got)
	}
	produce(scl, 30)

	c.Node(victim).Restart()
	restarted := time.Now()
	harness.WaitMetadata(t, sadm, 30*time.Second, "restarted node back in every ISR", func(m kadm.Metadata) bool {
		td := m.Topics[topic]
		if !slices.Contains(m.Brokers.NodeIDs(), victim) || len(td.Partitions) != parts {
			return false
		}
		for _, p := range td.Partitions {
			if !slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})
	inSync := time.Now()
	t.Logf("node %d back in every ISR %v after its restart", victim, inSync.Sub(restarted).Round(10*time.Millisecond))
	// The next rebalance tick at most an interval later, then the elections
	// and the metadata reaching the broker asked.
	harness.WaitMetadata(t, sadm, interval+5*time.Second, "leaders back on their preferred replicas", func(m kadm.Metadata) bool {
		return preferredLed(m, topic, parts, 3)
	})
	t.Logf("preferred leaders restored %v after the ISRs were (interval %v)", time.Since(inSync).Round(10*time.Millisecond), interval)
	logged := strings.Split(c.Node(ctrl).Out.String(), "\n")
	for _, p := range victimParts {
		if !slices.ContainsFunc(logged, func(l string) bool {
			return strings.Contains(l, "moved leadership to the preferred replica") && strings.Contains(l, "topic="+topic+" ") &&
				strings.Contains(l, fmt.Sprintf("partition=%d ", p)) && strings.Contains(l, fmt.Sprintf("new_leader=%d ", victim))
		}) {
			t.Errorf("the controller did not log the move of %s-%d back to node %d", topic, p, victim)
		}
	}

	// ElectLeaders on balanced partitions: nothing to do.
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}, "no-such-topic": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[topic][0].Err; !errors.Is(got, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred election on a balanced partition: %v, want ELECTION_NOT_NEEDED", got)
	}
	if got := res["no-such-topic"][0].Err; !errors.Is(got, kerr.UnknownTopicOrPartition) {
		t.Fatalf("election for an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	res, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[topic][1].Err; !errors.Is(got, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean election on a led partition: %v, want ELECTION_NOT_NEEDED", got)
	}
	// A null topic list means every partition; those needing nothing are
	// left out.
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res[topic]) != 0 {
		t.Fatalf("election for all partitions of a balanced cluster answered %+v", res)
	}

	// Every acknowledged record survived the two leadership moves.
	cons := c.Node(victim).Client(t, kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < produced {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), produced, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// TestNonVoterBrokerRackPlacement runs three voters and a fourth broker
// outside --controller-voters, in racks a, b, c, a: the fourth follows the
// metadata log as a raft non-voter, serves Metadata like any broker, and
// RF=3 replicas span three racks.
func TestNonVoterBrokerRackPlacement(t *testing.T) {
	t.Parallel()
	harness.InProcess(t)
	racks := []string{"a", "b", "c", "a"}
	c := harness.StartVoterCluster(t, 3, racks)
	nv := c.Node(4)
	adm := kadm.NewClient(nv.Client(t, harness.FreshMetadata))
	m := harness.WaitMetadata(t, adm, 10*time.Second, "the non-voter lists all four brokers", func(m kadm.Metadata) bool {
		return len(m.Brokers) == 4
	})
	for _, b := range m.Brokers {
		if b.Rack == nil || *b.Rack != racks[b.NodeID-1] {
			t.Fatalf("broker %d: rack %v, want %s", b.NodeID, b.Rack, racks[b.NodeID-1])
		}
	}
	h, err := nv.Health()
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for _, s := range h["controllers"].([]any) {
		members = append(members, s.(string))
	}
	wantNV := fmt.Sprintf("4@%s (nonvoter)", nv.Args[slices.Index(nv.Args, "--controller-listen")+1])
	if !slices.Contains(members, wantNV) || len(members) != 4 {
		t.Fatalf("/healthz controllers %v, want three voters and %q", members, wantNV)
	}
	for _, s := range members {
		if !strings.HasPrefix(s, "4@") && !strings.HasSuffix(s, "(voter)") {
			t.Fatalf("/healthz controllers %v: only node 4 may be a non-voter", members)
		}
	}
	if h["broker_state"] != "active" || h["controller_id"].(float64) == 4 {
		t.Fatalf("non-voter health: %v", h)
	}

	// Created through the non-voter (forwarded to the controller).
	const parts = 8
	harness.CreateTopic(t, adm, "racked", parts, 3)
	m = harness.WaitMetadata(t, adm, 10*time.Second, "racked has leaders", func(m kadm.Metadata) bool {
		td, ok := m.Topics["racked"]
		return ok && td.Err == nil && len(td.Partitions) == parts
	})
	leads := map[int32]int{}
	for _, p := range m.Topics["racked"].Partitions {
		used := map[string]bool{}
		for _, r := range p.Replicas {
			used[racks[r-1]] = true
		}
		if len(p.Replicas) != 3 || len(used) != 3 {
			t.Fatalf("partition %d: replicas %v span racks %v, want 3", p.Partition, p.Replicas, used)
		}
		leads[p.Leader]++
	}
	if leads[4] == 0 {
		t.Fatalf("the non-voter leads no partition: %v", leads)
	}
	// Every partition, those the non-voter leads among them, takes writes.
	prod := nv.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := harness.Context(t, 30*time.Second)
	for i := range int32(parts) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "racked", Partition: i, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to racked-%d (leader %d): %v", i, m.Topics["racked"].Partitions[i].Leader, err)
		}
	}
}

// TestElectLeadersNeedsClusterAlter: with the authorizer on, a principal
// without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED.
func TestElectLeadersNeedsClusterAlter(t *testing.T) {
	t.Parallel()
	harness.InProcess(t)
	b := harness.StartBroker(t, t.TempDir(), "--authorizer")
	_, err := kadm.NewClient(b.Client(t, kgo.RequestRetries(1))).ElectLeaders(harness.Context(t, 20*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{"t": {0: {}}})
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("ElectLeaders as User:ANONYMOUS: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}
