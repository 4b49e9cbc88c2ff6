package controller

import (
	"testing"
	"time"
)

func TestApplyLag(t *testing.T) {
	var l applyLag
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	// Caught up at once: the image is as fresh as the send time.
	l.ack(at(0), 10, 10)
	if !l.caughtUp.Equal(at(0)) || l.behind(10) != 0 {
		t.Fatalf("caught up %v, behind %d", l.caughtUp, l.behind(10))
	}
	// Applying stalls at 12 while the controller commits on: caughtUp
	// stays at the last heartbeat whose commit index was reached.
	l.ack(at(1), 12, 12)
	l.ack(at(2), 20, 12)
	l.ack(at(3), 25, 12)
	if !l.caughtUp.Equal(at(1)) || l.behind(12) != 8 {
		t.Fatalf("stalled: caught up %v, behind %d; want %v, 8", l.caughtUp, l.behind(12), at(1))
	}
	// Applying resumes past the first mark only.
	l.advance(21)
	if !l.caughtUp.Equal(at(2)) || l.behind(21) != 4 {
		t.Fatalf("partly caught up: %v, behind %d", l.caughtUp, l.behind(21))
	}
	l.advance(25)
	if !l.caughtUp.Equal(at(3)) || len(l.pending) != 0 {
		t.Fatalf("caught up: %v, %d marks left", l.caughtUp, len(l.pending))
	}
	// Marks are bounded; the oldest go first.
	for i := range 2 * maxLagMarks {
		l.ack(at(10+i), uint64(100+i), 0)
	}
	if len(l.pending) != maxLagMarks || l.pending[0].commit != uint64(100+maxLagMarks) {
		t.Fatalf("%d marks, oldest commit %d", len(l.pending), l.pending[0].commit)
	}
}
