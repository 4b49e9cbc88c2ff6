package netpath

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/rawio"
	"github.com/ringlog/ringlog/internal/sockio"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// response is what the writer sends for one request: either a kmsg
// response it encodes, or a body pre-encoded in parts where some parts are
// file ranges (fetch record data) sent without copying through user space.
type response struct {
	msg      kmsg.Response
	parts    []responsePart
	flexible bool // header v1 (tagged fields) for a parts response
	release  []func()
	// A fetch's file ranges and read state, released last (releaseAll):
	// fields rather than a closure in release, which cost two
	// allocations per fetch.
	fetchTopics []fetchTopic
	fetchState  *fetchState
}

type responsePart struct {
	buf  []byte
	file engine.FileRange // when non-nil, buf is unused
}

func (r *response) releaseAll() {
	for _, f := range r.release {
		f()
	}
	r.release = nil
	if st := r.fetchState; st != nil {
		releaseFetch(r.fetchTopics)
		r.fetchTopics, r.fetchState = nil, nil
		// Last: r may be st's own response, which the pool hands to
		// the next fetch from here on.
		putFetchState(st)
	}
}

// writeTimeout bounds how long a client that stopped reading can pin a
// connection's writer.
const writeTimeout = 60 * time.Second

// writeDeadlineAhead keeps the write deadline between writeTimeout and
// writeTimeout plus an eighth from now (deadlineAhead): set before every
// response, it re-armed the socket's runtime timer three times per
// acknowledged round on a leader.
func (c *conn) writeDeadlineAhead() {
	if deadlineAhead(&c.writeDeadline, writeTimeout) {
		c.nc.SetWriteDeadline(c.writeDeadline)
	}
}

func (c *conn) writeResponse(hdr requestHeader, r *response) error {
	var body []responsePart
	flexible := r.flexible
	if r.msg != nil {
		body = []responsePart{{buf: r.msg.AppendTo(make([]byte, 0, 256))}}
		flexible = r.msg.IsFlexible()
	} else {
		body = r.parts
	}
	// The ApiVersions response header never carries tagged fields, even
	// for flexible versions: clients parse it before they know our ranges.
	if hdr.key == apiVersionsKey {
		flexible = false
	}
	headerLen := 8
	if flexible {
		headerLen = 9
	}
	total := headerLen - 4
	var records int64 // bytes of the file parts
	for _, p := range body {
		if p.file != nil {
			records += int64(p.file.Len())
		} else {
			total += len(p.buf)
		}
	}
	total += int(records)
	// The connection's: its responses are written one at a time
	// (answerInline only while the writer has none queued).
	head := c.head[:headerLen]
	binary.BigEndian.PutUint32(head[0:], uint32(total))
	binary.BigEndian.PutUint32(head[4:], uint32(hdr.correlationID))
	c.writeDeadlineAhead()

	var err error
	if c.useSendfile() {
		sent := false
		if records < c.l.copyBelow && total+4 <= copyBufSize {
			sent, err = c.writeSmall(head, body, records)
		}
		if !sent && err == nil {
			err = c.writeSendfile(head, body)
		}
	} else {
		err = c.writeCopy(head, body)
	}
	if err != nil {
		return err
	}
	c.l.bytesOut.Add(uint64(total) + 4)
	return nil
}

// useSendfile says whether file parts go file -> socket in the kernel: only
// on a plaintext TCP socket of a listener configured for it.
func (c *conn) useSendfile() bool {
	if c.l.fetchPath != "sendfile" {
		return false
	}
	_, ok := c.nc.(*sockio.Conn)
	return ok
}

// writeSendfile sends byte parts with writev and file parts with sendfile,
// in order. Ranges without an OS file (in-memory test file systems) are
// copied.
func (c *conn) writeSendfile(head []byte, body []responsePart) (err error) {
	sc := c.nc.(*sockio.Conn)
	bufs := append(c.iovs[:0], head)
	defer func() { clear(bufs); c.iovs = bufs[:0] }()
	// A response with file parts takes several calls; corked, it leaves
	// in as few segments as its size allows (sockio.Conn.Cork says why).
	if hasFilePart(body) {
		if err := sc.Cork(true); err != nil {
			return err
		}
		// Uncorking sends the response's last partial segment: if it
		// fails the response may be stuck, so the connection closes.
		defer func() {
			if uerr := sc.Cork(false); err == nil {
				err = uerr
			}
		}()
	}
	for _, p := range body {
		if p.file == nil {
			if len(p.buf) > 0 {
				bufs = append(bufs, p.buf)
			}
			continue
		}
		if p.file.Len() == 0 {
			continue
		}
		if len(bufs) > 0 {
			if _, err := sc.Writev(bufs); err != nil {
				return err
			}
			bufs = bufs[:0]
		}
		if p.file.Fd() < 0 {
			w := copyWriter{c: c, buf: getCopyBuf()}
			err := w.file(p.file)
			if err == nil {
				err = w.flush()
			}
			putCopyBuf(w.buf)
			if err != nil {
				return err
			}
			continue
		}
		send := c.sendfile
		if p.file.Len() >= spliceMinBytes {
			send = c.splice
		}
		if err := send(sc, p.file); err != nil {
			return err
		}
	}
	if len(bufs) > 0 {
		if _, err := sc.Writev(bufs); err != nil {
			return err
		}
	}
	return nil
}

// preadNowait is rawio.PreadNowait; tests replace it to refuse a read,
// which a real page cache does only when the range is not cached and
// the device is slower than the read's own path (on a VM whose host
// caches the disk, the readahead a refused read starts can complete
// before the read looks).
var preadNowait = rawio.PreadNowait

// writeSmall sends a small response of a zero-copy listener, which fits
// the copy buffer, as one write (Config.FetchCopyBelow says why): its
// record bytes are read into a pooled buffer with RWF_NOWAIT, which never
// waits for the disk. When a range is not all in the page cache (or the
// file system cannot read without waiting, or is not an OS file) nothing
// has been written and it reports false, and the caller sends the
// response with sendfile.
func (c *conn) writeSmall(head []byte, body []responsePart, records int64) (bool, error) {
	buf := getCopyBuf()
	defer putCopyBuf(buf)
	b := append((*buf)[:0], head...)
	for _, p := range body {
		if p.file == nil {
			b = append(b, p.buf...)
			continue
		}
		n := int(p.file.Len())
		if p.file.Fd() < 0 {
			return false, nil
		}
		m, e := preadNowait(p.file.Fd(), b[len(b):len(b)+n], p.file.Pos())
		if e != 0 || m != n {
			return false, nil
		}
		b = b[:len(b)+n]
	}
	if _, err := c.nc.Write(b); err != nil {
		return true, err
	}
	c.l.copiedBytes.Add(uint64(records))
	return true, nil
}

// hasFilePart says whether body has a file range sendfile will send.
func hasFilePart(body []responsePart) bool {
	for _, p := range body {
		if p.file != nil && p.file.Len() > 0 && p.file.Fd() >= 0 {
			return true
		}
	}
	return false
}

// writeCopy is the user-space path (TLS, --fetch-copy): every part,
// headers included, is gathered into one pooled buffer, record bytes are
// pread straight into it, and it is written when full. On TLS this makes
// full-size records instead of one tiny record per header part, and on
// plaintext it is one copy in and one copy out per byte.
func (c *conn) writeCopy(head []byte, body []responsePart) error {
	w := copyWriter{c: c, buf: getCopyBuf()}
	defer putCopyBuf(w.buf)
	if err := w.bytes(head); err != nil {
		return err
	}
	for _, p := range body {
		var err error
		if p.file != nil {
			err = w.file(p.file)
		} else {
			err = w.bytes(p.buf)
		}
		if err != nil {
			return err
		}
	}
	return w.flush()
}

// copyWriter fills a fixed buffer and writes it to the connection when
// full.
type copyWriter struct {
	c   *conn
	buf *[]byte
	n   int
}

func (w *copyWriter) flush() error {
	if w.n == 0 {
		return nil
	}
	_, err := w.c.nc.Write((*w.buf)[:w.n])
	w.n = 0
	return err
}

func (w *copyWriter) bytes(b []byte) error {
	for len(b) > 0 {
		if w.n == len(*w.buf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		m := copy((*w.buf)[w.n:], b)
		w.n += m
		b = b[m:]
	}
	return nil
}

// file preads a range into the buffer, chunk by chunk, at explicit
// offsets (no shared file position).
func (w *copyWriter) file(fr engine.FileRange) error {
	pos, left := fr.Pos(), int64(fr.Len())
	for left > 0 {
		if w.n == len(*w.buf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		chunk := (*w.buf)[w.n:]
		if int64(len(chunk)) > left {
			chunk = chunk[:left]
		}
		m, err := fr.ReadAt(chunk, pos)
		if m < len(chunk) {
			// The engine keeps the file open and unshrunk until the range
			// is released, so a short read means a broken invariant: the
			// response would be torn, so the connection must close.
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading fetch range at %d: %w", pos, err)
		}
		w.n += m
		pos += int64(m)
		left -= int64(m)
		w.c.l.copiedBytes.Add(uint64(m))
	}
	return nil
}

// copyBufSize trades memory per in-flight copy response against syscalls
// and writer wakeups per byte. On loopback 1 MiB cut the copy path's CPU
// per GB by about 30% against 128 KiB (docs/bench-fetch.md); it is 64
// full TLS records.
const copyBufSize = 1 << 20

var copyBufPool = sync.Pool{New: func() any {
	b := make([]byte, copyBufSize)
	return &b
}}

func getCopyBuf() *[]byte  { return copyBufPool.Get().(*[]byte) }
func putCopyBuf(b *[]byte) { copyBufPool.Put(b) }

// sendfile moves bytes file -> socket in the kernel at an explicit offset,
// with raw system calls (sockio.Conn.Sendfile): on EAGAIN the goroutine
// parks until the socket is writable (or the write deadline passes), so
// nothing spins.
func (c *conn) sendfile(sc *sockio.Conn, fr engine.FileRange) error {
	n, err := sc.Sendfile(fr.Fd(), fr.Pos(), int(fr.Len()))
	if n > 0 {
		c.l.zeroCopyBytes.Add(uint64(n))
	}
	if err != nil {
		// A file shorter than the promised range would tear the
		// response: fail, and the connection closes.
		return fmt.Errorf("sendfile: %w", err)
	}
	return nil
}

// Large ranges go file -> pipe -> socket with splice through a pipe
// enlarged to splicePipeSize: each splice into the socket then hands TCP
// up to 256 pages at once instead of sendfile's internal 16-page pipe,
// which measured about 10% less broker CPU per GB (docs/bench-fetch.md).
// Smaller ranges keep sendfile: a pipe costs a few syscalls to set up.
const (
	spliceMinBytes = 1 << 20
	splicePipeSize = 1 << 20
)

// splice sends a file range through a pipe created for it. Like sendfile
// it parks on EAGAIN until the socket is writable; bytes already in the
// pipe are drained before more are read from the file.
func (c *conn) splice(sc *sockio.Conn, fr engine.FileRange) error {
	tc := sc.TCP()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return c.sendfile(sc, fr)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	// Past the per-user pipe limit this fails and the default size stays.
	unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, splicePipeSize)
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var (
		fd      = fr.Fd()
		total   = int64(fr.Len())
		off     = fr.Pos()
		filled  int64 // bytes moved from the file into the pipe
		written int64 // bytes moved from the pipe to the socket
		sendErr error
	)
	err = rc.Write(func(sock uintptr) bool {
		for written < total {
			if filled == written {
				o := off + filled
				m, e := unix.Splice(fd, &o, p[1], nil, int(min(total-filled, splicePipeSize)), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				switch {
				case e == unix.EINTR:
					continue
				case e != nil:
					sendErr = e
					return true
				case m == 0:
					// EOF before the promised length: fail and close.
					sendErr = io.ErrUnexpectedEOF
					return true
				}
				filled += m
			}
			flags := unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
			if filled < total {
				flags |= unix.SPLICE_F_MORE
			}
			m, e := unix.Splice(p[0], nil, int(sock), nil, int(filled-written), flags)
			if m > 0 {
				written += m
				c.l.zeroCopyBytes.Add(uint64(m))
				c.l.splicedBytes.Add(uint64(m))
			}
			switch {
			case e == unix.EAGAIN:
				return false
			case e == unix.EINTR:
				continue
			case e != nil:
				sendErr = e
				return true
			case m == 0:
				// A full pipe to a writable socket moved nothing: fail
				// rather than loop.
				sendErr = io.ErrShortWrite
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("splice: %w", sendErr)
	}
	return nil
}
