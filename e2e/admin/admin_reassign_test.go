package admin

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readPartition reads topic/partition from its start through whichever
// broker leads it until n records arrived.
func readPartition(t *testing.T, addr, topic string, partition int32, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := harness.Context(t, 20*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s-%d: read %d of %d records", topic, partition, len(out), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch %s-%d: %v", topic, partition, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// sameRecords fails unless a and b hold the same records at the same
// offsets (value, key, timestamp, leader epoch).
func sameRecords(t *testing.T, what string, a, b []*kgo.Record) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d records", what, len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Offset != y.Offset || string(x.Value) != string(y.Value) || string(x.Key) != string(y.Key) ||
			!x.Timestamp.Equal(y.Timestamp) || x.LeaderEpoch != y.LeaderEpoch {
			t.Fatalf("%s: record %d differs: offset %d %q epoch %d vs offset %d %q epoch %d",
				what, i, x.Offset, x.Value, x.LeaderEpoch, y.Offset, y.Value, y.LeaderEpoch)
		}
	}
}

// listAll sends ListPartitionReassignments with null topics (every
// partition in reassignment; kadm sends nothing for an empty set) and
// returns them by topic and partition.
func listAll(t *testing.T, cl *kgo.Client) map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition {
	t.Helper()
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(harness.Context(t, 10*time.Second), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("list reassignments: %v", err)
	}
	out := map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
		for _, rp := range rt.Partitions {
			out[rt.Topic][rp.Partition] = rp
		}
	}
	return out
}

func sorted(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// notIn returns the first of 1..n not in reps.
func notIn(reps []int32, n int32) int32 {
	for id := int32(1); id <= n; id++ {
		if !slices.Contains(reps, id) {
			return id
		}
	}
	return -1
}

// TestAdminReassignMove moves, on a 4-broker cluster, the leader replica of
// partition 0 and a follower replica of partition 1 (whose log start was
// advanced by DeleteRecords first) of an RF=3 topic to the fourth broker,
// while a producer writes to both with acks=all. Every acknowledged record
// must be readable afterwards, exactly once; the new replicas' records
// equal the old ones offset by offset; the old replicas' directories are
// deleted.
func TestAdminReassignMove(t *testing.T) {
	t.Parallel()
	c := harness.StartVoterCluster(t, 3, []string{"", "", "", ""})
	cl := c.Node(1).Client(t, harness.FreshMetadata)
	adm := kadm.NewClient(cl)
	const topic = "mv"
	harness.CreateTopic(t, adm, topic, 2, 3)
	m := harness.WaitMetadata(t, adm, 10*time.Second, "mv fully in sync", func(m kadm.Metadata) bool {
		td, ok := m.Topics[topic]
		return ok && len(td.Partitions) == 2 && len(td.Partitions[0].ISR) == 3 && len(td.Partitions[1].ISR) == 3
	})
	p0, p1 := m.Topics[topic].Partitions[0], m.Topics[topic].Partitions[1]
	// Partition 0: the leader leaves. Partition 1: a follower leaves.
	x0, y0 := p0.Leader, notIn(p0.Replicas, 4)
	x1, y1 := p1.Replicas[2], notIn(p1.Replicas, 4)
	if x1 == p1.Leader {
		x1 = p1.Replicas[1]
	}
	target := func(reps []int32, x, y int32) []int32 {
		out := []int32{y}
		for _, r := range reps {
			if r != x {
				out = append(out, r)
			}
		}
		return out
	}
	t0, t1 := target(p0.Replicas, x0, y0), target(p1.Replicas, x1, y1)
	t.Cleanup(func() {
		if t.Failed() {
			for i, b := range c.Nodes {
				t.Logf("node %d log lines about %s:\n%s", i+1, topic, harness.GrepLines(b.Out.String(), topic, 40))
			}
		}
	})
	t.Logf("p0 %v leader %d -> %v; p1 %v leader %d -> %v", p0.Replicas, p0.Leader, t0, p1.Replicas, p1.Leader, t1)

	prod := c.Node(2).Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := harness.Context(t, 60*time.Second)
	const before = 1000
	for p := int32(0); p < 2; p++ {
		var recs []*kgo.Record
		for i := range before {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%06d", p, i)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The new replica of partition 1 must start at the leader's log
	// start, not 0.
	var dr kadm.Offsets
	dr.Add(kadm.Offset{Topic: topic, Partition: 1, At: 300})
	if res, err := adm.DeleteRecords(ctx, dr); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	old0 := readPartition(t, c.Node(1).Addr, topic, 0, before)

	// Load during the move.
	var mu sync.Mutex
	acked := map[int32][]string{}
	var produceErrs []error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for p := int32(0); p < 2; p++ {
				r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-live-%06d", p, i)}
				prod.Produce(ctx, r, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						produceErrs = append(produceErrs, err)
						return
					}
					acked[r.Partition] = append(acked[r.Partition], string(r.Value))
				})
			}
		}
	}()
	// ackedOn waits for more acknowledged live records on both partitions
	// than were already there.
	ackedOn := func(what string) {
		mu.Lock()
		base := []int{len(acked[0]), len(acked[1])}
		mu.Unlock()
		harness.Eventually(t, 10*time.Second, what, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(acked[0]) > base[0] && len(acked[1]) > base[1], fmt.Sprintf("acknowledged %d/%d live records (from %v), produce errors %v", len(acked[0]), len(acked[1]), base, produceErrs)
		})
	}
	ackedOn("live load acknowledged on both partitions before the move")

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, t0)
	req.Assign(topic, 1, t1)
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || res.Error() != nil {
		t.Fatalf("alter assignments: %v %v", err, res.Error())
	}
	// The move may already be over; while it runs List shows the
	// target first, then the leaving replica.
	if r, ok := listAll(t, cl)[topic][0]; ok && (!slices.Equal(r.Replicas, append(slices.Clone(t0), x0)) || !slices.Equal(r.AddingReplicas, []int32{y0}) || !slices.Equal(r.RemovingReplicas, []int32{x0})) {
		t.Fatalf("list during the move: %+v", r)
	}
	harness.WaitMetadata(t, adm, 30*time.Second, "both moves complete", func(m kadm.Metadata) bool {
		ps := m.Topics[topic].Partitions
		// The leader left partition 0: the first target replica leads.
		return slices.Equal(ps[0].Replicas, t0) && slices.Equal(sorted(ps[0].ISR), sorted(t0)) && ps[0].Leader == y0 &&
			slices.Equal(ps[1].Replicas, t1) && slices.Equal(sorted(ps[1].ISR), sorted(t1))
	})
	if ls := listAll(t, cl); len(ls) != 0 {
		t.Fatalf("list after completion: %+v", ls)
	}
	ackedOn("live load acknowledged on both partitions after the move too")
	close(stop)
	<-done
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(produceErrs) > 0 {
		t.Fatalf("%d produce errors, first %v", len(produceErrs), produceErrs[0])
	}
	mu.Unlock()

	// The removed replicas' logs are deleted; the new ones exist.
	harness.WaitPath(t, filepath.Join(c.Node(x0).DataDir, topic+"-0"), false)
	harness.WaitPath(t, filepath.Join(c.Node(x1).DataDir, topic+"-1"), false)
	harness.WaitPath(t, filepath.Join(c.Node(y0).DataDir, topic+"-0"), true)
	harness.WaitPath(t, filepath.Join(c.Node(y1).DataDir, topic+"-1"), true)

	// Partition 0 is read from its new replica, now leading: the records
	// from before the move are identical, every acknowledged one is there
	// exactly once.
	check := func(p int32, recs []*kgo.Record, first int64) {
		t.Helper()
		seen := map[string]int{}
		for i, r := range recs {
			if r.Offset != first+int64(i) {
				t.Fatalf("p%d: record %d at offset %d, want %d", p, i, r.Offset, first+int64(i))
			}
			seen[string(r.Value)]++
		}
		for _, v := range acked[p] {
			if seen[v] != 1 {
				t.Fatalf("p%d: acknowledged %q read %d times", p, v, seen[v])
			}
		}
	}
	n0 := before + len(acked[0])
	new0 := readPartition(t, c.Node(1).Addr, topic, 0, n0)
	sameRecords(t, "p0 before the move vs on the new replica", old0, new0[:before])
	check(0, new0, 0)

	// Partition 1 is read from its leader, then from the new replica
	// after a preferred election (it is first in the target).
	n1 := before - 300 + len(acked[1])
	fromLeader := readPartition(t, c.Node(1).Addr, topic, 1, n1)
	check(1, fromLeader, 300)
	if er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {1: {}}}); err != nil {
		t.Fatal(err)
	} else if e := er[topic][1].Err; e != nil && !errors.Is(e, kerr.ElectionNotNeeded) {
		t.Fatalf("elect %d for p1: %v", y1, e)
	}
	harness.WaitMetadata(t, adm, 10*time.Second, "new replica leads p1", func(m kadm.Metadata) bool {
		return m.Topics[topic].Partitions[1].Leader == y1
	})
	fromNew := readPartition(t, c.Node(1).Addr, topic, 1, n1)
	sameRecords(t, "p1 old leader vs new replica", fromLeader, fromNew)
	if v, _ := harness.SumSeries(harness.Scrape(t, c.Node(y0).Admin), "ringlog_reassignment_partitions"); v != 0 {
		t.Fatalf("ringlog_reassignment_partitions %v after completion", v)
	}

	// A single-replica partition moves too: it is replicated while both
	// copies exist, and single again on its new broker.
	harness.CreateAssigned(t, cl, "one", [][]int32{{2}}, nil)
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: "one", Value: fmt.Appendf(nil, "one-%06d", i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	oldOne := readPartition(t, c.Node(1).Addr, "one", 0, 300)
	if res, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"one": {0: {3}}}); err != nil || res.Error() != nil {
		t.Fatalf("move rf=1 partition: %v %v", err, res.Error())
	}
	harness.WaitMetadata(t, adm, 20*time.Second, "rf=1 partition on broker 3", func(m kadm.Metadata) bool {
		p := m.Topics["one"].Partitions[0]
		return slices.Equal(p.Replicas, []int32{3}) && p.Leader == 3
	})
	harness.WaitPath(t, filepath.Join(c.Node(2).DataDir, "one-0"), false)
	sameRecords(t, "rf=1 partition before and after the move", oldOne, readPartition(t, c.Node(1).Addr, "one", 0, 300))
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "one", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the rf=1 move: %v", err)
	}
}

// TestAdminReassignCancel starts a move to a broker that was just killed:
// it stays pending (List and the leader's gauges show it) until cancelled,
// which restores the replicas and ISR; then, with the broker running and
// a 0 B/s replication throttle holding the move back, a cancel deletes
// the log the adding replica had started.
func TestAdminReassignCancel(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9 and restart
	c := harness.StartVoterCluster(t, 3, []string{"", "", "", ""})
	cl := c.Node(1).Client(t, harness.FreshMetadata)
	adm := kadm.NewClient(cl)
	const topic = "cx"
	// Broker 4 (not a controller voter) is the target; 3 leaves.
	orig, tgt, x, y := []int32{1, 2, 3}, []int32{4, 1, 2}, int32(3), int32(4)
	harness.CreateAssigned(t, cl, topic, [][]int32{orig}, nil)
	harness.WaitMetadata(t, adm, 10*time.Second, "cx in sync", func(m kadm.Metadata) bool {
		td, ok := m.Topics[topic]
		return ok && len(td.Partitions) == 1 && len(td.Partitions[0].ISR) == 3
	})
	ctx := harness.Context(t, 40*time.Second)
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%06d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Killed right before the move: still registered and unfenced (the
	// session timeout is 3 s), so the target is valid, but it never
	// catches up. (Killed rather than stopped: a stopped broker keeps
	// accepting connections, and clients would wait on it.)
	c.Node(y).Kill9()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, tgt)
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
		t.Fatalf("alter assignments: %v %v", err, res.Error())
	}
	wantReps := append(slices.Clone(tgt), x)
	// A session timeout and a second: y is fenced meanwhile, and the move
	// must stay pending through that.
	harness.Holds(t, harness.SessionTimeout+time.Second, "the move stays pending while y is fenced", func() (bool, string) {
		ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		r, ok := ls[topic][0]
		return ok && slices.Equal(r.Replicas, wantReps) && slices.Equal(r.AddingReplicas, []int32{y}) && slices.Equal(r.RemovingReplicas, []int32{x}),
			fmt.Sprintf("pending reassignment listed as %+v (ok %v), want replicas %v adding [%d] removing [%d]", r, ok, wantReps, y, x)
	})
	if all := listAll(t, cl); len(all) != 1 || !slices.Equal(all[topic][0].Replicas, wantReps) {
		t.Fatalf("list of every reassignment: %+v", all)
	}
	mt := harness.Scrape(t, c.Node(1).Admin)
	if v, _ := harness.SumSeries(mt, "ringlog_reassignment_partitions"); v != 1 {
		t.Fatalf("leader's ringlog_reassignment_partitions %v, want 1", v)
	}
	if v, _ := harness.SumSeries(mt, "ringlog_reassignment_adding_lag_messages"); v < 200 {
		t.Fatalf("leader's ringlog_reassignment_adding_lag_messages %v, want >= 200", v)
	}
	if v, _ := harness.SumSeries(harness.Scrape(t, c.Node(2).Admin), "ringlog_reassignment_partitions"); v != 0 {
		t.Fatalf("a follower reports ringlog_reassignment_partitions %v", v)
	}

	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign(topic, 0)
	if res, err := adm.AlterPartitionAssignments(ctx, cancel); err != nil || res.Error() != nil {
		t.Fatalf("cancel: %v %v", err, res.Error())
	}
	if ls := listAll(t, cl); len(ls) != 0 {
		t.Fatalf("list after cancel: %+v", ls)
	}
	// Every broker applies the revert within moments.
	harness.WaitMetadata(t, adm, 10*time.Second, "original replicas back, in sync, led by 1", func(m kadm.Metadata) bool {
		p := m.Topics[topic].Partitions[0]
		return slices.Equal(p.Replicas, orig) && slices.Equal(sorted(p.ISR), orig) && p.Leader == 1
	})
	// A second cancel has nothing to cancel.
	res, err := adm.AlterPartitionAssignments(ctx, cancel)
	if err != nil {
		t.Fatal(err)
	}
	if e := res[topic][0].Err; !errors.Is(e, kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", e)
	}
	// A cancel deletes the log an adding replica had started. y runs
	// again, and the leader serves replicas being added nothing (a
	// replication throttle of 0 B/s applies to them automatically), so
	// y creates the partition's directory but cannot join the ISR.
	c.Node(y).Restart()
	// More than one replica fetch carries (1 MiB per partition), and
	// incompressible: the throttle lets a fetch through before it charges
	// it, so with less the first fetch alone would complete the move.
	var big []*kgo.Record
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		v := make([]byte, 100_000)
		for i := range v {
			v[i] = byte(rnd.Uint32())
		}
		big = append(big, &kgo.Record{Topic: topic, Value: v})
	}
	if err := cl.ProduceSync(ctx, big...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{harness.SetConfig("leader.replication.throttled.rate", "0")})); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.Node(y).DataDir, topic+"-0")
	harness.Eventually(t, 20*time.Second, "move to the restarted broker", func() (bool, string) {
		// Refused (INVALID_REPLICA_ASSIGNMENT) until y is unfenced.
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return false, err.Error()
		}
		return res.Error() == nil, fmt.Sprint(res.Error())
	})
	harness.WaitPath(t, dir, true)
	// A second: a throttle that let bytes through would have the adding
	// replica copy the 4 MB backlog on loopback and complete the move well
	// within it.
	harness.Holds(t, time.Second, "move with a 0 B/s throttle pending", func() (bool, string) {
		ls := listAll(t, cl)
		return len(ls) == 1, fmt.Sprintf("%+v", ls)
	})
	if res, err := adm.AlterPartitionAssignments(ctx, cancel); err != nil || res.Error() != nil {
		t.Fatalf("second cancel: %v %v", err, res.Error())
	}
	harness.WaitPath(t, dir, false)
	if err := harness.AlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{deleteCfg("leader.replication.throttled.rate")})); err != nil {
		t.Fatal(err)
	}
	if got := readPartition(t, c.Node(1).Addr, topic, 0, 240); len(got) != 240 {
		t.Fatalf("read %d records after cancel", len(got))
	}
}

// TestAdminReassignRefusals checks the per-partition errors Kafka gives.
func TestAdminReassignRefusals(t *testing.T) {
	t.Parallel()
	b := harness.StartBroker(t, t.TempDir())
	adm := kadm.NewClient(b.Client(t))
	harness.CreateTopic(t, adm, "rf", 1, 1)
	ctx := harness.Context(t, 30*time.Second)
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	served := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		served[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if served[45] != [2]int16{0, 0} || served[46] != [2]int16{0, 0} {
		t.Fatalf("ApiVersions: AlterPartitionReassignments %v, ListPartitionReassignments %v; want 0-0 each", served[45], served[46])
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("nope", 0, []int32{1})
	req.Assign("rf", 5, []int32{1})
	req.Assign("rf", 0, []int32{1, 1})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]error{
		"nope": {0: kerr.UnknownTopicOrPartition},
		"rf":   {5: kerr.UnknownTopicOrPartition, 0: kerr.InvalidReplicaAssignment},
	}
	check := func(res kadm.AlterPartitionAssignmentsResponses, want map[string]map[int32]error) {
		t.Helper()
		for topic, ps := range want {
			for p, w := range ps {
				if got := res[topic][p].Err; !errors.Is(got, w) {
					t.Fatalf("%s-%d: %v, want %v", topic, p, got, w)
				}
			}
		}
	}
	check(res, want)
	for _, tc := range []struct {
		name string
		reps []int32
		want error
	}{
		{"unregistered broker", []int32{1, 7}, kerr.InvalidReplicaAssignment},
		{"empty target", []int32{}, kerr.InvalidReplicaAssignment},
		{"cancel without one", nil, kerr.NoReassignmentInProgress},
	} {
		req := kadm.AlterPartitionAssignmentsReq{"rf": {0: tc.reps}}
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := res["rf"][0].Err; !errors.Is(got, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if ls := listAll(t, b.Client(t)); len(ls) != 0 {
		t.Fatalf("list: %+v", ls)
	}
	// A same-set target completes at once.
	if res, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"rf": {0: {1}}}); err != nil || res.Error() != nil {
		t.Fatalf("same target: %v %v", err, res.Error())
	}
	// A request larger than one metadata entry holds (1000 items) is
	// applied in parts; every item is answered in its place. (A raw
	// request: kadm's map cannot name a partition twice.)
	big := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	bt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	bt.Topic = "rf"
	for i := range 2100 {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Replicas = []int32{1}
		if i == 1500 {
			rp.Partition = 3 // unknown, in the second part
		}
		bt.Partitions = append(bt.Partitions, rp)
	}
	big.Topics = append(big.Topics, bt)
	bresp, err := big.RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if bresp.ErrorCode != 0 || len(bresp.Topics) != 1 || len(bresp.Topics[0].Partitions) != 2100 {
		t.Fatalf("large request: error %d, %d topics", bresp.ErrorCode, len(bresp.Topics))
	}
	for i, rp := range bresp.Topics[0].Partitions {
		want := int16(0)
		if i == 1500 {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if rp.ErrorCode != want {
			t.Fatalf("large request item %d (partition %d): error %d, want %d", i, rp.Partition, rp.ErrorCode, want)
		}
	}
}

// TestAdminReassignAuthorization: with the authorizer on, both APIs need
// their cluster operation (ALTER, DESCRIBE); a super user passes.
func TestAdminReassignAuthorization(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // startAuthorizedBroker restarts the broker
	_, as := startAuthorizedBroker(t, []string{"az"})
	ctx := harness.Context(t, 30*time.Second)
	alice, admin := kadm.NewClient(as("alice")), kadm.NewClient(as("admin"))
	req := kadm.AlterPartitionAssignmentsReq{"az": {0: {1}}}
	res, err := alice.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = res["az"][0].Err
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter without ALTER on the cluster: %v", err)
	}
	if _, err := alice.ListPartitionReassignments(ctx, kadm.TopicsSet{"az": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("list without DESCRIBE on the cluster: %v", err)
	}
	if res, err := admin.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
		t.Fatalf("super user: %v %v", err, res.Error())
	}
	if _, err := admin.ListPartitionReassignments(ctx, kadm.TopicsSet{"az": {0: {}}}); err != nil {
		t.Fatalf("super user list: %v", err)
	}
}
