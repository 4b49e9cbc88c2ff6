// Package vfs is the file layer under the engine: a small FS/File interface
// with an OS implementation (Default), a fault-injecting wrapper (Wrap) and a
// crashable in-memory FS (NewMem) for deterministic crash tests.
//
// Fault model: a File write is visible to readers at once but durable only
// after Sync/Datasync; a directory entry (create, rename, remove) is durable
// only after SyncDir on its parent. A failed sync is not retryable: callers
// must treat the file's unsynced contents as lost.
package vfs

import (
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// File is an open file. Offsets are explicit so one File can be shared by a
// writer and many readers without a shared cursor.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync flushes data and metadata (fsync).
	Sync() error
	// Datasync flushes data and the metadata needed to read it (fdatasync).
	Datasync() error
	Truncate(size int64) error
	Size() (int64, error)
	// Fd is the OS descriptor, or -1 when the file is not an OS file.
	Fd() int
	Name() string
}

// FS is a file system.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the entries of dir durable.
	SyncDir(dir string) error
}

// Synced reports to f's file system that an fdatasync of f.Fd() issued
// outside the File (by io_uring) completed. The OS needs no telling; a
// MemFS from NewMemFds counts what the file holds as durable only then,
// and fails it with ErrCrashed after a crash, as its Datasync would: the
// caller must treat the fdatasync as failed.
func Synced(f File) error {
	if s, ok := f.(interface{ Synced() error }); ok {
		return s.Synced()
	}
	return nil
}

// KernelFiles reports whether fs's files have descriptors (File.Fd) that
// the kernel can write and fdatasync directly, as io_uring does: the OS
// file system, a MemFS from NewMemFds, or an ErrorFS over either.
func KernelFiles(fs FS) bool {
	switch fs := fs.(type) {
	case *ErrorFS:
		return KernelFiles(fs.FS)
	case *MemFS:
		return fs.fds
	}
	return fs == Default
}

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct {
	f  *os.File
	fd int // cached: os.File.Fd is not free
}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f: f, fd: int(f.Fd())}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f osFile) ReadAt(p []byte, off int64) (int, error)  { return f.f.ReadAt(p, off) }
func (f osFile) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }
func (f osFile) Close() error                             { return f.f.Close() }
func (f osFile) Sync() error                              { return f.f.Sync() }
func (f osFile) Truncate(size int64) error                { return f.f.Truncate(size) }
func (f osFile) Fd() int                                  { return f.fd }
func (f osFile) Name() string                             { return f.f.Name() }

func (f osFile) Datasync() error {
	for {
		err := unix.Fdatasync(f.fd)
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (f osFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
