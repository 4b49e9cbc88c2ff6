package share

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func newTestManager(t *testing.T, p Persister) *Manager {
	t.Helper()
	m, err := NewManager(DefaultConfig(), p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var tp0 = TP{TopicID: [16]byte{1}, Partition: 0}

func TestSessionEpochs(t *testing.T) {
	m := newTestManager(t, nil)
	req := SessionRequest{Group: "g", Member: "m", Epoch: 1}
	if _, err := m.Session(req, t0); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("epoch 1 without a session: %v", err)
	}
	req.Epoch, req.Add = 0, []TP{tp0}
	res, err := m.Session(req, t0)
	if err != nil || !slices.Equal(res.Partitions, []TP{tp0}) {
		t.Fatalf("open: %v %v", res, err)
	}
	req.Epoch, req.Add = 2, nil
	if _, err := m.Session(req, t0); !errors.Is(err, ErrInvalidSessionEpoch) {
		t.Fatalf("skipped epoch: %v", err)
	}
	req.Epoch = 1
	if res, err = m.Session(req, t0); err != nil || !slices.Equal(res.Partitions, []TP{tp0}) {
		t.Fatalf("epoch 1: %v %v", res, err)
	}
	req.Epoch = FinalEpoch
	if res, err = m.Session(req, t0); err != nil || !res.Final {
		t.Fatalf("final: %v %v", res, err)
	}
	m.CloseSession("g", "m", res.Partitions)
	if m.Sessions() != 0 {
		t.Fatalf("%d sessions after close", m.Sessions())
	}
}

// fetch is what netpath does for one partition of a ShareFetch, over a
// log of n one-record batches.
func fetch(t *testing.T, m *Manager, member string, n int64, maxRecords int, now time.Time) []Lease {
	t.Helper()
	k := Key{"g", tp0.TopicID, tp0.Partition}
	off, lim, ok := m.NextOffset(k, Bounds{LogStart: 0, HighWatermark: n, LastStable: n})
	if !ok {
		return nil
	}
	return m.Acquire(k, member, batches(off, lim, 1), maxRecords, lim, now)
}

func TestManagerSessionCloseReleases(t *testing.T) {
	m := newTestManager(t, nil)
	m.SetGroupConfigs(func(string) map[string]string { return map[string]string{KeyAutoOffsetReset: "earliest"} })
	if _, err := m.Session(SessionRequest{Group: "g", Member: "a", Add: []TP{tp0}}, t0); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, m, "a", 10, 10, t0); !slices.Equal(got, []Lease{{0, 9, 1}}) {
		t.Fatalf("got %v", got)
	}
	changed := m.Changed()
	k := Key{"g", tp0.TopicID, 0}
	if err := m.Acknowledge(k, "a", []Ack{{0, 4, []AckType{AckAccept}}}, t0); err != nil {
		t.Fatal(err)
	}
	res, _ := m.Session(SessionRequest{Group: "g", Member: "a", Epoch: FinalEpoch}, t0)
	m.CloseSession("g", "a", res.Partitions)
	select {
	case <-changed:
	default:
		t.Fatal("closing the session did not signal a change")
	}
	if got := fetch(t, m, "b", 10, 10, t0); !slices.Equal(got, []Lease{{5, 9, 2}}) {
		t.Fatalf("after close %v", got)
	}
}

func TestManagerTickExpiresAndIdleSessions(t *testing.T) {
	m := newTestManager(t, nil)
	m.SetGroupConfigs(func(string) map[string]string {
		return map[string]string{KeyAutoOffsetReset: "earliest", KeyRecordLockDuration: "2000"}
	})
	if _, err := m.Session(SessionRequest{Group: "g", Member: "a", Add: []TP{tp0}}, t0); err != nil {
		t.Fatal(err)
	}
	fetch(t, m, "a", 3, 10, t0)
	m.Tick(t0.Add(1999 * time.Millisecond))
	if got := fetch(t, m, "b", 3, 10, t0); got != nil {
		t.Fatalf("acquired while locked: %v", got)
	}
	m.Tick(t0.Add(2 * time.Second))
	if got := fetch(t, m, "b", 3, 10, t0.Add(2*time.Second)); !slices.Equal(got, []Lease{{0, 2, 2}}) {
		t.Fatalf("after expiry %v", got)
	}
	m.Tick(t0.Add(DefaultConfig().SessionIdle))
	if m.Sessions() != 0 {
		t.Fatal("idle session kept")
	}
}

func TestManagerLatestAndOffsets(t *testing.T) {
	p := NewMemoryPersister()
	m := newTestManager(t, p)
	// Default share.auto.offset.reset is latest: records already in the
	// log are not delivered.
	if got := fetch(t, m, "a", 10, 10, t0); got != nil {
		t.Fatalf("latest delivered old records: %v", got)
	}
	if got := fetch(t, m, "a", 12, 10, t0); !slices.Equal(got, []Lease{{10, 11, 1}}) {
		t.Fatalf("new records %v", got)
	}
	k := Key{"g", tp0.TopicID, 0}
	m.SetOffset(k, 3)
	if po, ok := m.Offset(k); !ok || po.Start != 3 {
		t.Fatalf("offset %v %v", po, ok)
	}
	if offs := m.Offsets("g", nil); len(offs) != 1 || offs[0].Start != 3 {
		t.Fatalf("offsets %v", offs)
	}
	// The state is written through the Persister and comes back from it.
	m2 := newTestManager(t, p)
	if po, ok := m2.Offset(k); !ok || po.Start != 3 {
		t.Fatalf("restored offset %v %v", po, ok)
	}
	m.Delete("g", nil)
	if _, ok := m.Offset(k); ok || len(p.Keys()) != 0 {
		t.Fatal("state kept after delete")
	}
}

func TestGroupConfigParse(t *testing.T) {
	c := DefaultConfig()
	gc, err := c.ParseGroupConfig(map[string]string{KeyRecordLockDuration: "15000", KeyIsolationLevel: "read_uncommitted"})
	if err != nil || gc.RecordLockDuration != 15*time.Second || !gc.ReadUncommitted || gc.Earliest {
		t.Fatalf("%+v %v", gc, err)
	}
	for _, kv := range []map[string]string{{KeyAutoOffsetReset: "middle"}, {KeyRecordLockDuration: "5"}, {"share.nope": "1"}} {
		if _, err := c.ParseGroupConfig(kv); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v", kv, err)
		}
	}
}
