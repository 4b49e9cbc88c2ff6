// Package rawio issues read, write, pwritev and preadv2 as raw system
// calls, for calls that do not block: non-blocking sockets and eventfds,
// page-cache writes of bounded size, and page-cache reads that refuse to
// wait for the disk (RWF_NOWAIT).
//
// Go's syscall.Syscall enters the runtime's "in a system call" state, and
// when the process had gone idle that entry wakes the runtime's sysmon
// thread, which then polls every 20 µs for a while before backing off. A
// broker at a moderate rate goes idle between requests, so every request
// paid a sysmon wake-up and a burst of its sleeps: a third of the thread
// sleeps of a replicated acknowledgement (BENCHMARKS.md §19). A raw call
// skips that bookkeeping; it also holds its P for the call's duration,
// which is why it is only for calls that do not block.
//
// Under the race detector the calls go through package syscall instead,
// whose Read and Write tell the detector that bytes written to a
// descriptor happen before they are read back: with raw calls it reported
// the kernel's own hand-over of a message as a data race.
package rawio

import (
	"syscall"
)

// Reader reads a non-blocking descriptor through its RawConn: on EAGAIN
// the goroutine parks on the netpoller (honouring the descriptor's
// deadlines) instead of the thread blocking. One read at a time; the
// callback is bound once, so a read allocates nothing.
type Reader struct {
	rc  syscall.RawConn
	buf []byte
	n   int
	err syscall.Errno
	fn  func(uintptr) bool
}

// NewReader returns a Reader over rc.
func NewReader(rc syscall.RawConn) *Reader {
	r := &Reader{rc: rc}
	r.fn = r.once
	return r
}

func (r *Reader) once(fd uintptr) bool {
	n, e, done := ReadOnce(fd, r.buf)
	if done {
		r.n, r.err = n, e
	}
	return done
}

// ReadOnce is one read of a non-blocking descriptor inside a RawConn
// callback: done is false when it has nothing yet (EAGAIN, to wait for),
// and an interrupted read is retried.
func ReadOnce(fd uintptr, p []byte) (n int, e syscall.Errno, done bool) {
	for {
		n, e := Read(fd, p)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, 0, false
		}
		return n, e, true
	}
}

// Read reads what the descriptor has into p, parking until it has
// something. It returns the bytes read (0 at end of file), the error of
// the wait (a deadline, a closed descriptor) or of the read.
func (r *Reader) Read(p []byte) (int, error) {
	r.buf = p
	err := r.rc.Read(r.fn)
	r.buf = nil
	if err != nil {
		return 0, err
	}
	if r.err != 0 {
		return 0, r.err
	}
	return r.n, nil
}
