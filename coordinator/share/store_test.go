package share

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

func TestRecordRoundTrip(t *testing.T) {
	k := Key{Group: "grüppe", TopicID: [16]byte{9, 8, 7}, Partition: 42}
	s := Snapshot{Epoch: 3, StartOffset: 100, Batches: []StateBatch{{100, 104, Acknowledged, 1}, {105, 105, Available, 2}, {106, 110, Archived, 5}}}
	gk, err := DecodeKey(EncodeKey(k))
	if err != nil || gk != k {
		t.Fatalf("key %v %v", gk, err)
	}
	gs, err := DecodeSnapshot(EncodeSnapshot(s))
	if err != nil || !reflect.DeepEqual(gs, s) {
		t.Fatalf("snapshot %+v %v", gs, err)
	}
	if _, err := DecodeSnapshot(EncodeSnapshot(s)[:20]); err == nil {
		t.Fatal("truncated value decoded")
	}
	// With a leader epoch the value is version 1; without one, version
	// 0 (what brokers from before leader epochs read and wrote).
	for _, le := range []int32{-1, 0, 7} {
		s.LeaderEpoch = le
		b := EncodeSnapshot(s)
		want := 1
		if le < 0 {
			want = 0
		}
		if v := int(b[0])<<8 | int(b[1]); v != want {
			t.Errorf("leader epoch %d: version %d, want %d", le, v, want)
		}
		if gs, err := DecodeSnapshot(b); err != nil || !reflect.DeepEqual(gs, s) {
			t.Fatalf("leader epoch %d: snapshot %+v %v", le, gs, err)
		}
	}
}

// A deposed partition leader that does not know it yet (it still holds
// the state and answers its consumers) must not overwrite the state the
// new leader took over: once the new leader has read it at a newer
// leader epoch, the old leader's writes and reads are fenced, the
// acknowledgement it took fails, and the store keeps the new leader's
// state. The fence survives the store moving (it is in the records) and
// an admin reset (a write without a leader epoch).
func TestLeaderEpochFence(t *testing.T) {
	l := &memLog{}
	st := l.load(t)
	k := Key{"g", tp0.TopicID, 0}
	earliest := func(string) map[string]string { return map[string]string{KeyAutoOffsetReset: "earliest"} }
	old, cur := newTestManager(t, st), newTestManager(t, st)
	old.SetGroupConfigs(earliest)
	cur.SetGroupConfigs(earliest)

	old.Lead(tp0, 1)
	if got := fetch(t, old, "a", 10, 4, t0); !slices.Equal(got, []Lease{{0, 3, 1}}) {
		t.Fatalf("old leader's leases %v", got)
	}
	if err := old.Acknowledge(k, "a", []Ack{{0, 1, []AckType{AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	// The new leader takes over at epoch 2: 2-3 come back (the old
	// leader's locks do not survive), and it accepts them.
	cur.Lead(tp0, 2)
	if got := fetch(t, cur, "b", 10, 10, t0); !slices.Equal(got, []Lease{{2, 3, 2}, {4, 9, 1}}) {
		t.Fatalf("new leader's leases %v", got)
	}
	if err := cur.Acknowledge(k, "b", []Ack{{2, 3, []AckType{AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	want, _, _ := st.Read(k, -1)
	// The old leader still holds 2-3 for "a" and takes an accept of
	// them: refused, and what it had is dropped.
	if err := old.Acknowledge(k, "a", []Ack{{2, 3, []AckType{AckAccept}}}, t0); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("deposed leader's acknowledgement: %v, want ErrFencedLeaderEpoch", err)
	}
	if got, _, _ := st.Read(k, -1); !reflect.DeepEqual(got, want) {
		t.Fatalf("deposed leader changed the state: %+v, want %+v", got, want)
	}
	if got := fetch(t, old, "a", 10, 10, t0); got != nil {
		t.Fatalf("deposed leader acquired %v", got)
	}
	if _, _, err := st.Read(k, 1); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("deposed leader's read: %v", err)
	}
	// An admin reset keeps the fence.
	if err := cur.SetOffset(k, 10); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(k, Snapshot{Epoch: 1, LeaderEpoch: 1, StartOffset: 3}); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("deposed leader's write after a reset: %v", err)
	}
	// So does a store on another broker that loads the records.
	st2 := l.load(t)
	if err := st2.Write(k, Snapshot{Epoch: 1, LeaderEpoch: 1, StartOffset: 3}); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("deposed leader's write to a reloaded store: %v", err)
	}
	if err := st2.Write(k, Snapshot{Epoch: 1, LeaderEpoch: 2, StartOffset: 11}); err != nil {
		t.Fatalf("current leader's write: %v", err)
	}
	// The in-memory persister fences alike.
	p := NewMemoryPersister()
	if err := p.Write(k, Snapshot{LeaderEpoch: 3, StartOffset: 5}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Read(k, 4); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(k, Snapshot{LeaderEpoch: 3, StartOffset: 6}); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("memory persister: write of a leader older than the last read: %v", err)
	}
}

// memLog is a partition log for a Store: appends land in recs.
type memLog struct {
	recs []statelog.KV
	fail error
}

func (l *memLog) append(_ int32, kvs []statelog.KV) statelog.Waiter {
	if l.fail != nil {
		err := l.fail
		return statelog.WaiterFunc(func() error { return err })
	}
	l.recs = append(l.recs, kvs...)
	return statelog.Done
}

func (l *memLog) all() func(func(statelog.KV, error) bool) {
	return func(yield func(statelog.KV, error) bool) {
		for _, kv := range l.recs {
			if !yield(kv, nil) {
				return
			}
		}
	}
}

// load returns a Store (of one partition) that loaded the log, as a
// broker taking the partition over does.
func (l *memLog) load(t *testing.T) *Store {
	t.Helper()
	st := NewStore(1, l.append)
	st.BeginLoad(0)
	snaps, err := Load(l.all())
	if err != nil {
		t.Fatal(err)
	}
	st.FinishLoad(0, snaps)
	return st
}

// A Store answers only for loaded partitions, fences older epochs, and
// what it wrote loads back on another broker taking the partition over.
func TestStoreLoadWriteFence(t *testing.T) {
	l := &memLog{}
	st := NewStore(1, l.append)
	k := Key{"g", tp0.TopicID, 0}
	if _, _, err := st.Read(k, -1); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("unowned read: %v", err)
	}
	st.BeginLoad(0)
	if err := st.Write(k, Snapshot{}); !errors.Is(err, ErrLoadInProgress) {
		t.Fatalf("write while loading: %v", err)
	}
	st.FinishLoad(0, map[Key]Snapshot{})
	m := newTestManager(t, st)
	m.SetGroupConfigs(func(string) map[string]string { return map[string]string{KeyAutoOffsetReset: "earliest"} })
	got := fetch(t, m, "a", 10, 4, t0)
	if !slices.Equal(got, []Lease{{0, 3, 1}}) {
		t.Fatalf("leases %v", got)
	}
	if err := m.Acknowledge(k, "a", []Ack{{0, 1, []AckType{AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	// Another broker loads the log: offsets 0-1 done, 2-3 available with
	// one delivery.
	st2 := l.load(t)
	m2 := newTestManager(t, st2)
	if got := fetch(t, m2, "b", 10, 10, t0); !slices.Equal(got, []Lease{{2, 3, 2}, {4, 9, 1}}) {
		t.Fatalf("after takeover %v", got)
	}
	// An admin reset there fences the first manager's next write, and
	// that manager reads the reset state back.
	if err := m2.SetOffset(k, 6); err != nil {
		t.Fatal(err)
	}
	if err := m.Acknowledge(k, "a", []Ack{{2, 3, []AckType{AckAccept}}}, t0); err != nil {
		t.Fatal(err) // st (the first store) has not seen the reset
	}
	// Keys lists the group's stored keys (a describe of all its
	// partitions without members to name them), not another group's.
	if got := st2.Keys("g"); !slices.Equal(got, []Key{k}) {
		t.Fatalf("Keys(g) = %v, want [%v]", got, k)
	}
	if got := st2.Keys("other"); len(got) != 0 {
		t.Fatalf("Keys(other) = %v", got)
	}
}

// A failed write loses nothing that was answered: the acknowledgement
// fails, and the state is read back from the store, the records
// acquired since the last good write available again.
func TestManagerWriteFailure(t *testing.T) {
	p := NewMemoryPersister()
	m := newTestManager(t, p)
	m.SetGroupConfigs(func(string) map[string]string { return map[string]string{KeyAutoOffsetReset: "earliest"} })
	k := Key{"g", tp0.TopicID, 0}
	if got := fetch(t, m, "a", 4, 4, t0); !slices.Equal(got, []Lease{{0, 3, 1}}) {
		t.Fatalf("leases %v", got)
	}
	p.Fail = errors.New("disk on fire")
	if err := m.Acknowledge(k, "a", []Ack{{0, 3, []AckType{AckAccept}}}, t0); !errors.Is(err, ErrStateUnavailable) {
		t.Fatalf("ack with a failing store: %v", err)
	}
	if got := fetch(t, m, "b", 4, 4, t0); got != nil {
		t.Fatalf("acquired while the store fails: %v", got)
	}
	p.Fail = nil
	if got := fetch(t, m, "b", 4, 4, t0); !slices.Equal(got, []Lease{{0, 3, 2}}) {
		t.Fatalf("after the failure %v", got)
	}
	// Fenced: a reset stored behind the manager's back.
	if err := p.Write(k, Snapshot{Epoch: 5, StartOffset: 4}); err != nil {
		t.Fatal(err)
	}
	if err := m.Acknowledge(k, "b", []Ack{{0, 3, []AckType{AckAccept}}}, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("fenced ack: %v", err)
	}
	if po, ok := m.Offset(k); !ok || po.Start != 4 {
		t.Fatalf("after fencing %v %v", po, ok)
	}
}
