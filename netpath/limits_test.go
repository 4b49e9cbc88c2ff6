package netpath

import (
	"testing"
	"time"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	done := make(chan struct{})
	if !b.acquire(60, done) || b.inUse() != 60 {
		t.Fatal("first acquire")
	}
	if b.acquire(101, done) {
		t.Fatal("more than the whole budget granted")
	}
	got := make(chan bool)
	go func() { got <- b.acquire(50, done) }()
	select {
	case <-got:
		t.Fatal("acquired 50 with 40 free")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(60)
	if !<-got || b.inUse() != 50 {
		t.Fatal("waiter not granted after release")
	}
	// A waiter gives up when its connection closes. 80 with 50 in use:
	// it waits (20 ms is ample for a grant that was coming to come).
	go func() { got <- b.acquire(80, done) }()
	select {
	case <-got:
		t.Fatal("acquired 80 with 50 free")
	case <-time.After(20 * time.Millisecond):
	}
	close(done)
	b.wake()
	if <-got {
		t.Fatal("closed waiter granted")
	}
	if b.inUse() != 50 {
		t.Fatalf("in use %d after a cancelled wait", b.inUse())
	}
}
