package share

import (
	"context"
	"fmt"
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

// allStartOffsets asks for every share-partition start offset of group
// (DescribeShareGroupOffsets with null topics): partition -> offset, of
// topic only.
func allStartOffsets(ctx context.Context, cl *kgo.Client, group, topic string) (map[int32]int64, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group // Topics nil: all of them
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
			if t.Topic == topic {
				out[p.Partition] = p.StartOffset
			}
		}
	}
	return out, nil
}

// describeShare is ShareGroupDescribe of one group.
func describeShare(ctx context.Context, cl *kgo.Client, group string) (kmsg.ShareGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ShareGroupDescribeResponseGroup{}, err
	}
	g := resp.Groups[0]
	return g, kerr.ErrorForCode(g.ErrorCode)
}

// TestShareGroupDurableMetadata: 3 brokers, a 3-partition RF=3 topic.
// Offsets altered on an empty share group are seen by the all-topics
// DescribeShareGroupOffsets for every partition, although their state
// lives on whichever broker leads its __share_group_state partition. A
// share consumer then joins; the group's coordinator is killed with
// SIGKILL; the new coordinator loads the group from __consumer_offsets:
// the member keeps its id and epoch (it was not made to rejoin, which
// would restart the group's epochs), ListGroups and the all-topics
// describe still know the group, and the consumer goes on receiving.
func TestShareGroupDurableMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	c := harness.StartReplCluster(t, 3, harness.TxnBrokerArgs...)
	const (
		topic, group = "durable-queue", "durable-workers"
		parts        = 3
	)
	adm := harness.NewClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	harness.CreateRF3Topic(t, kadm.NewClient(adm), topic, parts)
	harness.ProduceN(t, adm, topic, 300) // about 100 per partition

	// Alter on the empty group (it is created by the alter).
	ctx := harness.Context(t, 60*time.Second)
	const at = 3
	areq := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	areq.GroupID = group
	at0 := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at0.Topic = topic
	for p := range int32(parts) {
		ap := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		ap.Partition, ap.StartOffset = p, at
		at0.Partitions = append(at0.Partitions, ap)
	}
	areq.Topics = append(areq.Topics, at0)
	// The coordinator of a fresh __consumer_offsets may still be loading.
	harness.Eventually(t, 30*time.Second, "offsets altered", func() (bool, string) {
		aresp, err := areq.RequestWith(ctx, adm)
		if err == nil {
			err = kerr.ErrorForCode(aresp.ErrorCode)
		}
		for i := 0; err == nil && i < len(aresp.Topics[0].Partitions); i++ {
			err = kerr.ErrorForCode(aresp.Topics[0].Partitions[i].ErrorCode)
		}
		if err != nil && !kerr.IsRetriable(err) {
			t.Fatalf("alter: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	wantAll := func(cl *kgo.Client, what string, ok func(map[int32]int64) bool) {
		t.Helper()
		harness.Eventually(t, 15*time.Second, what, func() (bool, string) {
			offs, err := allStartOffsets(harness.Context(t, 5*time.Second), cl, group, topic)
			return err == nil && ok(offs), fmt.Sprintf("start offsets %v, err %v", offs, err)
		})
	}
	wantAll(adm, "all-topics describe of the empty group sees the altered offsets", func(offs map[int32]int64) bool {
		return len(offs) == parts && offs[0] == at && offs[1] == at && offs[2] == at
	})

	// A consumer joins and receives.
	var mu sync.Mutex
	got := 0
	cons := shareClient(t, "", group, topic, kgo.SeedBrokers(c.Addrs()...), kgo.ShareMaxRecords(20))
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cons.Close()
		for pctx.Err() == nil {
			fs := cons.PollFetches(pctx)
			n := 0
			for _, r := range fs.Records() {
				r.Ack(kgo.AckAccept)
				n++
			}
			cons.FlushAcks(pctx)
			mu.Lock()
			got += n
			mu.Unlock()
		}
	}()
	received := func() int { mu.Lock(); defer mu.Unlock(); return got }
	harness.Eventually(t, 30*time.Second, "the consumer receives", func() (bool, string) {
		return received() > 0, "nothing yet"
	})
	var before kmsg.ShareGroupDescribeResponseGroup
	harness.Eventually(t, 15*time.Second, "one member with the whole topic", func() (bool, string) {
		var err error
		before, err = describeShare(harness.Context(t, 5*time.Second), adm, group)
		ok := err == nil && len(before.Members) == 1 && before.Members[0].Assignment.TopicPartitions != nil &&
			len(before.Members[0].Assignment.TopicPartitions) == 1 && len(before.Members[0].Assignment.TopicPartitions[0].Partitions) == parts
		return ok, fmt.Sprintf("%+v %v", before, err)
	})
	// A second member comes and goes: the group epoch moves on, so a
	// group made afresh after the kill (its members rejoining) would
	// show a lower one.
	other := shareClient(t, "", group, topic, kgo.SeedBrokers(c.Addrs()...))
	harness.Eventually(t, 15*time.Second, "a second member joins", func() (bool, string) {
		pctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		other.PollFetches(pctx) // it joins on its first poll
		d, err := describeShare(harness.Context(t, 5*time.Second), adm, group)
		return err == nil && len(d.Members) == 2, fmt.Sprintf("%d members, err %v", len(d.Members), err)
	})
	other.Close()
	harness.Eventually(t, 15*time.Second, "the second member leaves", func() (bool, string) {
		var err error
		before, err = describeShare(harness.Context(t, 5*time.Second), adm, group)
		return err == nil && len(before.Members) == 1, fmt.Sprintf("%d members, err %v", len(before.Members), err)
	})
	mem := before.Members[0]

	// Kill the group's coordinator.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	fresp, err := fc.RequestWith(ctx, adm)
	if err != nil {
		t.Fatal(err)
	}
	coord := fresp.NodeID
	if len(fresp.Coordinators) > 0 {
		coord = fresp.Coordinators[0].NodeID
	}
	if coord < 1 || int(coord) > len(c.Nodes) {
		t.Fatalf("coordinator %d", coord)
	}
	c.Node(coord).Kill9()
	t.Logf("node %d (coordinator of %s) killed; member %s at epoch %d, group epoch %d", coord, group, mem.MemberID, mem.MemberEpoch, before.GroupEpoch)

	// A fresh client per attempt: one that found the dead coordinator
	// keeps dialing it (kgo drops a cached coordinator on an error code,
	// not on a refused connection).
	survivors := func(f func(cl *kgo.Client) (bool, string)) func() (bool, string) {
		return func() (bool, string) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(coord)...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			return f(cl)
		}
	}
	// The new coordinator has the group from its records: same member,
	// same epochs. A member made to rejoin would come back at epoch 1 of a
	// new group.
	harness.Eventually(t, 30*time.Second, "the new coordinator knows the member", survivors(func(cl *kgo.Client) (bool, string) {
		d, err := describeShare(harness.Context(t, 5*time.Second), cl, group)
		ok := err == nil && len(d.Members) == 1 && d.Members[0].MemberID == mem.MemberID &&
			d.Members[0].MemberEpoch == mem.MemberEpoch && d.GroupEpoch == before.GroupEpoch
		return ok, fmt.Sprintf("group epoch %d members %+v err %v", d.GroupEpoch, d.Members, err)
	}))
	live := harness.NewClient(t, c.Addrs(coord)) // finds the live coordinator now
	// ...and keeps it: the member's heartbeats are accepted, so it is not
	// expired or replaced. (A heartbeat rejected makes franz-go rejoin,
	// which bumps the group epoch.)
	harness.Holds(t, 3*time.Second, "the member stays as it was", func() (bool, string) {
		d, err := describeShare(harness.Context(t, 5*time.Second), live, group)
		if err != nil {
			return kerr.IsRetriable(err), err.Error() // a retry is not a change
		}
		ok := len(d.Members) == 1 && d.Members[0].MemberID == mem.MemberID && d.GroupEpoch == before.GroupEpoch
		return ok, fmt.Sprintf("group epoch %d members %+v", d.GroupEpoch, d.Members)
	})
	harness.Eventually(t, 15*time.Second, "ListGroups shows the share group", survivors(func(cl *kgo.Client) (bool, string) {
		ls, err := kadm.NewClient(cl).ListGroups(harness.Context(t, 5*time.Second))
		for _, l := range ls.Sorted() {
			if l.Group == group && l.ProtocolType == "share" && l.Coordinator != coord {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v (err %v)", ls.Groups(), err)
	}))
	wantAll(live, "all-topics describe after the move", func(offs map[int32]int64) bool {
		return len(offs) == parts && !slices.ContainsFunc([]int32{0, 1, 2}, func(p int32) bool { return offs[p] < at })
	})
	// The consumer goes on: new records reach it.
	n0 := received()
	harness.ProduceN(t, harness.NewClient(t, c.Addrs(coord), kgo.RequiredAcks(kgo.AllISRAcks())), topic, 30)
	harness.Eventually(t, 30*time.Second, "the consumer receives after the move", func() (bool, string) {
		return received() > n0, fmt.Sprintf("%d records, %d before the kill", received(), n0)
	})
	cancel()
	wg.Wait()
}
