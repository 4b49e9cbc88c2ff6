package vfs

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Op is a kind of file system operation, for fault injection.
type Op int

const (
	OpOpen Op = iota
	OpRead
	OpWrite
	OpSync // Sync and Datasync
	OpTruncate
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
	OpClose
	numOps
)

// ErrInjected is the error injected when a Fault has no Err of its own.
var ErrInjected = errors.New("vfs: injected error")

// Fault fails operations of kind Op on paths containing PathContains (empty
// matches all). The first Skip matching calls pass; then Count calls fail
// (Count 0 means every later matching call fails). With Delay set the
// matching calls are delayed by it first (a slow disk) and fail only when
// Err is also set.
type Fault struct {
	Op           Op
	PathContains string
	Skip         int
	Count        int
	Err          error
	Delay        time.Duration
	// Partial (OpWrite only) writes the first Partial bytes before the
	// error: a short write, as a full disk makes.
	Partial int
}

// ErrorFS wraps an FS and injects faults. It also counts operations by kind,
// which tests use to observe how many syncs a workload caused.
type ErrorFS struct {
	FS
	mu     sync.Mutex
	faults []*faultState
	counts [numOps]atomic.Int64
}

type faultState struct {
	Fault
	seen, fired int
}

// Wrap returns an ErrorFS over fs with no faults.
func Wrap(fs FS) *ErrorFS { return &ErrorFS{FS: fs} }

// Inject adds a fault.
func (e *ErrorFS) Inject(f Fault) {
	if f.Err == nil && f.Delay <= 0 {
		f.Err = ErrInjected
	}
	e.mu.Lock()
	e.faults = append(e.faults, &faultState{Fault: f})
	e.mu.Unlock()
}

// Clear removes every fault.
func (e *ErrorFS) Clear() {
	e.mu.Lock()
	e.faults = nil
	e.mu.Unlock()
}

// Fired reports how many calls the faults have failed so far.
func (e *ErrorFS) Fired() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, f := range e.faults {
		n += f.fired
	}
	return n
}

// Count reports how many operations of kind op were attempted.
func (e *ErrorFS) Count(op Op) int64 { return e.counts[op].Load() }

// Check counts an operation of kind op on path and applies the first
// matching fault: the delay to wait before running the operation, and the
// error to return instead of running it (nil: run it). Writers that bypass
// the FS (the engine's io_uring queue) call it so the same faults reach
// them; it does not sleep itself.
func (e *ErrorFS) Check(op Op, path string) (time.Duration, error) {
	d, _, err := e.check(op, path)
	return d, err
}

// CheckWrite is Check for a write: it also says how many bytes of the
// failing write land before the error (Fault.Partial), for writers that
// bypass the FS and must tear the write themselves.
func (e *ErrorFS) CheckWrite(path string) (time.Duration, int, error) {
	return e.check(OpWrite, path)
}

// check is Check that also says how many bytes a failing write writes
// (Fault.Partial).
func (e *ErrorFS) check(op Op, path string) (time.Duration, int, error) {
	e.counts[op].Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.faults {
		if f.Op != op || !strings.Contains(path, f.PathContains) {
			continue
		}
		f.seen++
		if f.seen <= f.Skip || (f.Count > 0 && f.fired >= f.Count) {
			continue
		}
		f.fired++
		if f.Err == nil {
			return f.Delay, 0, nil
		}
		return f.Delay, f.Partial, &os.PathError{Op: "injected", Path: path, Err: f.Err}
	}
	return 0, 0, nil
}

// maybe is Check for calls made through the FS: it sleeps the delay.
func (e *ErrorFS) maybe(op Op, path string) error {
	d, err := e.Check(op, path)
	if d > 0 {
		time.Sleep(d)
	}
	return err
}

func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := e.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errFile{File: f, fs: e, name: name}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.FS.RemoveAll(name)
}

func (e *ErrorFS) Rename(o, n string) error {
	if err := e.maybe(OpRename, o); err != nil {
		return err
	}
	return e.FS.Rename(o, n)
}

func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.maybe(OpMkdir, dir); err != nil {
		return err
	}
	return e.FS.MkdirAll(dir, perm)
}

func (e *ErrorFS) ReadDir(dir string) ([]string, error) {
	if err := e.maybe(OpReadDir, dir); err != nil {
		return nil, err
	}
	return e.FS.ReadDir(dir)
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.maybe(OpStat, name); err != nil {
		return nil, err
	}
	return e.FS.Stat(name)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.maybe(OpSyncDir, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

type errFile struct {
	File
	fs   *ErrorFS
	name string
}

func (f *errFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.maybe(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errFile) WriteAt(p []byte, off int64) (int, error) {
	d, partial, err := f.fs.check(OpWrite, f.name)
	if d > 0 {
		time.Sleep(d)
	}
	if err != nil {
		n := 0
		if partial > 0 {
			n, _ = f.File.WriteAt(p[:min(partial, len(p))], off)
		}
		return n, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errFile) Sync() error {
	if err := f.fs.maybe(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errFile) Datasync() error {
	if err := f.fs.maybe(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Datasync()
}

// Synced passes an io_uring fdatasync's completion to the wrapped file.
func (f *errFile) Synced() error { return Synced(f.File) }

func (f *errFile) Truncate(size int64) error {
	if err := f.fs.maybe(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errFile) Close() error {
	if err := f.fs.maybe(OpClose, f.name); err != nil {
		f.File.Close() // release the descriptor anyway; the error is the point
		return err
	}
	return f.File.Close()
}
