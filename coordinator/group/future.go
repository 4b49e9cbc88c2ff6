package group

import "github.com/ringlog/ringlog/coordinator/internal/future"

// Future is the result of a request that completes once its record is
// durable (shared with the other coordinators).
type Future[T any] = future.Future[T]

func newFuture[T any]() *Future[T] { return future.New[T]() }

func resolved[T any](v T) *Future[T] { return future.Resolved(v) }
