package txn

import (
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestParseStateNames(t *testing.T) {
	// Kafka's TransactionState names, each to its stored byte value.
	want := map[string]State{
		"Empty": Empty, "Ongoing": Ongoing, "PrepareCommit": PrepareCommit, "PrepareAbort": PrepareAbort,
		"CompleteCommit": CompleteCommit, "CompleteAbort": CompleteAbort, "Dead": Dead, "PrepareEpochFence": PrepareEpochFence,
	}
	for name, s := range want {
		got, ok := ParseState(name)
		if !ok || got != s || s.String() != name {
			t.Errorf("ParseState(%q) = %v,%v; String %q", name, got, ok, s.String())
		}
	}
	for _, bad := range []string{"", "ongoing", "ONGOING", "Foo", "State(9)"} {
		if _, ok := ParseState(bad); ok {
			t.Errorf("ParseState(%q) accepted", bad)
		}
	}
}

// ids returns the listed ids in order.
func ids(ls []Listing) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.TransactionalID)
	}
	return out
}

func TestListFilters(t *testing.T) {
	h := newHarness(t)
	pidA, epA := h.mustInit("a-ongoing")
	if err := h.add("a-ongoing", pidA, epA, tp("t", 0)); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(5 * time.Second)
	pidB, epB := h.mustInit("b-committed")
	if err := h.add("b-committed", pidB, epB, tp("t", 1)); err != nil {
		t.Fatal(err)
	}
	if err := h.end("b-committed", pidB, epB, true); err != nil {
		t.Fatal(err)
	}
	h.mk.complete(0, nil)
	h.waitState("b-committed", CompleteCommit)
	pidC, _ := h.mustInit("c-empty")
	// d-preparing stays in PrepareCommit: its markers are never answered.
	pidD, epD := h.mustInit("d-preparing")
	if err := h.add("d-preparing", pidD, epD, tp("t", 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.end("d-preparing", pidD, epD, true); err != nil {
		t.Fatal(err)
	}

	all := func(f ListFilter) []Listing {
		t.Helper()
		ls, err := h.m.List(f)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	none := ListFilter{MinDurationMs: -1}
	ls := all(none)
	if got := ids(ls); !slices.Equal(got, []string{"a-ongoing", "b-committed", "c-empty", "d-preparing"}) {
		t.Fatalf("all: %v", got)
	}
	if ls[0].ProducerID != pidA || ls[0].State != Ongoing || ls[1].State != CompleteCommit || ls[2].State != Empty || ls[2].ProducerID != pidC || ls[3].State != PrepareCommit {
		t.Fatalf("listing: %+v", ls)
	}
	cases := []struct {
		name string
		f    ListFilter
		want []string
	}{
		{"state", ListFilter{States: []State{Ongoing}, MinDurationMs: -1}, []string{"a-ongoing"}},
		{"states", ListFilter{States: []State{CompleteCommit, Empty}, MinDurationMs: -1}, []string{"b-committed", "c-empty"}},
		{"prepare", ListFilter{States: []State{PrepareCommit, PrepareAbort}, MinDurationMs: -1}, []string{"d-preparing"}},
		{"state none match", ListFilter{States: []State{PrepareAbort}, MinDurationMs: -1}, nil},
		{"producer", ListFilter{ProducerIDs: []int64{pidB}, MinDurationMs: -1}, []string{"b-committed"}},
		{"producer and state", ListFilter{ProducerIDs: []int64{pidB}, States: []State{Ongoing}, MinDurationMs: -1}, nil},
		// a-ongoing started 5 s ago; b-committed and d-preparing started
		// now (a completed transaction keeps its start time); c-empty has
		// no start (-1) and, as in Kafka, passes any duration filter.
		{"duration", ListFilter{MinDurationMs: 4000}, []string{"a-ongoing", "c-empty"}},
		{"duration too long", ListFilter{MinDurationMs: 5000, States: []State{Ongoing}}, nil},
		{"pattern", ListFilter{IDPattern: regexp.MustCompile("^[ab]-"), MinDurationMs: -1}, []string{"a-ongoing", "b-committed"}},
		{"all filters", ListFilter{IDPattern: regexp.MustCompile("ongoing"), States: []State{Ongoing}, ProducerIDs: []int64{pidA}, MinDurationMs: 1000}, []string{"a-ongoing"}},
		{"pattern unanchored", ListFilter{IDPattern: regexp.MustCompile("empty"), MinDurationMs: -1}, []string{"c-empty"}},
	}
	for _, c := range cases {
		if got := ids(all(c.f)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestListWhileLoading(t *testing.T) {
	h := newHarness(t)
	h.mustInit("x")
	h.m.BeginLoad(testParts) // a newly owned partition still loading
	if _, err := h.m.List(ListFilter{MinDurationMs: -1}); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("List while loading: %v", err)
	}
	h.m.FinishLoad(testParts, h.coordEp, nil)
	ls, err := h.m.List(ListFilter{MinDurationMs: -1})
	if err != nil || len(ls) != 1 {
		t.Fatalf("after load: %v %v", ls, err)
	}
	// Unloading the partition that holds x drops it from the listing.
	h.m.Unload(h.m.Partition("x"))
	if ls, err := h.m.List(ListFilter{MinDurationMs: -1}); err != nil || len(ls) != 0 {
		t.Fatalf("after unload: %v %v", ls, err)
	}
}
