package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrCrashed is returned by every operation on a MemFS after Crash.
var ErrCrashed = errors.New("vfs: file system crashed")

// MemFS is an in-memory FS that remembers what was synced. Crash returns the
// state a machine would see after power loss: file contents as of their last
// Sync/Datasync (plus, optionally, a torn prefix of later appends) and
// directory entries as of their parent's last SyncDir.
//
// A MemFS from NewMemFds keeps each file's contents in an anonymous
// in-memory kernel file (memfd), so File.Fd is a real descriptor that the
// kernel can write and fdatasync directly (the engine's io_uring path). The
// kernel's fdatasync of such a descriptor does not reach the MemFS, so
// whoever issues it reports its completion with Synced: a write the kernel
// completed is written but not durable until then, and Crash drops it.
type MemFS struct {
	mu      sync.Mutex
	crashed bool
	fds     bool                // file contents live in memfds (NewMemFds)
	cur     map[string]*memNode // visible namespace
	durable map[string]*memNode // namespace as of the last SyncDir of each parent
}

type memNode struct {
	isDir  bool
	data   []byte   // current contents, unless fd holds them
	fd     *os.File // current contents (NewMemFds)
	synced []byte   // contents as of the last sync
	mtime  time.Time
}

// NewMem returns an empty MemFS whose root "/" exists.
func NewMem() *MemFS {
	root := &memNode{isDir: true}
	return &MemFS{
		cur:     map[string]*memNode{"/": root},
		durable: map[string]*memNode{"/": root},
	}
}

// NewMemFds returns an empty MemFS whose files have kernel descriptors
// (see MemFS). It fails where the OS has no memfd (only Linux has).
func NewMemFds() (*MemFS, error) {
	if _, err := newMemFd("probe"); err != nil {
		return nil, err
	}
	fs := NewMem()
	fs.fds = true
	return fs, nil
}

// newFile makes an empty file node. Lock must be held.
func (fs *MemFS) newFile(name string) (*memNode, error) {
	n := &memNode{mtime: time.Now()}
	if fs.fds {
		f, err := newMemFd(name)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		n.fd = f
	}
	return n, nil
}

// CrashOptions shapes what survives a crash.
type CrashOptions struct {
	// TornTail keeps a random-length prefix of each file's unsynced bytes
	// past its synced length, as a disk that wrote some sectors would.
	TornTail bool
	// Seed makes the torn lengths deterministic.
	Seed int64
}

// Crash freezes fs (every later call on it or its files fails with
// ErrCrashed) and returns a new MemFS holding only the durable state.
func (fs *MemFS) Crash(opts CrashOptions) *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.crashed = true
	rng := rand.New(rand.NewSource(opts.Seed))
	names := make([]string, 0, len(fs.durable))
	for name := range fs.durable {
		names = append(names, name)
	}
	sort.Strings(names) // map order is random; the seed must decide alone
	out := &MemFS{fds: fs.fds, cur: map[string]*memNode{}, durable: map[string]*memNode{}}
	for _, name := range names {
		// An entry in a directory whose own entry was lost is lost with
		// it (sorted, a parent comes before its children).
		if p, ok := out.cur[filepath.Dir(name)]; name != "/" && (!ok || !p.isDir) {
			continue
		}
		n := fs.durable[name]
		c := &memNode{isDir: n.isDir, mtime: n.mtime}
		if !n.isDir {
			data := append([]byte(nil), n.synced...)
			if cur := n.contents(); opts.TornTail && len(cur) > len(n.synced) {
				extra := cur[len(n.synced):]
				data = append(data, extra[:rng.Intn(len(extra)+1)]...)
			}
			c.synced = append([]byte(nil), data...)
			if fs.fds {
				f, err := newMemFd(name)
				if err == nil {
					_, err = f.WriteAt(data, 0)
				}
				if err != nil {
					// NewMemFds made one already: only running out of
					// memory or descriptors gets here.
					panic(fmt.Sprintf("vfs: recreating %s after a crash: %v", name, err))
				}
				c.fd = f
			} else {
				c.data = data
			}
		}
		out.cur[name] = c
		out.durable[name] = c
	}
	return out
}

// The contents of a file node, in memory or in its memfd. Lock must be held.

func (n *memNode) size() int64 {
	if n.fd == nil {
		return int64(len(n.data))
	}
	fi, err := n.fd.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (n *memNode) contents() []byte {
	if n.fd == nil {
		return n.data
	}
	b := make([]byte, n.size())
	k, _ := n.fd.ReadAt(b, 0)
	return b[:k]
}

func (n *memNode) readAt(p []byte, off int64) (int, error) {
	if n.fd != nil {
		return n.fd.ReadAt(p, off)
	}
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	k := copy(p, n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

func (n *memNode) writeAt(p []byte, off int64) (int, error) {
	if n.fd != nil {
		return n.fd.WriteAt(p, off)
	}
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		if end <= int64(cap(n.data)) {
			old := len(n.data)
			n.data = n.data[:end]
			clear(n.data[old:]) // a hole reads as zeros, not stale bytes
		} else {
			grown := make([]byte, end, end*2)
			copy(grown, n.data)
			n.data = grown
		}
	}
	copy(n.data[off:], p)
	return len(p), nil
}

func (n *memNode) truncate(size int64) error {
	switch {
	case n.fd != nil:
		return n.fd.Truncate(size)
	case size <= int64(len(n.data)):
		n.data = n.data[:size]
	default:
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	return nil
}

func clean(name string) string { return filepath.Clean("/" + name) }

func (fs *MemFS) check() error {
	if fs.crashed {
		return ErrCrashed
	}
	return nil
}

// OpenFile supports O_CREATE, O_EXCL, O_TRUNC; access mode bits are ignored.
func (fs *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return nil, err
	}
	name = clean(name)
	n, ok := fs.cur[name]
	switch {
	case ok && n.isDir:
		return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok:
		if p, ok := fs.cur[filepath.Dir(name)]; !ok || !p.isDir {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		var err error
		if n, err = fs.newFile(name); err != nil {
			return nil, err
		}
		fs.cur[name] = n
	}
	if flag&os.O_TRUNC != 0 {
		if err := n.truncate(0); err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	f := &memFile{fs: fs, n: n, name: name, fd: -1}
	if n.fd != nil {
		f.fd = int(n.fd.Fd())
	}
	return f, nil
}

func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return err
	}
	name = clean(name)
	n, ok := fs.cur[name]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	if n.isDir {
		for k := range fs.cur {
			if filepath.Dir(k) == name && k != name {
				return &os.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
			}
		}
	}
	delete(fs.cur, name)
	return nil
}

func (fs *MemFS) RemoveAll(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return err
	}
	name = clean(name)
	for k := range fs.cur {
		if k == name || strings.HasPrefix(k, name+"/") {
			delete(fs.cur, k)
		}
	}
	return nil
}

func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return err
	}
	oldname, newname = clean(oldname), clean(newname)
	n, ok := fs.cur[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: os.ErrNotExist}
	}
	if n.isDir {
		return &os.PathError{Op: "rename", Path: oldname, Err: errors.New("directory rename not supported")}
	}
	delete(fs.cur, oldname)
	fs.cur[newname] = n
	return nil
}

func (fs *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return err
	}
	for d := clean(dir); ; d = filepath.Dir(d) {
		if n, ok := fs.cur[d]; ok {
			if !n.isDir {
				return &os.PathError{Op: "mkdir", Path: d, Err: errors.New("not a directory")}
			}
			break
		}
		fs.cur[d] = &memNode{isDir: true, mtime: time.Now()}
	}
	return nil
}

func (fs *MemFS) ReadDir(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return nil, err
	}
	dir = clean(dir)
	if n, ok := fs.cur[dir]; !ok || !n.isDir {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for k := range fs.cur {
		if k != dir && filepath.Dir(k) == dir {
			names = append(names, filepath.Base(k))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (fs *MemFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return nil, err
	}
	name = clean(name)
	n, ok := fs.cur[name]
	if !ok {
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	return memInfo{name: filepath.Base(name), size: n.size(), dir: n.isDir, mtime: n.mtime}, nil
}

// SyncDir makes the entries directly under dir durable, including removals.
func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.check(); err != nil {
		return err
	}
	dir = clean(dir)
	for k := range fs.durable {
		if k != dir && filepath.Dir(k) == dir {
			delete(fs.durable, k)
		}
	}
	for k, n := range fs.cur {
		if k != dir && filepath.Dir(k) == dir {
			fs.durable[k] = n
		}
	}
	return nil
}

type memInfo struct {
	name  string
	size  int64
	dir   bool
	mtime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}

type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	fd     int // n.fd's descriptor, cached: os.File.Fd is not free
	closed bool
}

func (f *memFile) lock() error {
	f.fs.mu.Lock()
	if f.fs.crashed {
		f.fs.mu.Unlock()
		return ErrCrashed
	}
	if f.closed {
		f.fs.mu.Unlock()
		return os.ErrClosed
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	return f.n.readAt(p, off)
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	f.n.mtime = time.Now()
	return f.n.writeAt(p, off)
}

func (f *memFile) Sync() error { return f.Datasync() }

func (f *memFile) Datasync() error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.n.synced = append(f.n.synced[:0], f.n.contents()...)
	return nil
}

// Synced records that an fdatasync of Fd issued outside the File (by
// io_uring) completed: what the file holds now is durable. Without the
// call a crash drops what the kernel wrote since the last sync. After a
// crash it fails as Datasync does.
func (f *memFile) Synced() error { return f.Datasync() }

func (f *memFile) Truncate(size int64) error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	return f.n.truncate(size)
}

func (f *memFile) Size() (int64, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	return f.n.size(), nil
}

func (f *memFile) Close() error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.closed = true
	return nil
}

// Fd is the memfd's descriptor (NewMemFds), else -1.
func (f *memFile) Fd() int {
	if f.n.fd == nil {
		return -1
	}
	return f.fd
}
func (f *memFile) Name() string { return f.name }
