package group

import (
	"context"
	"sync"
)

// Future is the result of a request that may complete later: a JoinGroup
// waiting for the other members, a SyncGroup follower waiting for the
// leader, anything waiting for its records to become durable. netpath's
// reply.resolve blocks in Wait on the connection's writer goroutine, which
// keeps responses in request order while the reader keeps reading.
type Future[T any] struct {
	once sync.Once
	done chan struct{}
	v    T
}

func newFuture[T any]() *Future[T] { return &Future[T]{done: make(chan struct{})} }

func resolved[T any](v T) *Future[T] {
	f := newFuture[T]()
	f.resolve(v)
	return f
}

// resolve sets the value once; later calls are ignored, which lets a
// fenced or removed member's future be answered from whichever path gets
// there first without bookkeeping.
func (f *Future[T]) resolve(v T) {
	f.once.Do(func() {
		f.v = v
		close(f.done)
	})
}

// Done is closed once the result is available.
func (f *Future[T]) Done() <-chan struct{} { return f.done }

// Result returns the value; call it only after Done is closed.
func (f *Future[T]) Result() T {
	<-f.done
	return f.v
}

// Wait blocks until the result is available or ctx ends. A ctx error does
// not cancel the request: the group still counts the member as joining until
// its rebalance timeout, as Kafka does for a client whose connection died.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
