package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TempSuffix ends the name of every file written under a temporary name by
// WriteFileAtomic or AtomicFile. A file with this suffix is an interrupted
// write: whoever owns the directory may delete it on startup (the engine
// does).
const TempSuffix = ".tmp"

// ErrDirSync marks an AtomicFile.Commit error that came after the rename:
// the new file is in place and open, but its name may not survive a crash.
var ErrDirSync = errors.New("vfs: directory sync after rename failed")

// ErrTooLarge marks a ReadFile of a file over the caller's limit.
var ErrTooLarge = errors.New("vfs: file too large")

// ReadFile returns the contents of name. With limit > 0 a larger file is
// not read: the error wraps ErrTooLarge (a damaged or foreign file must
// not make the caller allocate without bound).
func ReadFile(fs FS, name string, limit int64) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	if limit > 0 && n > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrTooLarge, name, n, limit)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// WriteFileAtomic replaces path with data durably: it writes
// path+TempSuffix, fsyncs it, renames it over path and fsyncs the
// directory. A crash at any point leaves the old file or the new one,
// never a mix or an empty file; a failure removes the temporary file, so a
// full disk is not made fuller by half-written copies.
func WriteFileAtomic(fs FS, path string, data []byte, perm os.FileMode) error {
	return writeFile(fs, path, data, perm, true)
}

// ReplaceFile is WriteFileAtomic without the directory fsync, for files
// that are rebuilt when missing (segment indexes, producer snapshots): the
// contents are durable, but after a crash the old file may be back, or no
// file when there was none before.
func ReplaceFile(fs FS, path string, data []byte, perm os.FileMode) error {
	return writeFile(fs, path, data, perm, false)
}

func writeFile(fs FS, path string, data []byte, perm os.FileMode, syncDir bool) error {
	a, err := CreateAtomic(fs, path, "", perm)
	if err != nil {
		return err
	}
	defer a.Abort()
	if _, err := a.f.WriteAt(data, 0); err != nil {
		return err
	}
	return a.commit(syncDir, true)
}

// AtomicFile is a file written under a temporary name beside its final path
// and moved over it by Commit: the streaming form of WriteFileAtomic, for
// large files (a segment's cleaned or truncated copy) that the caller
// writes in pieces and keeps open afterwards.
type AtomicFile struct {
	fs        FS
	f         File
	path, tmp string
	renamed   bool // the file is at path now
	committed bool // Commit succeeded: the caller owns the file
	aborted   bool
}

// CreateAtomic creates (or truncates) the temporary file for path. tmp
// names it; empty means path+TempSuffix. A caller that may have two copies
// of one path in flight gives each its own tmp, which must be in path's
// directory and end in TempSuffix so that leftovers are recognised.
func CreateAtomic(fs FS, path, tmp string, perm os.FileMode) (*AtomicFile, error) {
	if tmp == "" {
		tmp = path + TempSuffix
	}
	if filepath.Dir(tmp) != filepath.Dir(path) || !strings.HasSuffix(tmp, TempSuffix) {
		return nil, fmt.Errorf("vfs: temporary name %q for %q must be in the same directory and end in %q", tmp, path, TempSuffix)
	}
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	return &AtomicFile{fs: fs, f: f, path: path, tmp: tmp}, nil
}

// File is the open file, for writes and reads. After a successful Commit
// the caller owns it and must close it.
func (a *AtomicFile) File() File { return a.f }

// TempName is the temporary file's path.
func (a *AtomicFile) TempName() string { return a.tmp }

// Sync fsyncs the file. Commit does it again, but a caller that commits
// under a lock can pay for the flush before taking it.
func (a *AtomicFile) Sync() error { return a.f.Sync() }

// Commit fsyncs the file, renames it over the final path and fsyncs the
// directory. An error before the rename leaves the old file in place; an
// error wrapping ErrDirSync comes after it, when path is already the new
// file. After any error the file is still open: Abort closes it (and
// removes the temporary file if it was not renamed), unless the caller
// keeps using it.
func (a *AtomicFile) Commit() error { return a.commit(true, false) }

// commit is Commit; closeFirst closes the file before the rename (a
// failing close then leaves the old file in place, as a failing sync does).
func (a *AtomicFile) commit(syncDir, closeFirst bool) error {
	if a.renamed || a.aborted {
		return fmt.Errorf("vfs: %s: commit after commit or abort", a.tmp)
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	if closeFirst {
		err := a.f.Close()
		a.f = closedFile{a.f}
		if err != nil {
			return err
		}
	}
	if err := a.fs.Rename(a.tmp, a.path); err != nil {
		return err
	}
	a.renamed = true
	if syncDir {
		if err := a.fs.SyncDir(filepath.Dir(a.path)); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDirSync, a.path, err)
		}
	}
	a.committed = true
	return nil
}

// Abort closes the file and removes the temporary file if it was not
// renamed. It does nothing after a successful Commit or a previous Abort,
// so callers can defer it.
func (a *AtomicFile) Abort() {
	if a.committed || a.aborted {
		return
	}
	a.aborted = true
	a.f.Close()
	if !a.renamed {
		a.fs.Remove(a.tmp)
	}
}

// closedFile stands for a file commit closed, so Abort does not close it
// twice (an os.File would say so; an ErrorFS would count the call).
type closedFile struct{ File }

func (closedFile) Close() error { return nil }
