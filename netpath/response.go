package netpath

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/engine"
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
}

// writeTimeout bounds how long a client that stopped reading can pin a
// connection's writer.
const writeTimeout = 60 * time.Second

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
	for _, p := range body {
		if p.file != nil {
			total += int(p.file.Len())
		} else {
			total += len(p.buf)
		}
	}
	head := make([]byte, headerLen)
	binary.BigEndian.PutUint32(head[0:], uint32(total))
	binary.BigEndian.PutUint32(head[4:], uint32(hdr.correlationID))
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))

	bufs := net.Buffers{head}
	for _, p := range body {
		if p.file == nil {
			if len(p.buf) > 0 {
				bufs = append(bufs, p.buf)
			}
			continue
		}
		if len(bufs) > 0 {
			if _, err := bufs.WriteTo(c.nc); err != nil {
				return err
			}
			bufs = bufs[:0]
		}
		if err := c.sendFileRange(p.file); err != nil {
			return err
		}
	}
	if len(bufs) > 0 {
		if _, err := bufs.WriteTo(c.nc); err != nil {
			return err
		}
	}
	c.s.stats.bytesOut.Add(uint64(total) + 4)
	return nil
}

// sendFileRange writes a file range to the socket: with sendfile from the
// file descriptor at an explicit offset when the listener allows it (no
// shared file position, so concurrent fetches of one file are safe), else
// by pread into a pooled buffer and a normal write (TLS, --fetch-copy,
// in-memory test files).
func (c *conn) sendFileRange(fr engine.FileRange) error {
	n := int(fr.Len())
	if n == 0 {
		return nil
	}
	if c.l.fetchPath == "sendfile" && fr.Fd() >= 0 {
		if tc, ok := c.nc.(*net.TCPConn); ok {
			return c.sendfile(tc, fr)
		}
	}
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	pos := fr.Pos()
	for n > 0 {
		chunk := buf
		if n < len(chunk) {
			chunk = chunk[:n]
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
		if _, err := c.nc.Write(chunk); err != nil {
			return err
		}
		pos += int64(m)
		n -= m
		c.s.stats.copiedBytes.Add(uint64(m))
	}
	return nil
}

var copyBufPool = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

// sendfile moves bytes file -> socket in the kernel. It cooperates with
// Go's netpoller: on EAGAIN the RawConn.Write callback returns false and
// the runtime parks the goroutine until the socket is writable.
func (c *conn) sendfile(tc *net.TCPConn, fr engine.FileRange) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var (
		fd      = fr.Fd()
		total   = int(fr.Len())
		off     = fr.Pos()
		written int
		sendErr error
	)
	err = rc.Write(func(sock uintptr) bool {
		for written < total {
			o := off + int64(written)
			m, e := unix.Sendfile(int(sock), fd, &o, total-written)
			if m > 0 {
				written += m
				c.s.stats.zeroCopyBytes.Add(uint64(m))
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
				// EOF before the promised length: the response would be
				// short, so fail and close the connection.
				sendErr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("sendfile: %w", sendErr)
	}
	return nil
}

var _ = syscall.EAGAIN
