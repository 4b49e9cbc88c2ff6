package objstore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Fault model of Faulty, the wrapper tests put around a Store (in the
// spirit of pebble's errorfs and internal/vfs's Fault):
//   - outage: every call fails with ErrUnavailable, as when the store is
//     unreachable; calls in flight are not interrupted.
//   - per-operation faults: a Fault matches calls by operation and key
//     prefix, skips the first Skip of them, then fires on up to Count
//     (0: every one after the skipped). Firing can fail the call with
//     Err, add latency (bounded by the call's ctx), corrupt the bytes a
//     GetRange returns (undetectable by the store: what a checksum above
//     it must catch), or drop a Put (acknowledged, never stored: a lost
//     object).
//   - DropObject removes an object behind the caller's back (a retention
//     race or an operator deleting data).

// Op names an operation of Store; Ops is a set of them.
type Op uint8

// Operations a Fault can match. OpRead is reading the body GetRange
// returned (a fault there fails the first Read).
const (
	OpPut Op = 1 << iota
	OpGetRange
	OpStat
	OpDelete
	OpList
	OpRead
	OpAll = OpPut | OpGetRange | OpStat | OpDelete | OpList | OpRead
)

func (o Op) String() string {
	names := []string{"put", "getrange", "stat", "delete", "list", "read"}
	var parts []string
	for i, n := range names {
		if o&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, "|")
}

// Fault describes one injected failure.
type Fault struct {
	// Ops the fault applies to (a set); zero means OpAll.
	Ops Op
	// KeyPrefix restricts the fault to keys (List: prefixes) starting
	// with it.
	KeyPrefix string
	// Skip matching calls pass untouched before the fault fires.
	Skip int
	// Count is how many times it fires; 0 means without limit.
	Count int
	// Err is returned by a firing call. Nil with no other effect set
	// means ErrUnavailable.
	Err error
	// Latency is added to a firing call before anything else (cut short
	// by ctx, which then fails the call with ErrUnavailable).
	Latency time.Duration
	// Corrupt flips bits in the bytes a firing GetRange returns.
	Corrupt bool
	// Drop makes a firing Put read its input and report success without
	// storing anything.
	Drop bool
}

// Injected is a handle on an injected fault.
type Injected struct {
	f      *Faulty
	fault  Fault
	seen   int // matching calls so far
	fired  int
	remove bool
}

// Fired is how many times the fault fired.
func (in *Injected) Fired() int {
	in.f.mu.Lock()
	defer in.f.mu.Unlock()
	return in.fired
}

// Remove stops the fault.
func (in *Injected) Remove() {
	in.f.mu.Lock()
	defer in.f.mu.Unlock()
	in.remove = true
}

// Faulty wraps a Store with switchable faults. Safe for concurrent use.
type Faulty struct {
	inner Store

	mu     sync.Mutex
	outage bool
	faults []*Injected
	calls  map[Op]int
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps s; with no fault set it passes every call through.
func NewFaulty(s Store) *Faulty { return &Faulty{inner: s, calls: make(map[Op]int)} }

// SetOutage switches the outage on or off.
func (f *Faulty) SetOutage(on bool) {
	f.mu.Lock()
	f.outage = on
	f.mu.Unlock()
}

// Inject adds a fault; faults are checked in the order injected and the
// first that fires decides.
func (f *Faulty) Inject(fault Fault) *Injected {
	if fault.Ops == 0 {
		fault.Ops = OpAll
	}
	in := &Injected{f: f, fault: fault}
	f.mu.Lock()
	f.faults = append(f.faults, in)
	f.mu.Unlock()
	return in
}

// Calls is how many calls of op reached the wrapper (faulted or not).
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// DropObject deletes key from the wrapped store directly.
func (f *Faulty) DropObject(ctx context.Context, key string) error {
	return f.inner.Delete(ctx, key)
}

// check counts the call and returns the fault that fires for it, if
// any, or the outage error.
func (f *Faulty) check(op Op, key string) (*Fault, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if f.outage {
		return nil, fmt.Errorf("%w: %s %s: injected outage", ErrUnavailable, op, key)
	}
	live := f.faults[:0]
	var hit *Fault
	for _, in := range f.faults {
		if in.remove || (in.fault.Count > 0 && in.fired >= in.fault.Count) {
			continue // spent: drop from the list
		}
		live = append(live, in)
		if hit != nil || in.fault.Ops&op == 0 || !strings.HasPrefix(key, in.fault.KeyPrefix) {
			continue
		}
		in.seen++
		if in.seen <= in.fault.Skip {
			continue
		}
		in.fired++
		fc := in.fault
		hit = &fc
	}
	f.faults = live
	return hit, nil
}

// apply runs a firing fault's latency and error. A Corrupt or Drop fault
// without Err lets the call proceed.
func apply(ctx context.Context, ft *Fault, op Op, key string) error {
	if ft == nil {
		return nil
	}
	if ft.Latency > 0 {
		t := time.NewTimer(ft.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, key, ctx.Err())
		}
	}
	if ft.Err != nil {
		return fmt.Errorf("%s %s: injected: %w", op, key, ft.Err)
	}
	if ft.Latency == 0 && !ft.Corrupt && !ft.Drop {
		return fmt.Errorf("%w: %s %s: injected fault", ErrUnavailable, op, key)
	}
	return nil
}

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	ft, err := f.check(OpPut, key)
	if err != nil {
		return err
	}
	if err := apply(ctx, ft, OpPut, key); err != nil {
		return err
	}
	if ft != nil && ft.Drop {
		if _, err := io.CopyN(io.Discard, r, size); err != nil {
			return fmt.Errorf("objstore: put %s: reader ended before %d bytes: %w", key, size, io.ErrUnexpectedEOF)
		}
		return nil
	}
	return f.inner.Put(ctx, key, r, size)
}

// GetRange implements Store.
func (f *Faulty) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	ft, err := f.check(OpGetRange, key)
	if err != nil {
		return nil, err
	}
	if err := apply(ctx, ft, OpGetRange, key); err != nil {
		return nil, err
	}
	rc, err := f.inner.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return &faultyBody{f: f, rc: rc, key: key, corrupt: ft != nil && ft.Corrupt}, nil
}

// faultyBody applies OpRead faults and corruption to a GetRange body.
type faultyBody struct {
	f       *Faulty
	rc      io.ReadCloser
	key     string
	corrupt bool
	checked bool
}

func (b *faultyBody) Read(p []byte) (int, error) {
	if !b.checked {
		b.checked = true
		ft, err := b.f.check(OpRead, b.key)
		if err != nil {
			return 0, err
		}
		// The body has no ctx of its own; latency here is not cancellable
		// beyond Background, so keep read latencies short in tests.
		if err := apply(context.Background(), ft, OpRead, b.key); err != nil {
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	if b.corrupt {
		for i := 0; i < n; i++ {
			p[i] ^= 0x5a
		}
	}
	return n, err
}

func (b *faultyBody) Close() error { return b.rc.Close() }

// Stat implements Store.
func (f *Faulty) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	ft, err := f.check(OpStat, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	if err := apply(ctx, ft, OpStat, key); err != nil {
		return ObjectInfo{}, err
	}
	return f.inner.Stat(ctx, key)
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	ft, err := f.check(OpDelete, key)
	if err != nil {
		return err
	}
	if err := apply(ctx, ft, OpDelete, key); err != nil {
		return err
	}
	return f.inner.Delete(ctx, key)
}

// List implements Store.
func (f *Faulty) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	ft, err := f.check(OpList, prefix)
	if err != nil {
		return nil, err
	}
	if err := apply(ctx, ft, OpList, prefix); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix)
}
