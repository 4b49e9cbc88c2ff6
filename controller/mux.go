package controller

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/internal/sockio"
)

// First byte a dialer writes on a controller connection; it selects the
// protocol so raft and the controller RPC share one port.
const (
	protoRaft byte = 'R'
	protoRPC  byte = 'C'
)

// muxHandshakeTimeout bounds how long an accepted connection may take to
// send its protocol byte, so idle sockets cannot pile up.
const muxHandshakeTimeout = 10 * time.Second

var errMuxClosed = errors.New("controller: listener closed")

// mux accepts on the controller listener and routes each connection by its
// first byte: raft's connections to the stream layer, RPC connections to
// serveRPC.
type mux struct {
	ln       net.Listener
	raftConn chan net.Conn
	serveRPC func(net.Conn)
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func newMux(ln net.Listener, serveRPC func(net.Conn)) *mux {
	m := &mux{ln: ln, raftConn: make(chan net.Conn), serveRPC: serveRPC, done: make(chan struct{})}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		// Raw socket I/O: see internal/rawio (sysmon wake-ups).
		go m.route(sockio.Wrap(c))
	}
}

func (m *mux) route(c net.Conn) {
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(muxHandshakeTimeout))
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	switch b[0] {
	case protoRaft:
		select {
		case m.raftConn <- c:
		case <-m.done:
			c.Close()
		}
	case protoRPC:
		m.serveRPC(c)
	default:
		c.Close()
	}
}

func (m *mux) close() {
	m.once.Do(func() {
		close(m.done)
		m.ln.Close()
	})
	m.wg.Wait()
}

// streamLayer is raft's view of the mux (raft.StreamLayer).
type streamLayer struct {
	m *mux
	// advertise is the address peers dial, which may differ from the
	// listener's when it listens on all interfaces.
	advertise net.Addr
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftConn:
		return c, nil
	case <-s.m.done:
		return nil, errMuxClosed
	}
}

// Close is called by raft's transport on shutdown; the Node closes the
// shared listener itself, after raft is down.
func (s *streamLayer) Close() error { return nil }

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	c = sockio.Wrap(c)
	if _, err := c.Write([]byte{protoRaft}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type tcpAddr string

func (a tcpAddr) Network() string { return "tcp" }
func (a tcpAddr) String() string  { return string(a) }
