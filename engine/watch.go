package engine

import (
	"sync"
	"sync/atomic"
)

// Waker is one reader's wake-up for the partitions it watches (Watch): a
// change of any of them wakes it once, whatever their number, so a
// long-poll fetch needs one channel and no goroutine per partition.
// Wake-ups coalesce: several changes before the reader receives leave one
// token. A Waker may be reused once it is unwatched everywhere.
type Waker struct{ c chan struct{} }

// NewWaker returns a Waker with no token.
func NewWaker() *Waker { return &Waker{c: make(chan struct{}, 1)} }

// C receives once after one or more changes since the last receive.
func (w *Waker) C() <-chan struct{} { return w.c }

// Drain drops a pending token (before reuse).
func (w *Waker) Drain() {
	select {
	case <-w.c:
	default:
	}
}

func (w *Waker) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// watchers are the Wakers registered with one partition. Their own lock
// (taken inside the partition lock by notify, alone by Watch/Unwatch)
// keeps registration off the partition lock that appends hold.
type watchers struct {
	// version counts notify calls (made under the partition lock).
	version atomic.Uint64
	mu      sync.Mutex
	set     map[*Waker]struct{}
	n       atomic.Int32 // len(set), read without mu by notify
}

// Version counts the partition's changes: appends made readable, high
// watermark, log start and durable-end moves (everything that closes
// Changed). A reader takes it before reading and hands it to Watch.
func (p *Partition) Version() uint64 { return p.watch.version.Load() }

// Watch registers w: every later change of p wakes it, and if p changed
// since seen (a Version taken before the caller's read) it is woken at
// once, so a change between the read and the registration is not lost.
// Registering the same Waker twice is one registration. Each Watch is
// undone by Unwatch.
func (p *Partition) Watch(w *Waker, seen uint64) {
	ws := &p.watch
	ws.mu.Lock()
	if ws.set == nil {
		ws.set = make(map[*Waker]struct{})
	}
	if _, ok := ws.set[w]; !ok {
		ws.set[w] = struct{}{}
		ws.n.Add(1)
	}
	ws.mu.Unlock()
	// Registered before the version is loaded: a change that the load
	// misses comes later and finds w in the set (notify bumps the version
	// before it looks at the set).
	if ws.version.Load() != seen {
		w.wake()
	}
}

// Unwatch removes w; no wake-up from p reaches it afterwards.
func (p *Partition) Unwatch(w *Waker) {
	ws := &p.watch
	ws.mu.Lock()
	if _, ok := ws.set[w]; ok {
		delete(ws.set, w)
		ws.n.Add(-1)
	}
	ws.mu.Unlock()
}

// Watchers returns how many Wakers are registered (for tests and
// metrics: long polls waiting on p).
func (p *Partition) Watchers() int { return int(p.watch.n.Load()) }

// wakeWatchers bumps the version and wakes every registered Waker.
func (ws *watchers) wakeWatchers() {
	ws.version.Add(1)
	if ws.n.Load() == 0 {
		return
	}
	ws.mu.Lock()
	for w := range ws.set {
		w.wake()
	}
	ws.mu.Unlock()
}
