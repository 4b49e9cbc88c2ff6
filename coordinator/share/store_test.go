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

// A Store answers only for loaded partitions, fences older epochs, and
// what it wrote loads back on another broker taking the partition over.
func TestStoreLoadWriteFence(t *testing.T) {
	l := &memLog{}
	st := NewStore(1, l.append)
	k := Key{"g", tp0.TopicID, 0}
	if _, _, err := st.Read(k); !errors.Is(err, ErrNotCoordinator) {
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
	st2 := NewStore(1, l.append)
	st2.BeginLoad(0)
	snaps, err := Load(l.all())
	if err != nil {
		t.Fatal(err)
	}
	st2.FinishLoad(0, snaps)
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
