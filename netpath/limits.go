package netpath

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Resource limits on the connection path (see Config): connection caps
// checked at accept, a deadline on each request body, and a byte budget
// for large frames so that many clients declaring big requests cannot make
// the broker allocate more than QueuedMaxRequestBytes between them.

// smallFrame is the size below which a frame is read without the budget:
// follower fetches, heartbeats and metadata requests must never wait
// behind large produce requests (a produce waiting for acks=all needs the
// followers' fetches to complete).
const smallFrame = 64 << 10

// byteBudget is a counting semaphore over bytes.
type byteBudget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	free  int64
	total int64
}

func newByteBudget(total int64) *byteBudget {
	b := &byteBudget{free: total, total: total}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire takes n bytes, waiting while they are not free, until done is
// closed (false).
func (b *byteBudget) acquire(n int64, done <-chan struct{}) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.total {
		return false
	}
	for b.free < n {
		select {
		case <-done:
			return false
		default:
		}
		// Woken by release or, for a closing connection, by the
		// broadcast in wake.
		b.cond.Wait()
	}
	b.free -= n
	return true
}

func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// wake lets waiters re-check their done channels (a connection closed).
func (b *byteBudget) wake() { b.cond.Broadcast() }

// inUse reports the bytes taken (metrics, tests).
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.free
}

// readBody reads a request body of size bytes. Large bodies take their
// size from the server's budget first (returned as held, to release once
// the response is written) and grow their buffer only as bytes arrive, so
// a client that declares a large frame and sends nothing costs almost no
// memory.
func (c *conn) readBody(size int) (frame []byte, held int64, err error) {
	// A body already in the read buffer needs no deadline (and no timer
	// re-armed for it).
	if t := c.s.cfg.RequestReadTimeout; t > 0 && c.br.Buffered() < size {
		c.readDeadline = time.Now().Add(t)
		c.nc.SetReadDeadline(c.readDeadline)
	}
	if size <= smallFrame {
		frame = make([]byte, size)
		_, err = io.ReadFull(c.br, frame)
		return frame, 0, err
	}
	if !c.s.budget.acquire(int64(size), c.done) {
		return nil, 0, net.ErrClosed
	}
	held = int64(size)
	frame = make([]byte, 0, smallFrame)
	for len(frame) < size {
		if len(frame) == cap(frame) {
			grown := make([]byte, len(frame), min(2*cap(frame), size))
			copy(grown, frame)
			frame = grown
		}
		n, err := c.br.Read(frame[len(frame):min(cap(frame), size)])
		frame = frame[:len(frame)+n]
		if err != nil {
			c.s.budget.release(held)
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, 0, err
		}
	}
	return frame, held, nil
}

// admit applies the connection caps to a new connection from remote. It
// returns a release func, or an error when the connection must be closed.
func (s *Server) admit(remote net.Addr) (func(), error) {
	host, _, err := net.SplitHostPort(remote.String())
	if err != nil {
		host = remote.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if max := s.cfg.MaxConnections; max > 0 && len(s.conns) >= max {
		s.stats.rejectedConns.Add(1)
		return nil, fmt.Errorf("%d connections open (max.connections %d)", len(s.conns), max)
	}
	if max := s.cfg.MaxConnectionsPerIP; max > 0 && s.perIP[host] >= max {
		s.stats.rejectedConns.Add(1)
		return nil, fmt.Errorf("%d connections open from %s (max.connections.per.ip %d)", s.perIP[host], host, max)
	}
	s.perIP[host]++
	return func() {
		s.mu.Lock()
		if s.perIP[host]--; s.perIP[host] <= 0 {
			delete(s.perIP, host)
		}
		s.mu.Unlock()
	}, nil
}

// Bounds on how long a request may be parked, whatever it asks for.
const (
	// defaultProduceWait stands in for a produce timeout_ms <= 0 (the
	// Java client's request.timeout.ms default).
	defaultProduceWait = 30 * time.Second
	// maxRequestWait caps produce timeout_ms and fetch max_wait_ms: no
	// client waits longer for an answer (their request timeouts are
	// 30-60 s), so a larger value would only hold broker resources.
	maxRequestWait = 2 * time.Minute
)

// requestDeadline is when a request that arrived at arrived and asks to
// wait up to ms milliseconds must be answered: ms <= 0 waits ifZero, and
// no request waits more than maxRequestWait.
func requestDeadline(arrived time.Time, ms int32, ifZero time.Duration) time.Time {
	d := time.Duration(ms) * time.Millisecond
	if d <= 0 {
		d = ifZero
	}
	return arrived.Add(min(d, maxRequestWait))
}
