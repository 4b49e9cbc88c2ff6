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
// the durable end alone, and a Watch with a DataVersion taken before
// either does not wake it at once; a WakeOnDurable one (the leader's
// watch of its own appends) wakes for the durable end but neither for the
// HW nor for bytes readable before they are durable; a plain Waker wakes
// for all; an append wakes every one.
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
	woken := func(w *Waker) bool {
		select {
		case <-w.C():
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}
	check := func(what string, wantData, wantDurable, wantAll bool) {
		t.Helper()
		for _, c := range []struct {
			name string
			w    *Waker
			want bool
		}{{"WakeOnData", data, wantData}, {"WakeOnDurable", durable, wantDurable}, {"WakeOnAll", all, wantAll}} {
			if got := woken(c.w); got != c.want {
				t.Errorf("%s: %s Waker woken %v, want %v", what, c.name, got, c.want)
			}
		}
	}
	seenData, seenAll := p.DataVersion(), p.Version()
	p.SetHighWatermark(1) // after the reads, before Watch
	p.Watch(data, seenData)
	p.Watch(durable, seenData)
	p.Watch(all, seenAll)
	check("HW moved before Watch", false, false, true)
	p.SetHighWatermark(2)
	check("SetHighWatermark", false, false, true)
	p.mu.Lock()
	p.notifyChange(changeDurable)
	p.mu.Unlock()
	check("the durable end alone", false, true, true)
	p.mu.Lock()
	p.notifyChange(changeReadable)
	p.mu.Unlock()
	check("bytes readable, not durable yet", true, false, true)
	appendWait(t, p, batchOf(0, 1))
	check("an append", true, true, true)
	for _, w := range []*Waker{data, durable, all} {
		p.Unwatch(w)
	}
}
