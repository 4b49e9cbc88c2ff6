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
type Waker struct {
	c chan struct{}
	// tagged Wakers also remember which partitions changed (Take), for a
	// reader that acts per changed partition among many (the leader's
	// local-append watcher) without scanning all of them on each wake.
	tagged bool
	// wakeOn says which changes wake it (SetWakeOn).
	wakeOn  atomic.Uint32
	mu      sync.Mutex
	changed []*Partition
	marked  map[*Partition]struct{}
}

// NewWaker returns a Waker with no token.
func NewWaker() *Waker { return &Waker{c: make(chan struct{}, 1)} }

// NewTaggedWaker returns a Waker that also records the partitions that
// woke it, for Take.
func NewTaggedWaker() *Waker {
	return &Waker{c: make(chan struct{}, 1), tagged: true, marked: map[*Partition]struct{}{}}
}

// WakeOn selects the changes of a partition that wake a Waker.
type WakeOn uint32

const (
	// WakeOnAll: every change (consumers' long polls).
	WakeOnAll WakeOn = iota
	// WakeOnData: bytes made readable (durable or not yet), truncations,
	// log start moves; not a move of the high watermark or of the durable
	// end alone. A replica's fetch reads up to the log end: neither of
	// those gives it anything to send, and on a replicated partition each
	// happens once per acknowledged round.
	WakeOnData
	// WakeOnDurable: moves of the durable end, truncations, log start
	// moves; not the high watermark, nor bytes made readable before they
	// are durable (the leader's watch of its own appends: its durable end
	// is an input of the HW it then sets).
	WakeOnDurable
)

// SetWakeOn sets the changes that wake w (WakeOnAll by default). Set it
// while w is not registered.
func (w *Waker) SetWakeOn(m WakeOn) { w.wakeOn.Store(uint32(m)) }

// wants reports whether a change of kind k wakes w.
func (w *Waker) wants(k change) bool {
	switch WakeOn(w.wakeOn.Load()) {
	case WakeOnData:
		return k == changeData || k == changeReadable
	case WakeOnDurable:
		return k == changeData || k == changeDurable
	}
	return true
}

// change is the kind of a partition change (notifyChange).
type change uint8

const (
	changeData     change = iota // everything but the ones below
	changeHW                     // the high watermark alone moved
	changeDurable                // the durable end alone moved
	changeReadable               // bytes readable by followers, not durable yet
)

// Take appends to dst the partitions that changed since the last Take
// (each once) and forgets them. Only for NewTaggedWaker; a partition
// reported here was changed after the reader's previous Take, so the
// reader acting on each reported partition misses no change.
func (w *Waker) Take(dst []*Partition) []*Partition {
	w.mu.Lock()
	dst = append(dst, w.changed...)
	clear(w.changed)
	w.changed = w.changed[:0]
	clear(w.marked)
	w.mu.Unlock()
	return dst
}

func (w *Waker) wakeFor(p *Partition) {
	if w.tagged {
		w.mu.Lock()
		if _, ok := w.marked[p]; !ok {
			w.marked[p] = struct{}{}
			w.changed = append(w.changed, p)
		}
		w.mu.Unlock()
	}
	w.wake()
}

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
	// version counts notify calls (made under the partition lock);
	// dataVersion and durableVersion those that wake WakeOnData and
	// WakeOnDurable Wakers (Waker.Seen).
	version        atomic.Uint64
	dataVersion    atomic.Uint64
	durableVersion atomic.Uint64
	mu             sync.Mutex
	set            map[*Waker]struct{}
	n              atomic.Int32 // len(set), read without mu by notify
}

// Version counts the partition's changes: appends made readable, high
// watermark, log start and durable-end moves (everything that closes
// Changed). A reader takes it before reading and hands it to Watch.
func (p *Partition) Version() uint64 { return p.watch.version.Load() }

// Seen is Version counting only the changes that wake w (its WakeOn): what
// a reader that will Watch p with w takes before reading.
func (w *Waker) Seen(p *Partition) uint64 { return w.counter(&p.watch).Load() }

// counter is the change count of ws that w's WakeOn follows.
func (w *Waker) counter(ws *watchers) *atomic.Uint64 {
	switch WakeOn(w.wakeOn.Load()) {
	case WakeOnData:
		return &ws.dataVersion
	case WakeOnDurable:
		return &ws.durableVersion
	}
	return &ws.version
}

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
	if w.counter(ws).Load() != seen {
		w.wakeFor(p)
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

// wakeWatchers bumps the versions and wakes every registered Waker that
// wants a change of kind k.
func (ws *watchers) wakeWatchers(p *Partition, k change) {
	ws.version.Add(1)
	if k == changeData || k == changeReadable {
		ws.dataVersion.Add(1)
	}
	if k == changeData || k == changeDurable {
		ws.durableVersion.Add(1)
	}
	if ws.n.Load() == 0 {
		return
	}
	ws.mu.Lock()
	for w := range ws.set {
		if !w.wants(k) {
			continue
		}
		w.wakeFor(p)
	}
	ws.mu.Unlock()
}
