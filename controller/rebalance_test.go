package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/testwait"
)

// imageBuilder applies commands to an image, failing on any rejection.
type imageBuilder struct {
	t   *testing.T
	img *metadata.Image
}

func (b *imageBuilder) ok(c metadata.Command) metadata.Result {
	b.t.Helper()
	next, res := b.img.Apply(b.img.Index()+1, c)
	if res.Err != nil {
		b.t.Fatalf("%+v: %v", c, res.Err)
	}
	b.img = next
	return res
}

func (b *imageBuilder) broker(id int32) uint64 {
	b.t.Helper()
	res := b.ok(metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c", ID: id, Incarnation: metadata.NewUUID()}})
	b.ok(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: id, Epoch: res.Broker.Epoch}})
	return res.Broker.Epoch
}

// rejoin adds broker id back to a partition's ISR, as its leader would.
func (b *imageBuilder) rejoin(topic string, part int32, id int32) {
	b.t.Helper()
	tp, _ := b.img.Topic(topic)
	p := tp.Partitions[part]
	lb, _ := b.img.Broker(p.Leader)
	b.ok(metadata.Command{AlterPartition: &metadata.AlterPartition{BrokerID: p.Leader, BrokerEpoch: lb.Epoch, TopicID: tp.ID,
		Partition: part, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), id)}})
}

func TestPreferredMovesThreshold(t *testing.T) {
	b := &imageBuilder{t: t, img: metadata.EmptyImage()}
	b.ok(metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c"}})
	e1 := b.broker(1)
	b.broker(2)
	e3 := b.broker(3)
	assign := make([][]int32, 10)
	for i := range assign {
		assign[i] = []int32{1, 2, 3}
	}
	b.ok(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "t", ID: metadata.NewUUID(), Assignment: assign}})
	b.ok(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "v", ID: metadata.NewUUID(), Assignment: [][]int32{{3, 1, 2}, {3, 2, 1}}}})
	if m := preferredMoves(b.img, 0); len(m) != 0 {
		t.Fatalf("balanced cluster: %+v", m)
	}

	// Broker 1 comes back after a fence; nine of its ten partitions are
	// led by it again, one (t-0) by broker 2: 10% is not above 10%.
	b.ok(metadata.Command{FenceBroker: &metadata.FenceBroker{ID: 1, Epoch: e1}})
	b.ok(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: 1, Epoch: e1}})
	for i := range int32(10) {
		b.rejoin("t", i, 1)
		if i > 0 {
			b.ok(metadata.Command{ElectLeader: &metadata.ElectLeader{Topic: "t", Partition: i, Preferred: true}})
		}
	}
	if m := preferredMoves(b.img, 10); len(m) != 0 {
		t.Fatalf("10%% imbalance at a 10%% threshold: %+v", m)
	}
	want := []preferredMove{{Topic: "t", Partition: 0, From: 2, To: 1}}
	if m := preferredMoves(b.img, 9); !slices.Equal(m, want) {
		t.Fatalf("at 9%%: %+v, want %+v", m, want)
	}

	// Broker 3 is fenced: all its partitions are led elsewhere, yet none
	// may move while it is fenced, nor while it is out of the ISR.
	b.ok(metadata.Command{FenceBroker: &metadata.FenceBroker{ID: 3, Epoch: e3}})
	if m := preferredMoves(b.img, 10); len(m) != 0 {
		t.Fatalf("fenced preferred replica: %+v", m)
	}
	b.ok(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: 3, Epoch: e3}})
	if m := preferredMoves(b.img, 10); len(m) != 0 {
		t.Fatalf("preferred replica out of the ISR: %+v", m)
	}
	// Back in v-0's ISR only: its imbalance counts both partitions, the
	// moves only the eligible one.
	b.rejoin("v", 0, 3)
	p, _ := b.img.Partition("v", 0)
	want = []preferredMove{{Topic: "v", Partition: 0, From: p.Leader, To: 3}}
	if m := preferredMoves(b.img, 10); !slices.Equal(m, want) {
		t.Fatalf("%+v, want %+v", m, want)
	}
}

// A fenced broker's leaderships move away; once it is unfenced and back in
// the ISR the active controller's rebalance returns them, and not before.
func TestRebalanceReturnsPreferredLeaders(t *testing.T) {
	const interval = 200 * time.Millisecond
	_, nodes := memCluster(t, 3, func(c *Config) { c.LeaderRebalanceInterval = interval })
	victim := nodes[1]
	top, err := nodes[0].CreateTopic(ctxT(t), CreateTopicRequest{Name: "r", Assignment: [][]int32{{2, 1, 3}, {2, 3, 1}, {1, 2, 3}, {3, 1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	victim.pauseHeartbeats.Store(true)
	checkFor(t, victim.cfg.BrokerSessionTimeout+5*time.Second, func() error {
		img := nodes[0].MetadataImage()
		for i, want := range []int32{1, 3} {
			p, _ := img.Partition("r", int32(i))
			if p.Leader != want || contains(p.ISR, 2) {
				return fmt.Errorf("partition %d: %+v", i, p)
			}
		}
		return nil
	})
	victim.pauseHeartbeats.Store(false)
	checkFor(t, 10*time.Second, func() error { return victim.Fresh() })

	// Unfenced but out of the ISR: several rebalances pass, nothing moves,
	// and an explicit preferred election is refused.
	if _, err := nodes[2].ElectLeader(ctxT(t), "r", 0, PreferredElection); !errors.Is(err, metadata.ErrPreferredNotAvailable) {
		t.Fatalf("preferred election with the preferred replica out of the ISR: %v", err)
	}
	// Five rebalance intervals: five rebalances that would move them.
	var moved [2]metadata.Partition
	var bad string
	if !testwait.Holds(5*interval, func() bool {
		img := nodes[0].MetadataImage()
		for i, want := range []int32{1, 3} {
			p, _ := img.Partition("r", int32(i))
			if p.Leader != want {
				bad = fmt.Sprintf("partition %d moved while its preferred replica is out of the ISR: %+v", i, p)
				return false
			}
			moved[i] = p
		}
		return true
	}) {
		t.Fatal(bad)
	}

	// What the leaders' replication does once the follower caught up.
	for i, p := range moved {
		if _, err := nodes[p.Leader-1].AlterPartition(ctxT(t), top.ID, int32(i), p.LeaderEpoch, p.PartitionEpoch, append(slices.Clone(p.ISR), 2)); err != nil {
			t.Fatal(err)
		}
	}
	checkFor(t, interval+5*time.Second, func() error {
		img := nodes[0].MetadataImage()
		for i, was := range moved {
			p, _ := img.Partition("r", int32(i))
			if p.Leader != 2 || p.LeaderEpoch != was.LeaderEpoch+1 || len(p.ISR) != 3 {
				return fmt.Errorf("partition %d: %+v", i, p)
			}
		}
		return nil
	})
	// The partitions that never left their preferred leader are untouched.
	for i := int32(2); i < 4; i++ {
		if p, _ := nodes[0].MetadataImage().Partition("r", i); p.LeaderEpoch != 0 || p.Leader != top.Partitions[i].Leader {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	if _, err := nodes[2].ElectLeader(ctxT(t), "r", 0, PreferredElection); !errors.Is(err, metadata.ErrElectionNotNeeded) {
		t.Fatalf("preferred election on a balanced partition: %v", err)
	}
	if _, err := nodes[2].ElectLeader(ctxT(t), "r", 0, UncleanElection); !errors.Is(err, metadata.ErrElectionNotNeeded) {
		t.Fatalf("unclean election on a led partition: %v", err)
	}
}

// An unclean election through Node.ElectLeader: the only ISR member is
// fenced, and the out-of-sync live replica takes over alone.
func TestElectLeaderUnclean(t *testing.T) {
	_, nodes := memCluster(t, 2, nil)
	top, err := nodes[0].CreateTopic(ctxT(t), CreateTopicRequest{Name: "u", Assignment: [][]int32{{2, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	p := top.Partitions[0]
	if _, err := nodes[1].AlterPartition(ctxT(t), top.ID, 0, p.LeaderEpoch, p.PartitionEpoch, []int32{2}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].ElectLeader(ctxT(t), "u", 0, ElectionType(7)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("unknown election type: %v", err)
	}
	nodes[1].pauseHeartbeats.Store(true)
	checkFor(t, nodes[1].cfg.BrokerSessionTimeout+5*time.Second, func() error {
		if p, _ := nodes[0].MetadataImage().Partition("u", 0); p.Leader != metadata.NoLeader {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
	if _, err := nodes[0].ElectLeader(ctxT(t), "u", 0, PreferredElection); !errors.Is(err, metadata.ErrPreferredNotAvailable) {
		t.Fatalf("preferred election with the preferred replica fenced: %v", err)
	}
	got, err := nodes[0].ElectLeader(ctxT(t), "u", 0, UncleanElection)
	if err != nil || got.Leader != 1 || !slices.Equal(got.ISR, []int32{1}) {
		t.Fatalf("unclean election: %+v %v", got, err)
	}
}
