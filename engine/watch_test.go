package engine

import (
	"fmt"
	"testing"
	"time"
)

// One Waker watches many partitions: an append to any of them wakes it,
// a change between the caller's Version and Watch wakes it at once, and
// after Unwatch nothing does.
func TestWakerWatchesManyPartitions(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	const n = 16
	e.CreateTopic("w", n, nil)
	parts := make([]*Partition, n)
	for i := range parts {
		parts[i] = mustPartition(t, e, "w", int32(i))
	}
	w := NewWaker()
	woken := func() bool {
		select {
		case <-w.C():
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	quiet := func(what string) {
		select {
		case <-w.C():
			t.Fatalf("woken %s", what)
		default:
		}
	}
	for _, p := range parts {
		p.Watch(w, p.Version())
	}
	quiet("before any change")
	for i, p := range parts {
		appendWait(t, p, batchOf(0, 1))
		if !woken() {
			t.Fatalf("append to partition %d did not wake", i)
		}
	}
	// Two changes before the receive leave one token.
	appendWait(t, parts[0], batchOf(0, 1))
	appendWait(t, parts[1], batchOf(0, 1))
	if !woken() {
		t.Fatal("no wake-up")
	}
	quiet("twice for coalesced changes")
	for _, p := range parts {
		p.Unwatch(w)
	}
	appendWait(t, parts[3], batchOf(0, 1))
	quiet("after Unwatch")
	// A change that lands after the caller's read but before Watch.
	seen := parts[5].Version()
	appendWait(t, parts[5], batchOf(0, 1))
	parts[5].Watch(w, seen)
	if !woken() {
		t.Fatal("a change before Watch was lost")
	}
	parts[5].Unwatch(w)
	if got := parts[5].watch.n.Load(); got != 0 {
		t.Fatalf("%d watchers left", got)
	}
}

// Appends race with Watch from many goroutines: every watcher that
// registered with a version from before an append is woken (-race).
func TestWakerRacingAppends(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	e.CreateTopic("r", 4, nil)
	var parts []*Partition
	for i := range 4 {
		parts = append(parts, mustPartition(t, e, "r", int32(i)))
	}
	for round := range 200 {
		p := parts[round%len(parts)]
		ws := make([]*Waker, 8)
		errs := make(chan error, len(ws))
		seen := p.Version()
		for i := range ws {
			ws[i] = NewWaker()
			go func(w *Waker) {
				for _, q := range parts {
					q.Watch(w, q.Version())
				}
				p.Watch(w, seen)
				select {
				case <-w.C():
					errs <- nil
				case <-time.After(5 * time.Second):
					errs <- fmt.Errorf("round %d: watcher not woken", round)
				}
				for _, q := range parts {
					q.Unwatch(w)
				}
			}(ws[i])
		}
		appendWait(t, p, batchOf(0, 1))
		for range ws {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A tagged Waker reports each changed partition once per Take, and only
// those that changed.
func TestTaggedWakerTake(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	const n = 8
	e.CreateTopic("tw", n, nil)
	parts := make([]*Partition, n)
	w := NewTaggedWaker()
	for i := range parts {
		parts[i] = mustPartition(t, e, "tw", int32(i))
		parts[i].Watch(w, parts[i].Version())
	}
	if got := w.Take(nil); len(got) != 0 {
		t.Fatalf("Take before any change: %d partitions", len(got))
	}
	appendWait(t, parts[2], batchOf(0, 1))
	appendWait(t, parts[5], batchOf(0, 1))
	appendWait(t, parts[2], batchOf(1, 1))
	select {
	case <-w.C():
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up")
	}
	got := w.Take(nil)
	if len(got) != 2 || !((got[0] == parts[2] && got[1] == parts[5]) || (got[0] == parts[5] && got[1] == parts[2])) {
		t.Fatalf("Take = %v, want partitions 2 and 5 once each", got)
	}
	if got := w.Take(nil); len(got) != 0 {
		t.Fatalf("second Take: %d partitions", len(got))
	}
	// A change before Watch is reported too.
	parts[7].Unwatch(w)
	seen := parts[7].Version()
	appendWait(t, parts[7], batchOf(0, 1))
	parts[7].Watch(w, seen)
	if got := w.Take(nil); len(got) != 1 || got[0] != parts[7] {
		t.Fatalf("Take after a change before Watch = %v", got)
	}
}

// Wakers choose what wakes them (SetWakeOn): a WakeOnData Waker (a
// replica's fetch) sleeps through SetHighWatermark and through a move of
// the durable end alone; a WakeOnDurable one (the leader's watch of its
// own appends) wakes for the durable end but neither for the HW nor for
// bytes readable before they are durable; a plain Waker wakes for all; an
// append wakes every one. A change a Waker wants that lands between its
// Seen and Watch wakes it at once, and one it does not want does not.
// Notify wakes synchronously, so a Waker not woken when the change
// returns never will be.
func TestWakerWakeOn(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	e.CreateTopic("hw", 1, nil)
	p := mustPartition(t, e, "hw", 0)
	p.SetReplicated(true)
	appendWait(t, p, batchOf(0, 1))
	appendWait(t, p, batchOf(0, 1))

	data, durable, all := NewWaker(), NewWaker(), NewWaker()
	data.SetWakeOn(WakeOnData)
	durable.SetWakeOn(WakeOnDurable)
	wakers := []*Waker{data, durable, all}
	names := []string{"WakeOnData", "WakeOnDurable", "WakeOnAll"}
	change := func(k change) {
		p.mu.Lock()
		p.notifyChange(k)
		p.mu.Unlock()
	}
	check := func(what string, want ...bool) {
		t.Helper()
		for i, w := range wakers {
			got := false
			select {
			case <-w.C():
				got = true
			default:
			}
			if got != want[i] {
				t.Errorf("%s: %s Waker woken %v, want %v", what, names[i], got, want[i])
			}
		}
	}
	register := func(between func()) {
		var seen []uint64
		for _, w := range wakers {
			seen = append(seen, w.Seen(p))
		}
		between()
		for i, w := range wakers {
			p.Watch(w, seen[i])
		}
	}

	register(func() { p.SetHighWatermark(1) })
	check("HW moved between Seen and Watch", false, false, true)
	p.SetHighWatermark(2)
	check("SetHighWatermark", false, false, true)
	change(changeDurable)
	check("the durable end alone", false, true, true)
	change(changeReadable)
	check("bytes readable, not durable yet", true, false, true)
	appendWait(t, p, batchOf(0, 1))
	check("an append", true, true, true)

	for _, w := range wakers {
		p.Unwatch(w)
	}
	register(func() { change(changeDurable) })
	check("the durable end moved between Seen and Watch", false, true, true)
	for _, w := range wakers {
		p.Unwatch(w)
	}
	register(func() { change(changeReadable) })
	check("bytes readable between Seen and Watch", true, false, true)
	for _, w := range wakers {
		p.Unwatch(w)
	}
}
