package metadata

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// newReassignMachine has brokers 1-5 registered and unfenced and topic "a"
// of one partition on 1, 2, 3 (leader 1, ISR 1, 2, 3).
func newReassignMachine(t *testing.T) (*machine, UUID) {
	t.Helper()
	m := newMachine(t)
	for id := int32(1); id <= 5; id++ {
		m.register(id, "")
	}
	tid := NewUUID()
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: tid, Assignment: [][]int32{{1, 2, 3}}}})
	return m, tid
}

func (m *machine) reassign(items ...ReassignmentItem) []error {
	m.t.Helper()
	return m.ok(Command{AlterPartitionReassignments: &AlterPartitionReassignments{Items: items}}).ItemErrs
}

func (m *machine) mustReassign(it ReassignmentItem) {
	m.t.Helper()
	if errs := m.reassign(it); len(errs) != 1 || errs[0] != nil {
		m.t.Fatalf("reassign %+v: %v", it, errs)
	}
}

func target(reps ...int32) ReassignmentItem {
	return ReassignmentItem{Topic: "a", Replicas: reps}
}

var cancelA = ReassignmentItem{Topic: "a", Cancel: true}

// alterISR has the current leader of a-0 set its ISR.
func (m *machine) alterISR(tid UUID, isr ...int32) Result {
	m.t.Helper()
	p := m.part("a", 0)
	return m.ok(Command{AlterPartition: &AlterPartition{BrokerID: p.Leader, BrokerEpoch: m.img.brokers[p.Leader].Epoch,
		TopicID: tid, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}})
}

func checkPart(t *testing.T, p Partition, reps, isr, adding, removing []int32, leader int32) {
	t.Helper()
	if !slices.Equal(p.Replicas, reps) || !slices.Equal(p.ISR, isr) || !slices.Equal(p.AddingReplicas, adding) ||
		!slices.Equal(p.RemovingReplicas, removing) || p.Leader != leader {
		t.Fatalf("got replicas %v isr %v adding %v removing %v leader %d; want %v %v %v %v %d",
			p.Replicas, p.ISR, p.AddingReplicas, p.RemovingReplicas, p.Leader, reps, isr, adding, removing, leader)
	}
	for _, r := range p.ISR {
		if !contains(p.Replicas, r) {
			t.Fatalf("ISR %v not within replicas %v", p.ISR, p.Replicas)
		}
	}
}

// Moving a follower: the target comes first, the adding replica's ISR
// join completes the move in the same entry, the leader keeps its epoch.
func TestReassignStartAndComplete(t *testing.T) {
	m, tid := newReassignMachine(t)
	before := m.part("a", 0)
	m.mustReassign(target(1, 2, 4))
	p := m.part("a", 0)
	checkPart(t, p, []int32{1, 2, 4, 3}, []int32{1, 2, 3}, []int32{4}, []int32{3}, 1)
	if p.PartitionEpoch != before.PartitionEpoch+1 || p.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("epochs %d/%d from %d/%d", p.LeaderEpoch, p.PartitionEpoch, before.LeaderEpoch, before.PartitionEpoch)
	}
	if rs := m.img.Reassignments(); len(rs) != 1 || rs[0].Topic != "a" || !slices.Equal(rs[0].Adding, []int32{4}) {
		t.Fatalf("list %+v", rs)
	}
	res := m.alterISR(tid, 1, 2, 3, 4)
	p = m.part("a", 0)
	checkPart(t, p, []int32{1, 2, 4}, []int32{1, 2, 4}, nil, nil, 1)
	if p.LeaderEpoch != before.LeaderEpoch || p.PartitionEpoch != before.PartitionEpoch+2 {
		t.Fatalf("epochs after completion %d/%d", p.LeaderEpoch, p.PartitionEpoch)
	}
	// The leader learns the final state from its AlterPartition answer.
	if !slices.Equal(res.Partition.Replicas, []int32{1, 2, 4}) || res.Partition.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("alter result %+v", res.Partition)
	}
	if len(m.img.Reassignments()) != 0 {
		t.Fatal("completed reassignment still listed")
	}
}

// A reorder, the same list, or a target already in sync completes at once.
func TestReassignImmediate(t *testing.T) {
	m, _ := newReassignMachine(t)
	m.mustReassign(target(3, 1, 2))
	checkPart(t, m.part("a", 0), []int32{3, 1, 2}, []int32{1, 2, 3}, nil, nil, 1)
	m.mustReassign(target(3, 1, 2))
	checkPart(t, m.part("a", 0), []int32{3, 1, 2}, []int32{1, 2, 3}, nil, nil, 1)
	// Shrinking to in-sync replicas without the leader: leadership moves
	// to the first target replica, in a new leader epoch.
	le := m.part("a", 0).LeaderEpoch
	m.mustReassign(target(2, 3))
	p := m.part("a", 0)
	checkPart(t, p, []int32{2, 3}, []int32{2, 3}, nil, nil, 2)
	if p.LeaderEpoch != le+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, le+1)
	}
}

// Moving the leader away: once the new replica is in sync, the first
// target replica in the ISR leads.
func TestReassignMovesLeader(t *testing.T) {
	m, tid := newReassignMachine(t)
	m.mustReassign(target(4, 2, 3))
	checkPart(t, m.part("a", 0), []int32{4, 2, 3, 1}, []int32{1, 2, 3}, []int32{4}, []int32{1}, 1)
	le := m.part("a", 0).LeaderEpoch
	m.alterISR(tid, 1, 2, 3, 4)
	p := m.part("a", 0)
	checkPart(t, p, []int32{4, 2, 3}, []int32{2, 3, 4}, nil, nil, 4)
	if p.LeaderEpoch != le+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, le+1)
	}
}

// With no eligible leader in the new ISR the reassignment waits, and the
// unfence that makes one eligible completes it.
func TestReassignWaitsForEligibleLeader(t *testing.T) {
	m, _ := newReassignMachine(t)
	// Build the state directly: adding replica 4 in the ISR but fenced
	// (fencing takes a broker out of every ISR it is not the last of, so
	// commands alone cannot reach it).
	tx := m.img.begin(m.img.Index() + 1)
	p := m.part("a", 0).clone()
	startReassignment(&p, []int32{4})
	p.ISR = []int32{1, 4}
	b4 := *tx.im.brokers[4]
	b4.Fenced = true
	tx.putBroker(&b4)
	if tx.maybeComplete(&p) {
		t.Fatalf("completed without an eligible leader: %+v", p)
	}
	b4.Fenced = false
	tx.putBroker(&b4)
	if !tx.maybeComplete(&p) {
		t.Fatalf("did not complete once 4 is unfenced: %+v", p)
	}
	checkPart(t, p, []int32{4}, []int32{4}, nil, nil, 4)
}

// Cancel drops the adding replicas from replicas and ISR; an adding
// replica that leads gives leadership back.
func TestReassignCancel(t *testing.T) {
	m, tid := newReassignMachine(t)
	if errs := m.reassign(cancelA); !errors.Is(errs[0], ErrNoReassignment) {
		t.Fatalf("cancel with none: %v", errs)
	}
	m.mustReassign(target(1, 2, 4))
	m.mustReassign(cancelA)
	checkPart(t, m.part("a", 0), []int32{1, 2, 3}, []int32{1, 2, 3}, nil, nil, 1)

	m.mustReassign(target(4, 5, 1))
	m.alterISR(tid, 1, 2, 3, 4) // 5 still missing
	checkPart(t, m.part("a", 0), []int32{4, 5, 1, 2, 3}, []int32{1, 2, 3, 4}, []int32{4, 5}, []int32{2, 3}, 1)
	m.ok(Command{ElectLeader: &ElectLeader{Topic: "a", Preferred: true}})
	le := m.part("a", 0).LeaderEpoch
	m.mustReassign(cancelA)
	p := m.part("a", 0)
	checkPart(t, p, []int32{1, 2, 3}, []int32{1, 2, 3}, nil, nil, 1)
	if p.LeaderEpoch != le+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, le+1)
	}
}

// A new target while one is in progress starts from the whole current
// replica set (KRaft), so replicas already added but not named leave.
func TestReassignReplaceOngoing(t *testing.T) {
	m, tid := newReassignMachine(t)
	m.mustReassign(target(1, 2, 4))
	m.mustReassign(target(1, 2, 5))
	checkPart(t, m.part("a", 0), []int32{1, 2, 5, 4, 3}, []int32{1, 2, 3}, []int32{5}, []int32{4, 3}, 1)
	m.alterISR(tid, 1, 2, 3, 5)
	checkPart(t, m.part("a", 0), []int32{1, 2, 5}, []int32{1, 2, 5}, nil, nil, 1)
}

// Fencing the leader mid-move keeps the invariants; the new leader's ISR
// change then completes the move.
func TestReassignFenceDuring(t *testing.T) {
	m, tid := newReassignMachine(t)
	m.mustReassign(target(1, 2, 4))
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: m.img.brokers[1].Epoch}})
	checkPart(t, m.part("a", 0), []int32{1, 2, 4, 3}, []int32{2, 3}, []int32{4}, []int32{3}, 2)
	m.alterISR(tid, 2, 3, 4)
	checkPart(t, m.part("a", 0), []int32{1, 2, 4}, []int32{2, 4}, nil, nil, 2)
}

func TestReassignRefusals(t *testing.T) {
	m, _ := newReassignMachine(t)
	m.ok(Command{FenceBroker: &FenceBroker{ID: 5, Epoch: m.img.brokers[5].Epoch}})
	before := m.part("a", 0)
	errs := m.reassign(
		ReassignmentItem{Topic: "nope", Replicas: []int32{1}},
		ReassignmentItem{Topic: "a", Partition: 1, Replicas: []int32{1}},
		ReassignmentItem{Topic: "a", Replicas: []int32{}},
		target(1, 2, 2),
		target(1, 2, 9),
		target(1, 2, 5),
		target(1, 2, 4), // valid: applies despite the others
	)
	want := []error{ErrUnknownTopic, ErrUnknownTopic, ErrInvalidAssignment, ErrInvalidAssignment, ErrInvalidAssignment, ErrInvalidAssignment, nil}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Fatalf("item %d: got %v, want %v", i, errs[i], w)
		}
	}
	if p := m.part("a", 0); p.PartitionEpoch != before.PartitionEpoch+1 || !p.Reassigning() {
		t.Fatalf("valid item not applied once: %+v", p)
	}
}

// Snapshots keep a reassignment in progress, and Equal sees it.
func TestReassignSnapshotRoundTrip(t *testing.T) {
	m, _ := newReassignMachine(t)
	m.mustReassign(target(1, 2, 4))
	var buf bytes.Buffer
	if err := m.img.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(&buf)
	if err != nil || !back.Equal(m.img) {
		t.Fatalf("round trip: %v", err)
	}
	if p, _ := back.Partition("a", 0); !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{3}) {
		t.Fatalf("restored %+v", p)
	}
	m.mustReassign(cancelA)
	if withIndex(back, m.img.Index()).Equal(m.img) {
		t.Fatal("Equal ignores the reassignment state")
	}
}

// Entries and snapshots written before reassignment existed still decode,
// with no reassignment in progress.
func TestReassignOldEncodings(t *testing.T) {
	old := append([]byte{commandVersion}, `{"AlterPartition":{"BrokerID":1,"BrokerEpoch":2,"TopicID":"00000000000000000000000000000001","Partition":0,"LeaderEpoch":0,"PartitionEpoch":0,"NewISR":[1]}}`...)
	c, err := DecodeCommand(old)
	if err != nil || c.AlterPartition == nil {
		t.Fatalf("old command: %v", err)
	}
	snap := `{"Version":1,"Index":5,"ClusterID":"c1","Topics":[{"ID":"00000000000000000000000000000001","Name":"a","Configs":{},"Partitions":[{"Replicas":[1,2],"ISR":[1,2],"Leader":1,"LeaderEpoch":0,"PartitionEpoch":0}]}]}`
	im, err := DecodeImage(bytes.NewReader([]byte(snap)))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := im.Partition("a", 0); p.Reassigning() || len(im.Reassignments()) != 0 {
		t.Fatalf("old snapshot reads as reassigning: %+v", p)
	}
}

// The replication factor of a topic in reassignment is its target's, not
// the wider replica set's (CreatePartitions checks manual assignments
// against it).
func TestReassignKeepsReplicationFactor(t *testing.T) {
	m, _ := newReassignMachine(t)
	m.mustReassign(target(1, 2, 4))
	m.ok(Command{CreatePartitions: &CreatePartitions{Name: "a", Total: 2, Assignment: [][]int32{{2, 3, 4}}}})
	m.reject(Command{CreatePartitions: &CreatePartitions{Name: "a", Total: 3, Assignment: [][]int32{{2, 3, 4, 1}}}}, ErrInvalidAssignment)
	// Deleting a topic in reassignment drops it with everything else.
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "a"}})
	if len(m.img.Reassignments()) != 0 {
		t.Fatal("deleted topic still listed")
	}
}
