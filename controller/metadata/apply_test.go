package metadata

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// machine drives an image through commands with increasing indexes.
type machine struct {
	t   *testing.T
	img *Image
}

func newMachine(t *testing.T) *machine {
	m := &machine{t: t, img: EmptyImage()}
	m.ok(Command{InitCluster: &InitCluster{ClusterID: "c1"}})
	return m
}

func (m *machine) apply(c Command) Result {
	m.t.Helper()
	// Round-trip through the log encoding so it is exercised too.
	b, err := c.Encode()
	if err != nil {
		m.t.Fatal(err)
	}
	dc, err := DecodeCommand(b)
	if err != nil {
		m.t.Fatal(err)
	}
	before := m.img
	next, res := m.img.Apply(m.img.Index()+1, dc)
	if res.Err != nil && !next.Equal(withIndex(before, next.Index())) {
		m.t.Fatalf("rejected command changed state: %v", res.Err)
	}
	m.img = next
	return res
}

func withIndex(im *Image, idx uint64) *Image {
	c := *im
	c.index = idx
	return &c
}

func (m *machine) ok(c Command) Result {
	m.t.Helper()
	res := m.apply(c)
	if res.Err != nil {
		m.t.Fatalf("unexpected rejection: %v", res.Err)
	}
	return res
}

func (m *machine) reject(c Command, want error) {
	m.t.Helper()
	res := m.apply(c)
	if !errors.Is(res.Err, want) {
		m.t.Fatalf("got %v, want %v", res.Err, want)
	}
}

// register registers and unfences broker id; returns its epoch.
func (m *machine) register(id int32, rack string) uint64 {
	m.t.Helper()
	res := m.ok(Command{RegisterBroker: &RegisterBroker{ClusterID: "c1", ID: id, Incarnation: NewUUID(), Rack: rack,
		Endpoints: []Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092 + id}}}})
	if !res.Broker.Fenced {
		m.t.Fatal("new registration must start fenced")
	}
	m.ok(Command{UnfenceBroker: &UnfenceBroker{ID: id, Epoch: res.Broker.Epoch}})
	return res.Broker.Epoch
}

func (m *machine) part(topic string, p int32) Partition {
	m.t.Helper()
	pp, ok := m.img.Partition(topic, p)
	if !ok {
		m.t.Fatalf("no partition %s-%d", topic, p)
	}
	return pp
}

// newMachineWithTopicA returns a machine with brokers 1, 2 and 3
// registered and unfenced, and topic "a" of one partition on replicas
// 1, 2, 3; with the epochs of brokers 1 and 2 and the topic's ID.
func newMachineWithTopicA(t *testing.T) (m *machine, e1, e2 uint64, tid UUID) {
	t.Helper()
	m = newMachine(t)
	e1 = m.register(1, "")
	e2 = m.register(2, "")
	m.register(3, "")
	tid = NewUUID()
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: tid, Assignment: [][]int32{{1, 2, 3}}}})
	return m, e1, e2, tid
}

// setISR has broker, at broker epoch epoch, set the ISR of partition 0 of
// topic (ID tid) to isr at the partition's current epochs.
func (m *machine) setISR(topic string, tid UUID, broker int32, epoch uint64, isr ...int32) {
	m.t.Helper()
	p := m.part(topic, 0)
	m.ok(Command{AlterPartition: &AlterPartition{BrokerID: broker, BrokerEpoch: epoch, TopicID: tid, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}})
}

func TestInitAndRegister(t *testing.T) {
	m := &machine{t: t, img: EmptyImage()}
	reg := &RegisterBroker{ClusterID: "c1", ID: 1, Incarnation: NewUUID()}
	m.reject(Command{RegisterBroker: reg}, ErrClusterNotInitialized)
	m.ok(Command{InitCluster: &InitCluster{ClusterID: "c1"}})
	m.reject(Command{InitCluster: &InitCluster{ClusterID: "c2"}}, ErrClusterInitialized)
	m.reject(Command{RegisterBroker: &RegisterBroker{ClusterID: "other", ID: 1, Incarnation: NewUUID()}}, ErrClusterIDMismatch)

	r1 := m.ok(Command{RegisterBroker: reg})
	// The same incarnation again is a no-op returning the same epoch.
	r2 := m.ok(Command{RegisterBroker: reg})
	if r1.Broker.Epoch != r2.Broker.Epoch || r1.Broker.Epoch != r1.Index {
		t.Fatalf("epochs %d %d index %d", r1.Broker.Epoch, r2.Broker.Epoch, r1.Index)
	}
	m.reject(Command{UnfenceBroker: &UnfenceBroker{ID: 1, Epoch: 999}}, ErrStaleBrokerEpoch)
	m.reject(Command{UnfenceBroker: &UnfenceBroker{ID: 7, Epoch: 1}}, ErrUnknownBroker)
	m.ok(Command{UnfenceBroker: &UnfenceBroker{ID: 1, Epoch: r1.Broker.Epoch}})
	if b, _ := m.img.Broker(1); b.Fenced {
		t.Fatal("still fenced")
	}
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: r1.Broker.Epoch}})
	m.reject(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: r1.Broker.Epoch}}, ErrAlreadyFenced)
}

func TestDecodeRejectsGarbage(t *testing.T) {
	f := NewFSM()
	res := f.Apply(&raft.Log{Index: 1, Data: []byte("nope")}).(*Result)
	if !errors.Is(res.Err, ErrInvalidCommand) || f.Image().Index() != 1 {
		t.Fatalf("got %v index %d", res.Err, f.Image().Index())
	}
	if _, err := (Command{}).Encode(); !errors.Is(err, ErrInvalidCommand) {
		t.Fatal(err)
	}
}

func TestTopicsLifecycle(t *testing.T) {
	m := newMachine(t)
	for id := int32(1); id <= 3; id++ {
		m.register(id, "")
	}
	id := NewUUID()
	create := &CreateTopic{Name: "a", ID: id, Configs: map[string]string{"retention.ms": "1"}, Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}}}
	m.ok(Command{CreateTopic: create})
	m.reject(Command{CreateTopic: create}, ErrTopicExists)
	m.reject(Command{CreateTopic: &CreateTopic{Name: "b", ID: id, Assignment: [][]int32{{1}}}}, ErrTopicExists)
	m.reject(Command{CreateTopic: &CreateTopic{Name: "b", ID: NewUUID(), Assignment: [][]int32{{1, 1}}}}, ErrInvalidAssignment)
	m.reject(Command{CreateTopic: &CreateTopic{Name: "b", ID: NewUUID(), Assignment: [][]int32{{1, 9}}}}, ErrInvalidAssignment)
	m.reject(Command{CreateTopic: &CreateTopic{Name: "b", ID: NewUUID(), Assignment: [][]int32{{1, 2}, {1}}}}, ErrInvalidAssignment)
	m.reject(Command{CreateTopic: &CreateTopic{Name: "", ID: NewUUID(), Assignment: [][]int32{{1}}}}, ErrInvalidTopic)
	m.reject(Command{CreateTopic: &CreateTopic{Name: "b", ID: NewUUID()}}, ErrInvalidPartitions)

	p := m.part("a", 1)
	if p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3, 1}) || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
		t.Fatalf("partition %+v", p)
	}
	if tp, ok := m.img.TopicByID(id); !ok || tp.Configs["retention.ms"] != "1" {
		t.Fatalf("by id: %+v", tp)
	}

	m.reject(Command{CreatePartitions: &CreatePartitions{Name: "a", Total: 2, Assignment: [][]int32{{1, 2, 3}}}}, ErrInvalidPartitions)
	m.reject(Command{CreatePartitions: &CreatePartitions{Name: "a", Total: 3, Assignment: [][]int32{{1, 2}}}}, ErrInvalidAssignment)
	m.reject(Command{CreatePartitions: &CreatePartitions{Name: "x", Total: 3, Assignment: [][]int32{{1, 2, 3}}}}, ErrUnknownTopic)
	m.ok(Command{CreatePartitions: &CreatePartitions{Name: "a", Total: 3, Assignment: [][]int32{{3, 1, 2}}}})
	if p := m.part("a", 2); p.Leader != 3 {
		t.Fatalf("new partition %+v", p)
	}

	m.reject(Command{DeleteTopic: &DeleteTopic{Name: "a", ID: NewUUID()}}, ErrUnknownTopic)
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "a", ID: id}})
	m.reject(Command{DeleteTopic: &DeleteTopic{Name: "a"}}, ErrUnknownTopic)
	if _, ok := m.img.TopicByID(id); ok {
		t.Fatal("topic id survived delete")
	}
}

func TestFenceMovesLeadership(t *testing.T) {
	m := newMachine(t)
	e1 := m.register(1, "")
	m.register(2, "")
	m.register(3, "")
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: NewUUID(), Assignment: [][]int32{{1, 2, 3}, {2, 1, 3}}}})
	m.ok(Command{CreateTopic: &CreateTopic{Name: "b", ID: NewUUID(), Assignment: [][]int32{{1}}}})
	before := m.img

	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	p0 := m.part("a", 0)
	if p0.Leader != 2 || !slices.Equal(p0.ISR, []int32{2, 3}) || p0.LeaderEpoch != 1 || p0.PartitionEpoch != 1 {
		t.Fatalf("p0 %+v", p0)
	}
	// Follower: dropped from the ISR, leader unchanged.
	p1 := m.part("a", 1)
	if p1.Leader != 2 || !slices.Equal(p1.ISR, []int32{2, 3}) || p1.LeaderEpoch != 0 || p1.PartitionEpoch != 1 {
		t.Fatalf("p1 %+v", p1)
	}
	// Sole replica: offline, but stays in the ISR so it can come back.
	p2 := m.part("b", 0)
	if p2.Leader != NoLeader || !slices.Equal(p2.ISR, []int32{1}) || p2.LeaderEpoch != 1 {
		t.Fatalf("p2 %+v", p2)
	}
	// The old image is untouched (copy-on-write).
	if p, _ := before.Partition("a", 0); p.Leader != 1 || len(p.ISR) != 3 {
		t.Fatalf("old image changed: %+v", p)
	}
	// Unfencing brings the offline partition back.
	m.ok(Command{UnfenceBroker: &UnfenceBroker{ID: 1, Epoch: e1}})
	if p2 := m.part("b", 0); p2.Leader != 1 || p2.LeaderEpoch != 2 || p2.PartitionEpoch != 2 {
		t.Fatalf("p2 after unfence %+v", p2)
	}
	// A new incarnation of broker 2 fences the old one at once.
	m.ok(Command{RegisterBroker: &RegisterBroker{ClusterID: "c1", ID: 2, Incarnation: NewUUID()}})
	if p0 := m.part("a", 0); p0.Leader != 3 || !slices.Equal(p0.ISR, []int32{3}) {
		t.Fatalf("p0 after re-register %+v", p0)
	}
}

func TestAlterPartition(t *testing.T) {
	m, e1, e2, tid := newMachineWithTopicA(t)
	alter := func(broker int32, epoch uint64, le, pe int32, isr ...int32) Command {
		return Command{AlterPartition: &AlterPartition{BrokerID: broker, BrokerEpoch: epoch, TopicID: tid, LeaderEpoch: le, PartitionEpoch: pe, NewISR: isr}}
	}
	res := m.ok(alter(1, e1, 0, 0, 1, 2))
	if res.Partition.PartitionEpoch != 1 || !slices.Equal(res.Partition.ISR, []int32{1, 2}) {
		t.Fatalf("%+v", res.Partition)
	}
	m.reject(alter(1, e1, 0, 0, 1), ErrInvalidUpdateVersion) // stale partition epoch
	m.reject(alter(1, e1+100, 0, 1, 1), ErrStaleBrokerEpoch)
	m.reject(alter(2, e2, 0, 1, 2), ErrNotLeader)
	m.reject(alter(1, e1, 0, 1, 2), ErrInvalidCommand) // leader missing
	m.reject(alter(1, e1, 0, 1, 1, 7), ErrIneligibleReplica)
	m.reject(Command{AlterPartition: &AlterPartition{BrokerID: 1, BrokerEpoch: e1, TopicID: NewUUID(), NewISR: []int32{1}}}, ErrUnknownTopic)
	// Re-adding a fenced replica is refused.
	m.ok(Command{FenceBroker: &FenceBroker{ID: 2, Epoch: e2}})
	p := m.part("a", 0)
	m.reject(alter(1, e1, p.LeaderEpoch, p.PartitionEpoch, 1, 2, 3), ErrIneligibleReplica)
	m.ok(alter(1, e1, p.LeaderEpoch, p.PartitionEpoch, 1, 3))
	// Leadership moves; the old leader's request is now fenced.
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	p = m.part("a", 0)
	if p.Leader != 3 || p.LeaderEpoch != 1 {
		t.Fatalf("%+v", p)
	}
	m.reject(alter(1, e1, 0, p.PartitionEpoch, 1, 3), ErrFencedLeaderEpoch)
}

func TestElectLeader(t *testing.T) {
	m, e1, e2, tid := newMachineWithTopicA(t)
	elect := func(unclean bool) Command {
		return Command{ElectLeader: &ElectLeader{Topic: "a", Unclean: unclean}}
	}
	m.reject(elect(false), ErrElectionNotNeeded)
	m.reject(Command{ElectLeader: &ElectLeader{Topic: "a", Partition: 5}}, ErrUnknownTopic)
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}}) // leader -> 2
	// Broker 1 is back: preferred election returns leadership to it once
	// it is in the ISR again.
	m.ok(Command{UnfenceBroker: &UnfenceBroker{ID: 1, Epoch: e1}})
	m.reject(elect(false), ErrElectionNotNeeded) // 1 is not in the ISR yet
	m.setISR("a", tid, 2, e2, 2)
	m.ok(Command{FenceBroker: &FenceBroker{ID: 2, Epoch: e2}})
	if p := m.part("a", 0); p.Leader != NoLeader || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("%+v", p)
	}
	m.reject(elect(false), ErrNoEligibleLeader) // only the ISR may lead cleanly
	res := m.ok(elect(true))
	if res.Partition.Leader != 1 || !slices.Equal(res.Partition.ISR, []int32{1}) {
		t.Fatalf("unclean %+v", res.Partition)
	}
	m.reject(elect(true), ErrElectionNotNeeded)
}

func TestElectPreferredLeader(t *testing.T) {
	m, e1, e2, tid := newMachineWithTopicA(t)
	preferred := Command{ElectLeader: &ElectLeader{Topic: "a", Preferred: true}}
	m.reject(preferred, ErrElectionNotNeeded)
	m.reject(Command{ElectLeader: &ElectLeader{Topic: "a", Partition: 1, Preferred: true}}, ErrUnknownTopic)
	m.reject(Command{ElectLeader: &ElectLeader{Topic: "b", Preferred: true}}, ErrUnknownTopic)
	m.reject(Command{ElectLeader: &ElectLeader{Topic: "a", Preferred: true, Unclean: true}}, ErrInvalidCommand)

	// Fenced: leadership moves to 2, and the preferred replica is out.
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	m.reject(preferred, ErrPreferredNotAvailable)
	// Unfenced but not yet back in the ISR: still not available, and
	// (unlike the plain mode) 3 is no substitute.
	m.ok(Command{UnfenceBroker: &UnfenceBroker{ID: 1, Epoch: e1}})
	m.reject(preferred, ErrPreferredNotAvailable)
	p := m.part("a", 0)
	if p.Leader != 2 {
		t.Fatalf("%+v", p)
	}
	// Back in the ISR: the election moves leadership and bumps both epochs.
	m.setISR("a", tid, 2, e2, 2, 3, 1)
	before := m.part("a", 0)
	res := m.ok(preferred)
	if res.Partition.Leader != 1 || res.Partition.LeaderEpoch != before.LeaderEpoch+1 || res.Partition.PartitionEpoch != before.PartitionEpoch+1 ||
		!slices.Equal(res.Partition.ISR, []int32{2, 3, 1}) {
		t.Fatalf("before %+v after %+v", before, res.Partition)
	}
	if p := m.part("a", 0); p.Leader != 1 {
		t.Fatalf("image %+v", p)
	}
	m.reject(preferred, ErrElectionNotNeeded)

	// In the ISR but fenced (the ISR keeps its last member): not available.
	m.setISR("a", tid, 1, e1, 1)
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	if p := m.part("a", 0); p.Leader != NoLeader || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("%+v", p)
	}
	m.reject(preferred, ErrPreferredNotAvailable)
}

func TestAllocateProducerIDs(t *testing.T) {
	m := newMachine(t)
	e1 := m.register(1, "")
	a := m.ok(Command{AllocateProducerIDs: &AllocateProducerIDs{BrokerID: 1, BrokerEpoch: e1}})
	b := m.ok(Command{AllocateProducerIDs: &AllocateProducerIDs{BrokerID: 1, BrokerEpoch: e1}})
	if a.ProducerIDStart != 0 || b.ProducerIDStart != ProducerIDBlockSize {
		t.Fatalf("%d %d", a.ProducerIDStart, b.ProducerIDStart)
	}
	m.reject(Command{AllocateProducerIDs: &AllocateProducerIDs{BrokerID: 1, BrokerEpoch: 0}}, ErrStaleBrokerEpoch)
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	m.reject(Command{AllocateProducerIDs: &AllocateProducerIDs{BrokerID: 1, BrokerEpoch: e1}}, ErrBrokerFenced)
}

func TestSnapshotRestore(t *testing.T) {
	m := newMachine(t)
	e1 := m.register(1, "r1")
	m.register(2, "r2")
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: NewUUID(), Configs: map[string]string{"k": "v"}, Assignment: [][]int32{{1, 2}, {2, 1}}}})
	m.ok(Command{CreateTopic: &CreateTopic{Name: "b", ID: NewUUID(), Assignment: [][]int32{{1}}}})
	m.ok(Command{AllocateProducerIDs: &AllocateProducerIDs{BrokerID: 1, BrokerEpoch: e1}})
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})

	f := NewFSM()
	f.publish(m.img)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, m.img.Index(), 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	g := NewFSM()
	changed := g.Changed()
	if err := g.Restore(rc); err != nil {
		t.Fatal(err)
	}
	<-changed
	if !g.Image().Equal(m.img) || g.Image().ClusterID() != "c1" {
		t.Fatal("restored image differs")
	}
	// Encodings are canonical, so equal images encode identically.
	var a, b bytes.Buffer
	_ = m.img.Encode(&a)
	_ = g.Image().Encode(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("encodings differ:\n%s\n%s", a.Bytes(), b.Bytes())
	}
	// Equal must be able to fail.
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "b"}})
	if g.Image().Equal(m.img) {
		t.Fatal("Equal ignores a deleted topic")
	}
	if _, err := DecodeImage(bytes.NewReader([]byte(`{"Version":9}`))); err == nil {
		t.Fatal("unknown snapshot version accepted")
	}
}

// A replica reported offline leaves the ISR, loses its leadership to the
// next in-sync replica and may neither lead nor rejoin the ISR until its
// broker registers again.
func TestReplicaOffline(t *testing.T) {
	m, e1, e2, tid := newMachineWithTopicA(t)
	off := func(broker int32, epoch uint64, parts ...int32) Command {
		return Command{ReplicaOffline: &ReplicaOffline{BrokerID: broker, BrokerEpoch: epoch, TopicID: tid, Partitions: parts}}
	}
	m.reject(off(1, e1+100, 0), ErrStaleBrokerEpoch)
	m.reject(off(1, e1, 3), ErrUnknownTopic)
	m.reject(Command{ReplicaOffline: &ReplicaOffline{BrokerID: 1, BrokerEpoch: e1, TopicID: NewUUID(), Partitions: []int32{0}}}, ErrUnknownTopic)
	m.ok(off(1, e1, 0))
	p := m.part("a", 0)
	if p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) || !slices.Equal(p.Offline, []int32{1}) || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 {
		t.Fatalf("after offline %+v", p)
	}
	// A retried report changes nothing.
	m.ok(off(1, e1, 0))
	if q := m.part("a", 0); q.PartitionEpoch != 1 {
		t.Fatalf("repeated report bumped the epoch: %+v", q)
	}
	// The new leader may not add it back; preferred election skips it.
	m.reject(Command{AlterPartition: &AlterPartition{BrokerID: 2, BrokerEpoch: e2, TopicID: tid, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{1, 2, 3}}}, ErrIneligibleReplica)
	m.reject(Command{ElectLeader: &ElectLeader{Topic: "a", Preferred: true}}, ErrPreferredNotAvailable)
	// Broker 2 fails too: 3 leads; the last ISR member is never removed.
	m.ok(off(2, e2, 0))
	m.setISR("a", tid, 3, m.img.brokers[3].Epoch, 3)
	if p := m.part("a", 0); p.Leader != 3 || !slices.Equal(p.ISR, []int32{3}) {
		t.Fatalf("%+v", p)
	}
	e3 := m.img.brokers[3].Epoch
	m.ok(Command{ReplicaOffline: &ReplicaOffline{BrokerID: 3, BrokerEpoch: e3, TopicID: tid, Partitions: []int32{0}}})
	if p := m.part("a", 0); p.Leader != NoLeader || !slices.Equal(p.ISR, []int32{3}) {
		t.Fatalf("all offline %+v", p)
	}
	m.reject(Command{ElectLeader: &ElectLeader{Topic: "a", Unclean: true}}, ErrNoEligibleLeader)
	// Broker 1 restarts: no longer offline; broker 3 restarts and, once
	// unfenced, leads again from the ISR.
	m.register(1, "")
	if p := m.part("a", 0); !slices.Equal(p.Offline, []int32{2, 3}) {
		t.Fatalf("offline after broker 1 re-registered: %+v", p)
	}
	m.register(3, "")
	if p := m.part("a", 0); p.Leader != 3 || !slices.Equal(p.Offline, []int32{2}) {
		t.Fatalf("after broker 3 restarted %+v", p)
	}
	// Snapshots keep the offline set.
	var buf bytes.Buffer
	if err := m.img.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(&buf)
	if err != nil || !back.Equal(m.img) {
		t.Fatalf("snapshot round trip: %v", err)
	}
}
