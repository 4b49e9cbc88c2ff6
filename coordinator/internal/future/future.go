// Package future is the one-shot result type the coordinators (groups,
// transactions) hand back for requests that complete once their record is
// durable.
package future

import (
	"context"
	"sync"
)

// Future is the result of a request that completes once its record is
// durable. netpath's reply.resolve blocks in Wait on the connection's
// writer goroutine, keeping responses in request order.
type Future[T any] struct {
	once sync.Once
	done chan struct{}
	v    T
}

// New returns an unresolved future.
func New[T any]() *Future[T] { return &Future[T]{done: make(chan struct{})} }

// Resolved returns a future that already holds v.
func Resolved[T any](v T) *Future[T] {
	f := New[T]()
	f.Resolve(v)
	return f
}

// Resolve sets the value once; later calls are ignored.
func (f *Future[T]) Resolve(v T) {
	f.once.Do(func() {
		f.v = v
		close(f.done)
	})
}

// Done is closed once the result is available.
func (f *Future[T]) Done() <-chan struct{} { return f.done }

// Result returns the value, blocking until it is available.
func (f *Future[T]) Result() T {
	<-f.done
	return f.v
}

// Wait blocks until the result is available or ctx ends. A ctx error does
// not cancel the request: its record may still become durable.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
