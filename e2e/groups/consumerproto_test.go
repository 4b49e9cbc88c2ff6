package groups

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cpSession and cpHeartbeat are the broker's consumer-protocol session
// timeout and heartbeat interval in these tests (defaults 45s and 5s).
const (
	cpSession   = 6 * time.Second
	cpHeartbeat = time.Second
)

// TestConsumerProtoFranzMembership: four franz-go 848 members, each in a
// child process, share a 12-partition RF=3 topic on a 3-broker cluster
// while a keyed producer runs; one member leaves, one is SIGKILLed, one
// joins, then the group coordinator is killed with SIGKILL and restarted.
// Every record is processed, no partition is owned by two live members at
// once, a record is processed twice only after its member died or lost the
// partition before committing it, and the surviving members keep their
// member ids across the coordinator failover (the group state reloaded
// from __consumer_offsets).
func TestConsumerProtoFranzMembership(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9 and restart
	proto := cpProto()
	// A longer session than the other tests: franz-go 1.22.3 retries an
	// 848 heartbeat against the coordinator it knows, with a backoff
	// growing to 5s, and looks for the new one only once the old node
	// answers again (NOT_COORDINATOR); the new coordinator must not expire
	// the members meanwhile.
	const session = 10 * time.Second
	c := harness.StartReplCluster(t, 3, append(slices.Clone(groupBrokerArgs), consumerFlags(t, session, cpHeartbeat)...)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, group, parts = "cp-members", "cp-members", 12
	harness.CreateRF3Topic(t, adm, topic, parts)
	prod := startCPProducer(t, c.Addrs(), topic, 100*time.Millisecond, parts, 30000, 4*time.Minute)

	spec := func(name string) cpChildSpec {
		return cpChildSpec{Addrs: c.Addrs(), Group: group, Topics: []string{topic}, Proto: proto, ClientID: name,
			Session: session, Heartbeat: cpHeartbeat}
	}
	var ms []*cpMember
	for i := range 4 {
		ms = append(ms, startCPMember(t, spec(fmt.Sprintf("m%d", i))))
	}
	all := slices.Clone(ms)
	cpSaveLogs(t, func() []*cpMember { return all }, func() []*harness.BrokerProc { return c.Nodes })
	dump := func() string {
		var b strings.Builder
		for _, m := range all {
			fmt.Fprintf(&b, "%s owns %v\n", m.name, m.owned())
		}
		return b.String()
	}
	balanced := func(what string, live []*cpMember, limit time.Duration) time.Duration {
		t.Helper()
		return harness.Eventually(t, limit, what, func() (bool, string) { return cpBalanced(live, parts) })
	}
	d := balanced("4 members own every partition once", ms, 60*time.Second)
	t.Logf("%s: 4 members balanced in %v", proto, d.Round(time.Millisecond))
	if is848(proto) {
		check848(t, cl, group, "uniform", 4)
	}

	// A clean leave: its partitions move after it committed them.
	ms[0].stop(t)
	d = balanced("3 members after a leave", ms[1:], 30*time.Second)
	t.Logf("leave: 3 members own every partition %v later", d.Round(time.Millisecond))

	// A SIGKILL: its partitions move after the session timeout.
	ms[1].kill()
	d = balanced("2 members after a SIGKILL", ms[2:], session+30*time.Second)
	t.Logf("SIGKILL: 2 members own every partition %v later", d.Round(time.Millisecond))

	// A join.
	ms = append(ms[2:], startCPMember(t, spec("m4")))
	all = append(all, ms[2])
	d = balanced("3 members after a join", ms, 30*time.Second)
	t.Logf("join: 3 members balanced %v later", d.Round(time.Millisecond))

	// kill -9 the group coordinator, then restart it.
	var ids map[string]string
	if is848(proto) {
		ids = check848(t, cl, group, "uniform", 3)
	}
	for _, m := range all {
		for _, e := range m.log() {
			if e.kind == 'L' && len(e.parts) > 0 {
				t.Fatalf("%s lost partitions before the coordinator failover (a clean leave, kill or join must not fence the others): %s\n%s", m.name, e.text, m.proc)
			}
		}
	}
	fc := adm.FindGroupCoordinators(harness.Context(t, 10*time.Second), group)[group]
	if fc.Err != nil {
		t.Fatalf("find coordinator: %v", fc.Err)
	}
	victim := fc.NodeID
	c.Node(victim).Kill9()
	killed := time.Now()
	// Another replica of the group's __consumer_offsets partition takes
	// over and loads the group; the victim comes back afterwards.
	others, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(victim)...))
	if err != nil {
		t.Fatal(err)
	}
	defer others.Close()
	var coord int32
	harness.Eventually(t, 60*time.Second, "another node coordinates the group", func() (bool, string) {
		fc := kadm.NewClient(others).FindGroupCoordinators(harness.Context(t, 5*time.Second), group)[group]
		coord = fc.NodeID
		return fc.Err == nil && fc.NodeID != victim, fmt.Sprintf("%+v", fc)
	})
	t.Logf("coordinator node %d killed: node %d coordinates %v later", victim, coord, time.Since(killed).Round(time.Millisecond))
	c.Node(victim).Restart()
	d = balanced("3 members after the coordinator failover", ms, 90*time.Second)
	// Until a session timeout and 2 s after the kill: a member the new
	// coordinator did not reload would have been fenced or expired by then.
	harness.Holds(t, time.Until(killed.Add(session+2*time.Second)), "balanced after the coordinator failover", func() (bool, string) {
		return cpBalanced(ms, parts)
	})
	if is848(proto) {
		for _, m := range all {
			for _, e := range m.log() {
				if e.kind == 'L' && len(e.parts) > 0 {
					t.Fatalf("%s lost partitions across the coordinator failover (its member epoch was not reloaded?): %s\n%s", m.name, e.text, m.proc)
				}
			}
		}
		after := check848(t, others, group, "uniform", 3)
		for name, id := range ids {
			if after[name] != id {
				t.Fatalf("member %s was %s before the coordinator failover, %s after (before %v, after %v)", name, id, after[name], ids, after)
			}
		}
	}
	t.Logf("coordinator failover: members balanced %v after the restart, still %v after the kill", d.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	// Drain: the producer stops; the members process to the end offsets
	// and, leaving, commit them.
	prod.stop()
	ends := harness.EndOffsets(t, adm, topic)
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	harness.Eventually(t, 60*time.Second, "the members process every record", func() (bool, string) {
		got := map[int32]map[int64]bool{}
		for _, m := range all {
			for _, e := range m.log() {
				if e.kind == 'G' {
					if got[e.p] == nil {
						got[e.p] = map[int64]bool{}
					}
					got[e.p][e.o] = true
				}
			}
		}
		missing := 0
		for p, end := range ends {
			for o := range end {
				if !got[p][o] {
					missing++
				}
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d records not processed\n%s", missing, total, dump())
	})
	for _, m := range ms {
		m.stop(t)
	}
	if is848(proto) {
		for _, m := range all {
			for _, e := range m.log() {
				if e.kind == 'L' && len(e.parts) > 0 {
					t.Fatalf("%s lost partitions after the coordinator failover (expired by the new coordinator?): %s\n%s", m.name, e.text, cpAssignLog(all))
				}
			}
		}
	}
	waitCommitted(t, adm, group, topic, ends)
	r := cpCheck(t, all, ends)
	t.Logf("%d records produced (%d produce errors, last %v); %d processed: %d duplicates after the SIGKILL, %d after lost partitions; %d ownership overlaps with a zombie; lost events: %v",
		total, prod.fails, prod.last, r.processed, r.dupsKilled, r.dupsLost, r.overlapsLost, r.lostEvents)
	if r.distinct != int(total) {
		t.Fatalf("%d distinct records processed, %d produced", r.distinct, total)
	}
}

// cpInProc is an in-process group member recording its ownership.
type cpInProc struct {
	*harness.Member
	name string
}

// startCPInProc starts an in-process member of group speaking proto:
// startMember's bookkeeping, with hooks that commit on revoke.
func startCPInProc(t *testing.T, addrs []string, name, group string, proto string, topics []string, extra ...kgo.Opt) *cpInProc {
	t.Helper()
	var m *harness.Member
	ready := make(chan struct{})
	opts := append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ClientID(name), kgo.ConsumeTopics(topics...), kgo.RebalanceTimeout(20 * time.Second)},
		protoOpts(proto, cpSession, cpHeartbeat)...)
	m = harness.StartMember(t, addrs[0], group, topics[0], kgo.StickyBalancer(), append(append(opts, cpOwnershipHooks(&m, ready)...), extra...)...)
	close(ready)
	t.Cleanup(func() {
		select {
		case <-m.Done:
		default:
			m.Close()
		}
	})
	return &cpInProc{Member: m, name: name}
}

// TestConsumerProtoLibrdkafka: Debian's librdkafka (2.0.2) predates
// KIP-848 and refuses group.protocol=consumer; its classic consumers and
// franz-go 848 members share a topic in different groups; an empty
// classic group converts to a consumer group whose members resume at the
// classic commits, and back; while 848 members are in a group a classic
// JoinGroup for it is refused with INCONSISTENT_GROUP_PROTOCOL.
func TestConsumerProtoLibrdkafka(t *testing.T) {
	t.Parallel()
	harness.NeedConfluentKafka(t)
	proto := cpProto()
	b := harness.StartBroker(t, t.TempDir(), append(slices.Clone(groupBrokerArgs), consumerFlags(t, cpSession, cpHeartbeat)...)...)
	cl := b.Client(t)
	adm := kadm.NewClient(cl)

	// If Debian ships a librdkafka with KIP-848 (2.12+ GA), this fails
	// and the test should grow a librdkafka 848 consumer.
	out := harness.RunCmd(t, "", 30*time.Second, "/usr/bin/python3", "-c", confluentGroupProtocolScript, b.Addr)
	if !strings.Contains(out, "UNSUPPORTED") {
		t.Fatalf("librdkafka accepts group.protocol=consumer: %s", out)
	}
	t.Logf("librdkafka: %s", strings.TrimSpace(out))

	const topic, parts = "cp-lib", 3
	harness.CreateTopic(t, adm, topic, parts, 1)
	harness.ProduceN(t, cl, topic, 90)
	ends := harness.EndOffsets(t, adm, topic)

	// (a) A classic confluent consumer and two 848 members, in two groups.
	classic := startClientProc(t, "py-classic", nil, "/usr/bin/python3", "testdata/confluent_group.py", b.Addr, topic, "cp-lib-classic", "90")
	ms := []*cpInProc{startCPInProc(t, []string{b.Addr}, "a0", "cp-lib-848", proto, []string{topic}),
		startCPInProc(t, []string{b.Addr}, "a1", "cp-lib-848", proto, []string{topic})}
	harness.Eventually(t, 60*time.Second, "the 848 members read every record", func() (bool, string) {
		n := 0
		for _, m := range ms {
			m.Mu.Lock()
			for _, s := range m.Seen {
				n += len(s)
			}
			m.Mu.Unlock()
		}
		return n >= 90, fmt.Sprintf("%d of 90", n)
	})
	if is848(proto) {
		check848(t, cl, "cp-lib-848", "uniform", 2)
	}
	select {
	case <-classic.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("classic consumer not done after 60s\n%s", classic)
	}
	if !strings.Contains(classic.out.String(), "DONE 90") {
		t.Fatalf("classic consumer beside the 848 group:\n%s", classic)
	}
	for _, m := range ms {
		m.Close()
	}
	for p, e := range ends {
		seen := 0
		for _, m := range ms {
			seen += len(m.Seen[p])
		}
		if int64(seen) != e {
			t.Fatalf("848 group read %d records of partition %d, end %d", seen, p, e)
		}
	}

	// (b) Conversion: classic commits 30 records and leaves (the group is
	// Empty), 848 members join the same group id and resume there.
	const group = "cp-lib-convert"
	out = harness.RunCmd(t, "", 90*time.Second, "/usr/bin/python3", "testdata/confluent_group.py", b.Addr, topic, group, "30")
	if !strings.Contains(out, "DONE 30") {
		t.Fatalf("classic consumer: %s", out)
	}
	committed := harness.CommittedOffsets(t, adm, group, topic)
	t.Logf("classic group committed %v", committed)
	ms = []*cpInProc{startCPInProc(t, []string{b.Addr}, "b0", group, proto, []string{topic}),
		startCPInProc(t, []string{b.Addr}, "b1", group, proto, []string{topic})}
	harness.Eventually(t, 60*time.Second, "the 848 members read from the commits to the end", func() (bool, string) {
		n := int64(0)
		for _, m := range ms {
			m.Mu.Lock()
			for _, s := range m.Seen {
				n += int64(len(s))
			}
			m.Mu.Unlock()
		}
		want := int64(0)
		for p, e := range ends {
			want += e - committed[p]
		}
		return n >= want, fmt.Sprintf("%d of %d", n, want)
	})
	for p, e := range ends {
		for _, m := range ms {
			m.Mu.Lock()
			for o := range m.Seen[p] {
				if o < committed[p] {
					m.Mu.Unlock()
					t.Fatalf("848 member %s re-read partition %d offset %d below the classic commit %d", m.name, p, o, committed[p])
				}
			}
			m.Mu.Unlock()
		}
		if committed[p] < e && !slices.ContainsFunc(ms, func(m *cpInProc) bool {
			m.Mu.Lock()
			defer m.Mu.Unlock()
			return m.Seen[p][committed[p]]
		}) {
			t.Fatalf("partition %d: the record at the classic commit %d was not read", p, committed[p])
		}
	}
	if is848(proto) {
		check848(t, cl, group, "uniform", 2)
		// (c) A classic JoinGroup for the consumer group is refused.
		jg := kmsg.NewPtrJoinGroupRequest()
		jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = group, "consumer", 6000, 6000
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name, jp.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{topic}}).AppendTo(nil)
		jg.Protocols = append(jg.Protocols, jp)
		resp, err := jg.RequestWith(harness.Context(t, 10*time.Second), cl)
		if err == nil && resp.ErrorCode == kerr.MemberIDRequired.Code {
			// JoinGroup v4+ may first hand out a member id; the
			// refusal must come on the join with it at the latest.
			jg.MemberID = resp.MemberID
			resp, err = jg.RequestWith(harness.Context(t, 10*time.Second), cl)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.InconsistentGroupProtocol {
			t.Fatalf("classic JoinGroup into the consumer group: %v, want INCONSISTENT_GROUP_PROTOCOL", err)
		}
	}
	harness.ProduceN(t, cl, topic, 30)
	ends2 := harness.EndOffsets(t, adm, topic)
	harness.Eventually(t, 30*time.Second, "the 848 members read the new records", func() (bool, string) {
		for p, e := range ends2 {
			if e > 0 && !slices.ContainsFunc(ms, func(m *cpInProc) bool {
				m.Mu.Lock()
				defer m.Mu.Unlock()
				return m.Seen[p][e-1]
			}) {
				return false, fmt.Sprintf("partition %d: offset %d not read", p, e-1)
			}
		}
		return true, ""
	})
	for _, m := range ms {
		m.Close()
	}
	waitCommitted(t, adm, group, topic, ends2)
	// The downgrade: the group is Empty again and a classic consumer
	// resumes at the 848 commits.
	harness.ProduceN(t, cl, topic, 3)
	out = harness.RunCmd(t, "", 90*time.Second, "/usr/bin/python3", "testdata/confluent_group.py", b.Addr, topic, group, "3")
	if !strings.Contains(out, "DONE 3") {
		t.Fatalf("classic consumer after the 848 group: %s", out)
	}
	var first int64 = -1
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "FIRST "); ok {
			first, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if !slices.Contains(mapValues(ends2), first) {
		t.Fatalf("classic consumer after the 848 group started at %d, not at one of the 848 commits %v", first, ends2)
	}
	c := harness.CommittedOffsets(t, adm, group, topic)
	moved := 0
	for p, e := range ends2 {
		moved += int(c[p] - e)
		if c[p] < e {
			t.Fatalf("partition %d: commit %d below the 848 commit %d", p, c[p], e)
		}
	}
	if moved != 3 {
		t.Fatalf("classic consumer committed %v after the 848 commits %v: %d records, want 3", c, ends2, moved)
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// confluentGroupProtocolScript prints UNSUPPORTED if confluent_kafka
// refuses group.protocol=consumer, SUPPORTED if it accepts it.
const confluentGroupProtocolScript = `
import sys
from confluent_kafka import Consumer, KafkaException, libversion
try:
    Consumer({"bootstrap.servers": sys.argv[1], "group.id": "cp-probe", "group.protocol": "consumer"}).close()
    print("SUPPORTED", libversion()[0])
except KafkaException as e:
    print("UNSUPPORTED", libversion()[0], e.args[0].str())
`

// TestConsumerProtoStaticAndRegex: a static member (instance id) that
// restarts within the session timeout gets its partitions back while the
// other members' assignments do not change; a regex subscription picks up
// a topic created later.
func TestConsumerProtoStaticAndRegex(t *testing.T) {
	t.Parallel()
	proto := cpProto()
	b := harness.StartBroker(t, t.TempDir(), append(slices.Clone(groupBrokerArgs), consumerFlags(t, cpSession, cpHeartbeat)...)...)
	cl := b.Client(t)
	adm := kadm.NewClient(cl)
	const topic, parts = "cp-static", 6
	harness.CreateTopic(t, adm, topic, parts, 1)
	static := func(name string) cpChildSpec {
		return cpChildSpec{Addrs: []string{b.Addr}, Group: "cp-static", Topics: []string{topic}, Proto: proto,
			ClientID: name, InstanceID: "inst-" + name, Session: cpSession, Heartbeat: cpHeartbeat}
	}
	ms := []*cpMember{startCPMember(t, static("s0")), startCPMember(t, static("s1")), startCPMember(t, static("s2"))}
	harness.Eventually(t, 60*time.Second, "3 static members balanced", func() (bool, string) { return cpBalanced(ms, parts) })
	before := map[string][]int32{}
	for _, m := range ms {
		before[m.name] = m.owned()
	}
	if is848(proto) {
		check848(t, cl, "cp-static", "uniform", 3)
	}
	marks := map[string]int{}
	for _, m := range ms[1:] {
		marks[m.name] = len(m.log())
	}
	// s0 leaves as a static member (epoch -2) and comes back at once.
	ms[0].stop(t)
	old := ms[0]
	restarted := time.Now()
	ms[0] = startCPMember(t, static("s0"))
	harness.Eventually(t, cpSession+20*time.Second, "the restarted static member owns its partitions again", func() (bool, string) {
		return slices.Equal(ms[0].owned(), before["s0"]), fmt.Sprintf("owns %v, owned %v; assignment events:\n%s", ms[0].owned(), before["s0"], cpAssignLog(append([]*cpMember{old}, ms...))+old.proc.String()+ms[0].proc.String())
	})
	t.Logf("static member back with %v %v after its restart", before["s0"], time.Since(restarted).Round(time.Millisecond))
	// A session timeout: had the restart not been recognised as the same
	// static member, its old incarnation would expire within it and the
	// others' assignments would move.
	harness.Holds(t, cpSession, "the other members' assignments unchanged", func() (bool, string) {
		for _, m := range ms[1:] {
			for _, e := range m.log()[marks[m.name]:] {
				if e.kind == 'A' || e.kind == 'R' || e.kind == 'L' {
					return false, fmt.Sprintf("%s's assignment changed while the static member restarted: %s (owned %v); assignment events:\n%s", m.name, e.text, before[m.name], cpAssignLog(append([]*cpMember{old}, ms...)))
				}
			}
		}
		return true, ""
	})
	if ok, state := cpBalanced(ms, parts); !ok || !slices.Equal(ms[0].owned(), before["s0"]) {
		t.Fatalf("after the static restart: %s (before %v)", state, before)
	}
	for _, m := range ms {
		m.stop(t)
	}

	// Regex: a member subscribed to ^cp-rx-.* picks up a topic created
	// after it joined.
	harness.CreateTopic(t, adm, "cp-rx-a", 2, 1)
	rx := startCPMember(t, cpChildSpec{Addrs: []string{b.Addr}, Group: "cp-regex", Topics: []string{"^cp-rx-.*"}, Regex: true,
		Proto: proto, ClientID: "rx", Session: cpSession, Heartbeat: cpHeartbeat})
	harness.Eventually(t, 30*time.Second, "the regex member owns cp-rx-a", func() (bool, string) {
		return len(rx.owned()) == 2, fmt.Sprintf("owns %v\n%s", rx.owned(), rx.proc)
	})
	harness.CreateTopic(t, adm, "cp-rx-b", 3, 1)
	harness.CreateTopic(t, adm, "cp-other", 1, 1)
	harness.ProduceN(t, cl, "cp-rx-b", 30)
	harness.ProduceN(t, cl, "cp-other", 5)
	d := harness.Eventually(t, 60*time.Second, "the regex member reads the later topic", func() (bool, string) {
		n := 0
		for _, e := range rx.log() {
			if e.kind == 'Q' && e.topic == "cp-rx-b" {
				n++
			}
			if e.kind == 'Q' && e.topic == "cp-other" {
				return false, "read cp-other, which the regex does not match: " + e.text
			}
		}
		return n == 30, fmt.Sprintf("%d of 30 records of cp-rx-b", n)
	})
	t.Logf("regex member read the topic created later %v after its records were produced", d.Round(time.Millisecond))
	if is848(proto) {
		g, err := describe848(harness.Context(t, 10*time.Second), cl, "cp-regex")
		if err != nil {
			t.Fatal(err)
		}
		// franz-go sends its patterns as ".*(?:p1|p2).*".
		if len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil || !strings.Contains(*g.Members[0].SubscribedTopicRegex, "^cp-rx-.*") {
			t.Fatalf("ConsumerGroupDescribe of the regex group: %+v", g.Members)
		}
		var got []string
		for _, tp := range g.Members[0].Assignment.TopicPartitions {
			got = append(got, fmt.Sprintf("%s%v", tp.Topic, tp.Partitions))
		}
		slices.Sort(got)
		if want := []string{"cp-rx-a[0 1]", "cp-rx-b[0 1 2]"}; !slices.Equal(got, want) {
			t.Fatalf("regex member's assignment %v, want %v", got, want)
		}
	}
	for _, e := range rx.log() {
		if e.kind == 'Q' && e.topic == "cp-other" {
			t.Fatalf("the regex member read cp-other: %s", e.text)
		}
	}
	rx.stop(t)
}
