// Package sockio reads and writes non-blocking TCP sockets with raw system
// calls (internal/rawio says why), inside the connection's RawConn, which
// still parks the goroutine on the netpoller when the socket has nothing
// (EAGAIN) and honours the connection's deadlines.
package sockio

import (
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/internal/rawio"
)

// Conn is a *net.TCPConn whose Read and Write (and Writev, Sendfile) use
// raw system calls. Everything else (deadlines, addresses, Close) is the
// TCPConn's.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// One reader at a time (net.Conn allows a reader and a writer at
	// once).
	rmu sync.Mutex
	r   *rawio.Reader

	// The write state lives here so the callbacks bound once in Wrap
	// allocate nothing per call.
	wmu     sync.Mutex
	wbufs   [][]byte
	wn      int
	werr    syscall.Errno
	iov     []unix.Iovec
	writeFn func(uintptr) bool

	sfFd   int
	sfOff  int64
	sfLeft int
	sfN    int
	sfErr  syscall.Errno
	sfEOF  bool
	sendFn func(uintptr) bool
	oneBuf [1][]byte

	// Cork's state, under wmu like the writes it brackets.
	corkOn  int32
	corkErr syscall.Errno
	corkFn  func(uintptr)

	// SendWithNextRead's state, under rmu: the bytes the next Read
	// writes first, and that read's buffer and outcome.
	send     []byte
	sent     bool
	sendErr  syscall.Errno
	sendBuf  []byte
	sendN    int
	sendRErr syscall.Errno
	sendRead func(uintptr) bool
}

// Wrap returns nc as a *Conn when it is a TCP connection, else nc itself.
func Wrap(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &Conn{TCPConn: tc, rc: rc, r: rawio.NewReader(rc)}
	c.writeFn = c.writeSome
	c.sendFn = c.sendSome
	c.corkFn = c.setCork
	c.sendRead = c.sendThenRead
	return c
}

// TCP returns the underlying connection.
func (c *Conn) TCP() *net.TCPConn { return c.TCPConn }

// Read reads what the socket has, parking until it has something.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.send != nil {
		if n, done, err := c.readAfterSend(p); done {
			return n, err
		}
	}
	n, err := c.r.Read(p)
	if err != nil {
		return 0, c.opError("read", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// SendWithNextRead hands p to the next Read, which writes all of it and
// then waits for the answer. A Write followed by a Read tries the socket
// once before it parks, and for a request just sent that read finds
// nothing (EAGAIN): a wasted system call per exchange. Written inside the
// read's wait instead, after the poller cleared the socket's readiness,
// the request's answer can only arrive after that clearing, so the read
// may park at once. For a strict request and answer exchange whose
// reader buffers nothing ahead; the caller is the connection's only
// writer until that Read returns, and keeps p unchanged until then.
func (c *Conn) SendWithNextRead(p []byte) {
	c.rmu.Lock()
	c.send, c.sent = p, false
	c.rmu.Unlock()
}

// readAfterSend is Read with a request to send first. done is false when
// the socket took only part of the request: the rest was written the
// usual way and the caller reads as usual.
func (c *Conn) readAfterSend(p []byte) (int, bool, error) {
	c.sendBuf, c.sendErr, c.sendN, c.sendRErr = p, 0, 0, 0
	err := c.rc.Read(c.sendRead)
	rest, sent, werr := c.send, c.sent, c.sendErr
	c.send, c.sent, c.sendBuf = nil, false, nil
	switch {
	case werr != 0:
		return 0, true, c.opError("write", werr)
	case err != nil:
		return 0, true, c.opError("read", err)
	case !sent:
		c.wmu.Lock()
		c.oneBuf[0] = rest
		_, err := c.writev(c.oneBuf[:])
		c.oneBuf[0] = nil
		c.wmu.Unlock()
		if err != nil {
			return 0, true, err
		}
		return 0, false, nil
	case c.sendRErr != 0:
		return 0, true, c.opError("read", c.sendRErr)
	case c.sendN == 0:
		return 0, true, io.EOF
	}
	return c.sendN, true, nil
}

// sendThenRead is readAfterSend's callback: its first call writes the
// request and parks (or stops when the socket is full), the later ones
// read.
func (c *Conn) sendThenRead(fd uintptr) bool {
	if !c.sent {
		for len(c.send) > 0 {
			n, e := rawio.Write(fd, c.send)
			switch e {
			case 0:
				c.send = c.send[n:]
			case unix.EINTR:
			case unix.EAGAIN:
				return true // the rest goes the usual way
			default:
				c.sendErr = e
				return true
			}
		}
		c.sent = true
		return false
	}
	n, e, done := rawio.ReadOnce(fd, c.sendBuf)
	if done {
		c.sendN, c.sendRErr = n, e
	}
	return done
}

// writeSome writes the pending buffers until they are all written or the
// socket is full.
func (c *Conn) writeSome(fd uintptr) bool {
	for len(c.wbufs) > 0 {
		var n int
		var e syscall.Errno
		if len(c.wbufs) == 1 {
			n, e = rawio.Write(fd, c.wbufs[0])
		} else {
			c.iov = c.iov[:0]
			for _, b := range c.wbufs {
				if len(c.iov) == 1024 { // IOV_MAX
					break
				}
				v := unix.Iovec{Base: unsafe.SliceData(b)}
				v.SetLen(len(b))
				c.iov = append(c.iov, v)
			}
			n, e = rawio.Writev(fd, c.iov, c.wbufs)
		}
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
		c.wn += n
		c.consume(n)
	}
	return true
}

// consume drops n written bytes from the front of the pending buffers.
func (c *Conn) consume(n int) {
	for n > 0 && len(c.wbufs) > 0 {
		if n < len(c.wbufs[0]) {
			c.wbufs[0] = c.wbufs[0][n:]
			return
		}
		n -= len(c.wbufs[0])
		c.wbufs = c.wbufs[1:]
	}
	for len(c.wbufs) > 0 && len(c.wbufs[0]) == 0 {
		c.wbufs = c.wbufs[1:]
	}
}

// Write writes all of p (or fails).
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.oneBuf[0] = p
	n, err := c.writev(c.oneBuf[:])
	c.oneBuf[0] = nil
	return n, err
}

// Writev writes all of bufs, in order, with as few writev calls as the
// socket allows. bufs' elements may be resliced.
func (c *Conn) Writev(bufs [][]byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writev(bufs)
}

func (c *Conn) writev(bufs [][]byte) (int, error) {
	c.wbufs, c.wn, c.werr = bufs, 0, 0
	c.consume(0)
	err := c.rc.Write(c.writeFn)
	n := c.wn
	c.wbufs = nil
	if err != nil {
		return n, c.opError("write", err)
	}
	if c.werr != 0 {
		return n, c.opError("write", c.werr)
	}
	return n, nil
}

func (c *Conn) sendSome(sock uintptr) bool {
	for c.sfLeft > 0 {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDFILE, sock, uintptr(c.sfFd), uintptr(unsafe.Pointer(&c.sfOff)), uintptr(c.sfLeft), 0, 0)
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			c.sfErr = e
			return true
		}
		if n == 0 {
			c.sfEOF = true
			return true
		}
		c.sfN += int(n)
		c.sfLeft -= int(n)
	}
	return true
}

// Sendfile sends n bytes of the file fd from off, in the kernel. The range
// is expected in the page cache (a fetch at the log's tail): a read from
// disk would hold this goroutine's P for its duration. It returns the
// bytes sent and io.ErrUnexpectedEOF when the file ends first.
func (c *Conn) Sendfile(fd int, off int64, n int) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.sfFd, c.sfOff, c.sfLeft, c.sfN, c.sfErr, c.sfEOF = fd, off, n, 0, 0, false
	err := c.rc.Write(c.sendFn)
	sent := c.sfN
	switch {
	case err != nil:
		return sent, c.opError("sendfile", err)
	case c.sfErr != 0:
		return sent, c.opError("sendfile", c.sfErr)
	case c.sfEOF:
		return sent, io.ErrUnexpectedEOF
	}
	return sent, nil
}

// Cork sets or clears TCP_CORK. While corked, the kernel sends only full
// segments, so a response written in several calls (writev, sendfile,
// writev) leaves as one segment instead of one per call: under
// TCP_NODELAY each call was pushed on its own, and on loopback every
// segment runs the receiver's TCP path and may wake it. Clearing the cork
// pushes what is pending. A raw call, like the writes (rawio says why).
func (c *Conn) Cork(on bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.corkOn = 0
	if on {
		c.corkOn = 1
	}
	c.corkErr = 0
	if err := c.rc.Control(c.corkFn); err != nil {
		return c.opError("setsockopt", err)
	}
	if c.corkErr != 0 {
		return c.opError("setsockopt", c.corkErr)
	}
	return nil
}

func (c *Conn) setCork(fd uintptr) {
	_, _, c.corkErr = unix.RawSyscall6(unix.SYS_SETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_CORK,
		uintptr(unsafe.Pointer(&c.corkOn)), 4, 0)
}

// opError wraps err as the net package does, so errors.Is finds
// net.ErrClosed, os.ErrDeadlineExceeded and the errno.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
