package group

import (
	"errors"
	"sync"
)

// Persister appends records to a __consumer_offsets partition. The
// coordinator calls Append while holding a group's lock, so records of one
// group reach the log in the order of the state changes they describe.
// Append must therefore only enqueue: it must not wait for durability and
// must not call back into the Manager. The returned Waiter reports when the
// records are durable (for ringlog: flushed and, with replication,
// committed by the ISR), or why they never will be.
type Persister interface {
	Append(partition int32, records []KV) Waiter
}

// Waiter completes one Append.
type Waiter interface {
	// Wait blocks until the append is durable (nil) or failed. A failure
	// that means "this node no longer leads the partition" should wrap
	// ErrNotCoordinator so the client is told to rediscover.
	Wait() error
}

// WaiterFunc adapts a function to Waiter.
type WaiterFunc func() error

// Wait calls f.
func (f WaiterFunc) Wait() error { return f() }

// Done is a Waiter that has already succeeded.
var Done Waiter = WaiterFunc(func() error { return nil })

// MemoryPersister keeps appended records in memory, per partition, in
// append order. Tests use it to inspect what the machine wrote and to feed
// Load; Hold and Release let a test keep appends pending, and Fail makes
// them fail, so "acknowledged only after durable" can be checked.
type MemoryPersister struct {
	mu      sync.Mutex
	parts   map[int32][]KV
	held    bool
	pending []chan error
	failErr error
}

// NewMemoryPersister returns an empty MemoryPersister.
func NewMemoryPersister() *MemoryPersister {
	return &MemoryPersister{parts: make(map[int32][]KV)}
}

// Append records the KVs and returns a Waiter that completes at once unless
// the persister is held.
func (p *MemoryPersister) Append(partition int32, records []KV) Waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failErr != nil {
		err := p.failErr
		return WaiterFunc(func() error { return err })
	}
	p.parts[partition] = append(p.parts[partition], records...)
	if !p.held {
		return Done
	}
	ch := make(chan error, 1)
	p.pending = append(p.pending, ch)
	return WaiterFunc(func() error { return <-ch })
}

// Hold keeps later appends pending until Release.
func (p *MemoryPersister) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Release completes every pending append with err and stops holding.
func (p *MemoryPersister) Release(err error) {
	p.mu.Lock()
	pend := p.pending
	p.pending, p.held = nil, false
	p.mu.Unlock()
	for _, ch := range pend {
		ch <- err
	}
}

// Fail makes later appends fail with err (nil clears it) without storing
// their records.
func (p *MemoryPersister) Fail(err error) {
	p.mu.Lock()
	p.failErr = err
	p.mu.Unlock()
}

// Records returns a copy of what was appended to partition, in order.
func (p *MemoryPersister) Records(partition int32) []KV {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]KV(nil), p.parts[partition]...)
}

// ErrAppendFailed is what tests pass to Fail or Release; it is not a Kafka
// code, the coordinator wraps append failures in ErrCoordinatorNotAvailable.
var ErrAppendFailed = errors.New("group: append failed")
