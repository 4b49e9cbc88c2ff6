package share

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

const (
	lock  = 30 * time.Second
	locks = 2000
	limit = 5
)

// batches returns deliverable spans of size n covering [from, to).
func batches(from, to, n int64) []Span {
	var out []Span
	for o := from; o < to; o += n {
		out = append(out, Span{First: o, Last: min(o+n, to) - 1, Deliverable: true})
	}
	return out
}

func acquire(t *testing.T, p *Partition, member string, hw int64, maxRecords int, now time.Time) []Lease {
	t.Helper()
	off, ok := p.NextOffset(hw, locks)
	if !ok {
		return nil
	}
	return p.Acquire(member, batches(off, hw, 1), maxRecords, hw, locks, lock, now)
}

func ack(t *testing.T, p *Partition, member string, first, last int64, typ AckType, now time.Time) {
	t.Helper()
	if err := p.Acknowledge(member, []Ack{{First: first, Last: last, Types: []AckType{typ}}}, limit, lock, now); err != nil {
		t.Fatalf("ack %d-%d %d: %v", first, last, typ, err)
	}
}

func TestAcquireAcceptAdvances(t *testing.T) {
	p := NewPartition(0)
	got := acquire(t, p, "a", 10, 4, t0)
	if want := []Lease{{0, 3, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	// A second consumer gets the next records, not the same ones.
	if got, want := acquire(t, p, "b", 10, 4, t0), []Lease{{4, 7, 1}}; !slices.Equal(got, want) {
		t.Fatalf("second acquire %v, want %v", got, want)
	}
	ack(t, p, "b", 4, 7, AckAccept, t0)
	if p.Start() != 0 {
		t.Fatalf("start %d moved past records a still holds", p.Start())
	}
	ack(t, p, "a", 0, 3, AckAccept, t0)
	if p.Start() != 8 || p.End() != 8 {
		t.Fatalf("start %d end %d, want 8 8", p.Start(), p.End())
	}
	// Acknowledging again, or someone else's records, is refused.
	if err := p.Acknowledge("a", []Ack{{0, 0, []AckType{AckAccept}}}, limit, lock, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("double ack: %v", err)
	}
	acquire(t, p, "a", 10, 10, t0)
	if err := p.Acknowledge("b", []Ack{{8, 9, []AckType{AckAccept}}}, limit, lock, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("ack of another member's records: %v", err)
	}
}

func TestReleaseRedeliversWithCount(t *testing.T) {
	p := NewPartition(0)
	acquire(t, p, "a", 3, 10, t0)
	ack(t, p, "a", 0, 0, AckAccept, t0)
	ack(t, p, "a", 1, 1, AckRelease, t0)
	ack(t, p, "a", 2, 2, AckAccept, t0)
	if st, n := p.State(1); st != Available || n != 1 {
		t.Fatalf("released record: %s count %d", st, n)
	}
	got := acquire(t, p, "b", 3, 10, t0)
	if want := []Lease{{1, 1, 2}}; !slices.Equal(got, want) {
		t.Fatalf("redelivery %v, want %v", got, want)
	}
	ack(t, p, "b", 1, 1, AckAccept, t0)
	if p.Start() != 3 {
		t.Fatalf("start %d, want 3", p.Start())
	}
	if c := p.Counters(); c.Delivered != 4 || c.Redelivered != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestRejectArchives(t *testing.T) {
	p := NewPartition(0)
	acquire(t, p, "a", 2, 10, t0)
	if err := p.Acknowledge("a", []Ack{{0, 1, []AckType{AckReject, AckAccept}}}, limit, lock, t0); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 2 {
		t.Fatalf("start %d, want 2", p.Start())
	}
	if st, _ := p.State(0); st != Acknowledged { // below the start
		t.Fatalf("state %s", st)
	}
	if got := acquire(t, p, "a", 2, 10, t0); got != nil {
		t.Fatalf("a rejected record was delivered again: %v", got)
	}
	if c := p.Counters(); c.Archived != 1 {
		t.Fatalf("archived %d, want 1", c.Archived)
	}
}

func TestLockExpiryRedelivers(t *testing.T) {
	p := NewPartition(0)
	acquire(t, p, "a", 5, 10, t0)
	if p.Tick(t0.Add(lock-time.Millisecond), limit) {
		t.Fatal("lock expired early")
	}
	if _, ok := p.NextOffset(5, locks); ok {
		t.Fatal("records acquirable while locked")
	}
	// A renew keeps offset 4 locked past the first deadline.
	ack(t, p, "a", 4, 4, AckRenew, t0.Add(10*time.Second))
	if !p.Tick(t0.Add(lock), limit) {
		t.Fatal("lock did not expire")
	}
	if st, n := p.State(0); st != Available || n != 1 {
		t.Fatalf("expired record: %s count %d", st, n)
	}
	if st, _ := p.State(4); st != Acquired {
		t.Fatalf("renewed record: %s", st)
	}
	// The old owner's late ack is refused; another consumer gets them.
	if err := p.Acknowledge("a", []Ack{{0, 0, []AckType{AckAccept}}}, limit, lock, t0.Add(lock)); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("late ack: %v", err)
	}
	if got, want := acquire(t, p, "b", 5, 10, t0.Add(lock)), []Lease{{0, 3, 2}}; !slices.Equal(got, want) {
		t.Fatalf("after expiry %v, want %v", got, want)
	}
	if !p.Tick(t0.Add(40*time.Second), limit) {
		t.Fatal("renewed lock did not expire")
	}
	if c := p.Counters(); c.LockTimeouts != 5 {
		t.Fatalf("lock timeouts %d, want 5", c.LockTimeouts)
	}
}

func TestDeliveryLimitArchives(t *testing.T) {
	p := NewPartition(0)
	now := t0
	for i := 1; i <= limit; i++ {
		got := acquire(t, p, "a", 1, 10, now)
		if want := []Lease{{0, 0, int16(i)}}; !slices.Equal(got, want) {
			t.Fatalf("delivery %d: %v, want %v", i, got, want)
		}
		if i%2 == 0 {
			ack(t, p, "a", 0, 0, AckRelease, now)
		} else {
			now = now.Add(lock)
			p.Tick(now, limit) // expiry counts as a delivery too
		}
	}
	if got := acquire(t, p, "a", 1, 10, now); got != nil {
		t.Fatalf("delivered beyond the limit: %v", got)
	}
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1 (archived)", p.Start())
	}
}

func TestWindowBoundedByMaxLocks(t *testing.T) {
	p := NewPartition(0)
	const small = 100
	got := p.Acquire("a", batches(0, 1000, 10), 1000, 1000, small, lock, t0)
	if want := []Lease{{0, small - 1, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if _, ok := p.NextOffset(1000, small); ok {
		t.Fatal("window full but NextOffset offered a read")
	}
	ack(t, p, "a", 0, 49, AckAccept, t0)
	if off, ok := p.NextOffset(1000, small); !ok || off != small {
		t.Fatalf("NextOffset %d %v, want %d", off, ok, small)
	}
}

func TestMaxRecordsSplitsBatches(t *testing.T) {
	p := NewPartition(0)
	got := p.Acquire("a", batches(0, 100, 30), 40, 100, locks, lock, t0)
	if want := []Lease{{0, 39, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	// The rest of the split batch goes to the next consumer.
	off, _ := p.NextOffset(100, locks)
	got = p.Acquire("b", batches(30, 100, 30), 40, 100, locks, lock, t0)
	if want := []Lease{{40, 79, 1}}; off != 40 || !slices.Equal(got, want) {
		t.Fatalf("next %d, acquired %v, want 40 %v", off, got, want)
	}
}

func TestGapsAndControlArchived(t *testing.T) {
	p := NewPartition(0)
	spans := []Span{
		{First: 0, Last: 1, Deliverable: true},
		// 2-4 compacted away
		{First: 5, Last: 5, Deliverable: false}, // a control batch
		{First: 6, Last: 7, Deliverable: true},
	}
	got := p.Acquire("a", spans, 100, 8, locks, lock, t0)
	if want := []Lease{{0, 1, 1}, {6, 7, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	ack(t, p, "a", 0, 1, AckAccept, t0)
	if p.Start() != 6 {
		t.Fatalf("start %d, want 6 (gap and control archived)", p.Start())
	}
	// The reader's limit: nothing at or above it.
	p2 := NewPartition(0)
	if got := p2.Acquire("a", batches(0, 10, 1), 100, 4, locks, lock, t0); !slices.Equal(got, []Lease{{0, 3, 1}}) {
		t.Fatalf("past the limit: %v", got)
	}
}

func TestTrimAndReset(t *testing.T) {
	p := NewPartition(0)
	acquire(t, p, "a", 10, 10, t0)
	p.Trim(4)
	if p.Start() != 4 || p.End() != 10 {
		t.Fatalf("after trim %d-%d", p.Start(), p.End())
	}
	p.Reset(20)
	if p.Start() != 20 || p.End() != 20 || p.InFlight(Acquired) != 0 {
		t.Fatalf("after reset %d-%d", p.Start(), p.End())
	}
}

func TestAcknowledgeValidation(t *testing.T) {
	p := NewPartition(0)
	acquire(t, p, "a", 10, 10, t0)
	for _, acks := range [][]Ack{
		{{First: 3, Last: 2, Types: []AckType{AckAccept}}},
		{{First: 0, Last: 1, Types: []AckType{AckAccept}}, {First: 1, Last: 2, Types: []AckType{AckAccept}}},
		{{First: 0, Last: 2, Types: []AckType{AckAccept, AckAccept}}},
		{{First: 0, Last: 0, Types: []AckType{9}}},
	} {
		if err := p.Acknowledge("a", acks, limit, lock, t0); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%v: %v, want invalid request", acks, err)
		}
	}
	// One bad offset rejects the whole request.
	err := p.Acknowledge("a", []Ack{{0, 1, []AckType{AckAccept}}, {11, 11, []AckType{AckAccept}}}, limit, lock, t0)
	if !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("%v", err)
	}
	if st, _ := p.State(0); st != Acquired {
		t.Fatalf("partly applied: %s", st)
	}
}

func TestSnapshotRestore(t *testing.T) {
	p := NewPartition(10)
	acquire(t, p, "a", 20, 10, t0)
	ack(t, p, "a", 10, 10, AckRelease, t0)
	ack(t, p, "a", 12, 13, AckAccept, t0)
	ack(t, p, "a", 14, 14, AckReject, t0)
	s := p.Snapshot()
	q := Restore(s)
	if q.Start() != 10 {
		t.Fatalf("restored start %d", q.Start())
	}
	for o := int64(10); o < 20; o++ {
		st, n := q.State(o)
		wst, wn := p.State(o)
		if wst == Acquired {
			wst = Available // locks do not survive
		}
		if st != wst || n != wn {
			t.Errorf("offset %d: restored %s/%d, want %s/%d", o, st, n, wst, wn)
		}
	}
	// Everything not finished is delivered again, with its count.
	got := acquire(t, q, "b", 20, 100, t0)
	if want := []Lease{{10, 11, 2}, {15, 19, 2}}; !slices.Equal(got, want) {
		t.Fatalf("after restore %v, want %v", got, want)
	}
}

func TestReleaseMember(t *testing.T) {
	p := NewPartition(0)
	acquire(t, p, "a", 2, 1, t0)
	acquire(t, p, "b", 2, 1, t0)
	if !p.ReleaseMember("a", limit) {
		t.Fatal("nothing released")
	}
	if st, _ := p.State(0); st != Available {
		t.Fatalf("a's record %s", st)
	}
	if st, _ := p.State(1); st != Acquired {
		t.Fatalf("b's record %s", st)
	}
}
