package groups

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupBrokerArgs make groups fast to test: no initial rebalance delay to
// speak of, a small offsets topic.
var groupBrokerArgs = []string{"--group-initial-rebalance-delay", "100ms", "--offsets-topic-partitions", "5"}

// startGroupBroker starts a broker with extra then groupBrokerArgs, and
// returns it with a client and an admin client on it.
func startGroupBroker(t *testing.T, extra ...string) (*harness.BrokerProc, *kgo.Client, *kadm.Client) {
	t.Helper()
	b := harness.StartBroker(t, t.TempDir(), append(slices.Clone(extra), groupBrokerArgs...)...)
	cl := b.Client(t)
	return b, cl, kadm.NewClient(cl)
}

// commitOffsets commits o for group through adm, failing t on any error.
func commitOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, group string, o kadm.Offsets) {
	t.Helper()
	if r, err := adm.CommitOffsets(ctx, group, o); err != nil || r.Error() != nil {
		t.Fatalf("commit %s: %v %v", group, err, r.Error())
	}
}

// waitBalanced waits until the members own every one of n partitions
// exactly once, each member at least n/len(ms) of them.
func waitBalanced(t *testing.T, ms []*harness.Member, n int, limit time.Duration) time.Duration {
	t.Helper()
	return harness.Eventually(t, limit, fmt.Sprintf("group balanced over %d partitions", n), func() (bool, string) {
		seen := map[int32]int{}
		ok := true
		var parts []string
		for _, m := range ms {
			a := m.Assigned()
			parts = append(parts, fmt.Sprint(a))
			if len(a) < n/len(ms) {
				ok = false
			}
			for _, p := range a {
				seen[p]++
			}
		}
		for p := range n {
			if seen[int32(p)] != 1 {
				ok = false
			}
		}
		return ok, strings.Join(parts, " ")
	})
}

func TestGroupsFranzRebalanceCommitResume(t *testing.T) {
	t.Parallel()
	b, cl, adm := startGroupBroker(t)
	// A short heartbeat interval: eager members learn of a rebalance from
	// a heartbeat, and franz-go's default (3s) would dominate the runtime.
	hb := kgo.HeartbeatInterval(500 * time.Millisecond)
	for _, bal := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.RoundRobinBalancer(), kgo.CooperativeStickyBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			topic, group := "grp-"+bal.ProtocolName(), "g-"+bal.ProtocolName()
			const parts = 6
			if _, err := adm.CreateTopic(harness.Context(t, 20*time.Second), parts, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			harness.ProduceN(t, cl, topic, 600)
			var ms []*harness.Member
			for range 3 {
				ms = append(ms, harness.StartMember(t, b.Addr, group, topic, bal, hb))
			}
			d := waitBalanced(t, ms, parts, 30*time.Second)
			t.Logf("3 members balanced in %v", d)
			ms = append(ms, harness.StartMember(t, b.Addr, group, topic, bal, hb))
			d = waitBalanced(t, ms, parts, 30*time.Second)
			t.Logf("member added: balanced over 4 in %v", d)
			ms[0].Close()
			ms = ms[1:]
			d = waitBalanced(t, ms, parts, 30*time.Second)
			t.Logf("member left: balanced over 3 in %v", d)
			for _, m := range ms {
				m.Close()
			}
			committed := harness.CommittedOffsets(t, adm, group, topic)
			if len(committed) != parts {
				t.Fatalf("committed offsets for %d partitions, want %d: %v", len(committed), parts, committed)
			}
			// More records, then one member resumes every partition
			// exactly at its committed offset.
			harness.ProduceN(t, cl, topic, 120)
			m := harness.StartMember(t, b.Addr, group, topic, bal, hb)
			defer m.Close()
			var first map[int32]int64
			harness.Eventually(t, 30*time.Second, "restarted member sees every partition", func() (bool, string) {
				m.Mu.Lock()
				defer m.Mu.Unlock()
				first = maps(m.First)
				return len(first) == parts, fmt.Sprintf("saw only %v (committed %v)", first, committed)
			})
			for p, at := range committed {
				if first[p] != at {
					t.Fatalf("partition %d resumed at %d, committed %d", p, first[p], at)
				}
			}
			// Describe and list see the group.
			dg, err := adm.DescribeGroups(harness.Context(t, 10*time.Second), group)
			if err != nil || dg.Error() != nil {
				t.Fatalf("describe: %v %v", err, dg.Error())
			}
			if g := dg[group]; g.Protocol != bal.ProtocolName() || len(g.Members) != 1 {
				t.Fatalf("describe: protocol %q, %d members", g.Protocol, len(g.Members))
			}
		})
	}
	lg, err := adm.ListGroups(harness.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g-range", "g-roundrobin", "g-cooperative-sticky"} {
		if !slices.Contains(lg.Groups(), g) {
			t.Fatalf("list groups: %v lacks %s", lg.Groups(), g)
		}
	}
}

func maps(m map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestGroupsTwoGroupsAndRestart: two groups on one topic commit
// independently; offsets survive a broker restart; producing to the
// offsets topic is refused.
func TestGroupsTwoGroupsAndRestart(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted
	b, cl, adm := startGroupBroker(t)
	ctx := harness.Context(t, 60*time.Second)
	const topic = "two-groups"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	harness.ProduceN(t, cl, topic, 100)
	for g, at := range map[string]int64{"ga": 7, "gb": 31} {
		o := kadm.Offsets{}
		o.AddOffset(topic, 0, at, -1)
		o.AddOffset(topic, 1, at+1, -1)
		commitOffsets(ctx, t, adm, g, o)
	}
	check := func(when string) {
		for g, at := range map[string]int64{"ga": 7, "gb": 31} {
			c := harness.CommittedOffsets(t, adm, g, topic)
			if c[0] != at || c[1] != at+1 {
				t.Fatalf("%s: group %s committed %v, want %d/%d", when, g, c, at, at+1)
			}
		}
	}
	check("before restart")
	b.Stop()
	b.Restart()
	cl2 := b.Client(t)
	adm = kadm.NewClient(cl2)
	check("after restart")
	// A consumer of ga resumes at 7 / 8.
	m := harness.StartMember(t, b.Addr, "ga", topic, kgo.RangeBalancer())
	defer m.Close()
	var first map[int32]int64
	harness.Eventually(t, 30*time.Second, "ga consumer sees both partitions", func() (bool, string) {
		m.Mu.Lock()
		defer m.Mu.Unlock()
		first = maps(m.First)
		return len(first) == 2, fmt.Sprint("saw ", first)
	})
	if first[0] != 7 || first[1] != 8 {
		t.Fatalf("ga resumed at %v, want 7/8", first)
	}
	// Clients cannot write the internal topic.
	err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Value: []byte("x")}).FirstErr()
	if err == nil || !strings.Contains(err.Error(), "INVALID_TOPIC_EXCEPTION") {
		t.Fatalf("produce to __consumer_offsets: %v", err)
	}
}

// TestGroupsKcatAndConfluent: librdkafka's balanced consumer (kcat -G)
// reads and commits; confluent_kafka with subscribe and synchronous manual
// commits resumes at its committed offset after a restart.
func TestGroupsKcatAndConfluent(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted
	harness.NeedTool(t, "/usr/bin/kcat")
	harness.NeedConfluentKafka(t)
	b, cl, adm := startGroupBroker(t)
	const topic = "lib-groups"
	if _, err := adm.CreateTopic(harness.Context(t, 20*time.Second), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	harness.ProduceN(t, cl, topic, 50)

	out := harness.RunCmd(t, "", 60*time.Second, "/usr/bin/kcat", "-b", b.Addr, "-G", "kcat-group", topic,
		"-o", "beginning", "-e", "-q", "-f", "%o\n", "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100")
	if n := len(strings.Fields(out)); n != 50 {
		t.Fatalf("kcat -G read %d records, want 50:\n%s", n, out)
	}
	if c := harness.CommittedOffsets(t, adm, "kcat-group", topic); c[0] != 50 {
		t.Fatalf("kcat group committed %v, want 50", c)
	}

	out = harness.RunCmd(t, "", 90*time.Second, "/usr/bin/python3", "testdata/confluent_group.py", b.Addr, topic, "py-group", "20")
	if !strings.Contains(out, "FIRST 0") || !strings.Contains(out, "DONE 20 20") {
		t.Fatalf("first python consumer: %s", out)
	}
	if c := harness.CommittedOffsets(t, adm, "py-group", topic); c[0] != 20 {
		t.Fatalf("python group committed %v, want 20", c)
	}
	b.Stop()
	b.Restart()
	adm = kadm.NewClient(b.Client(t))
	out = harness.RunCmd(t, "", 90*time.Second, "/usr/bin/python3", "testdata/confluent_group.py", b.Addr, topic, "py-group", "10")
	if !strings.Contains(out, "FIRST 20") || !strings.Contains(out, "DONE 10 30") {
		t.Fatalf("python consumer after restart: %s", out)
	}
	if c := harness.CommittedOffsets(t, adm, "py-group", topic); c[0] != 30 {
		t.Fatalf("python group committed %v after restart, want 30", c)
	}
}

// TestGroupsCoordinatorRestartCluster: on 3 nodes, committed offsets
// survive a restart of the node leading the group's offsets partition.
// The offsets topic is created with replication factor 1 on purpose: this
// covers the unreplicated path, where the partition is offline while its
// only replica restarts and is then reloaded from that node's log. The
// replicated path (kill -9 of the coordinator, another replica takes
// over) is TestGroupsCoordinatorFailover.
func TestGroupsCoordinatorRestartCluster(t *testing.T) {
	harness.Processes(t) // a node restarted
	t.Setenv("RINGLOG_GROUP_INITIAL_REBALANCE_DELAY", "100ms")
	t.Setenv("RINGLOG_OFFSETS_TOPIC_PARTITIONS", "5")
	t.Setenv("RINGLOG_OFFSETS_REPLICATION_FACTOR", "1")
	c := harness.StartCluster(t, 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := harness.Context(t, 90*time.Second)
	harness.CreateTopic(t, adm, "cl-groups", 1, 3)
	const group = "cluster-group"
	o := kadm.Offsets{}
	o.AddOffset("cl-groups", 0, 1234, -1)
	commitOffsets(ctx, t, adm, group, o)
	fc := adm.FindGroupCoordinators(ctx, group)[group]
	if fc.Err != nil {
		t.Fatalf("find coordinator: %v", fc.Err)
	}
	coord := fc.NodeID
	t.Logf("coordinator of %s is node %d; restarting it", group, coord)
	n := c.Node(coord)
	n.Stop()
	n.Restart()
	harness.Eventually(t, 60*time.Second, "offsets readable after the coordinator restarted", func() (bool, string) {
		fo, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fo.Error()
		}
		if err == nil {
			if got, ok := fo.Lookup("cl-groups", 0); ok && got.At == 1234 {
				return true, ""
			} else if ok {
				t.Fatalf("after coordinator restart: committed %d, want 1234", got.At)
			}
		}
		return false, fmt.Sprint(err)
	})
}
