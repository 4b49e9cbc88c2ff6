// Package peer is the broker's one client for talking to other brokers:
// dial, SASL (SCRAM-SHA-512 as the inter-broker user when the plaintext
// listener requires it), request framing, correlation checks and response
// header tags live here once. Its API is in the broker's terms: Fetch is
// replication.FetchClient (the follower fetcher), WriteMarkers sends one
// transaction's markers to a partition leader (the marker writer). Only
// this package and netpath speak kmsg; callers never see protocol codes.
package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/sockio"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures the client.
type Config struct {
	// Image returns the current metadata image: brokers are reached at the
	// plaintext endpoint it advertises for them.
	Image func() *metadata.Image
	// SASL makes every connection authenticate as User/Password with
	// SCRAM-SHA-512 before its first request (the plaintext listener
	// requires SASL and an inter-broker user is configured).
	SASL           bool
	User, Password string
	// DisableFetchSessions makes follower fetches full requests without a
	// KIP-227 session (the behaviour before sessions; a switch in case a
	// leader's session handling misbehaves).
	DisableFetchSessions bool
	// DisableBufferReuse gives every fetch response fresh memory instead
	// of a buffer handed back by an earlier response's Release (for a
	// storage engine that keeps appended bytes past their Pending).
	DisableBufferReuse bool
}

// maxIdlePerBroker bounds the idle connections kept per broker.
const maxIdlePerBroker = 4

// Client holds a small pool of connections per broker. A connection is
// used by one request at a time: the follower fetcher of a leader takes
// one, each concurrent marker write another.
type Client struct {
	cfg Config

	mu       sync.Mutex
	idle     map[int32][]*conn
	closed   bool
	sessions map[int32]*fetchSession // by leader (fetch_session.go)
	// addrs are the brokers' addresses in addrImg (addrOf).
	addrImg *metadata.Image
	addrs   map[int32]string

	// bufs holds fetch response buffers handed back by Release, for the
	// next response (fetchBuf).
	bufs chan []byte
}

// New returns a client; Close releases its connections.
func New(cfg Config) *Client {
	return &Client{cfg: cfg, idle: make(map[int32][]*conn), sessions: make(map[int32]*fetchSession),
		addrs: make(map[int32]string), bufs: make(chan []byte, maxPooledBufs)}
}

// Close closes the idle connections; connections in use close when their
// request ends.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range c.idle {
		for _, cn := range cs {
			cn.close()
		}
	}
	c.idle, c.closed = nil, true
}

// conn is one broker-to-broker connection.
type conn struct {
	addr string
	nc   net.Conn
	r    *bufio.Reader
	corr int32
	wbuf []byte // request encoding, reused (bounded by maxKeptWriteBuf)
	// cut: a cancellation moved (or is about to move) the deadline;
	// even after a complete exchange the connection is not pooled, or
	// that late deadline would fail the next request on it.
	cut bool
	// watched is the Done channel of the context whose cancellation
	// cuts the connection (watch); stopWatch unregisters that hook and
	// fired says it ran.
	watched   <-chan struct{}
	stopWatch func() bool
	fired     atomic.Bool
	// deadline is the socket deadline last set (setCallDeadline).
	deadline time.Time
}

// maxKeptWriteBuf bounds the request buffer a connection keeps.
const maxKeptWriteBuf = 1 << 20

// addrOf returns the plaintext address broker id advertises. The answer
// is kept per metadata image (an image never changes once published):
// building it from the image on every fetch round cost a sorted copy of
// the broker list and the address string.
func (c *Client) addrOf(id int32) (string, error) {
	img := c.cfg.Image()
	c.mu.Lock()
	if c.addrImg != img {
		c.addrImg = img
		clear(c.addrs)
	}
	addr, ok := c.addrs[id]
	c.mu.Unlock()
	if ok {
		return addr, nil
	}
	if b, ok := img.Broker(id); ok {
		for _, ep := range b.Endpoints {
			if ep.Listener == proto.EndpointPlaintext {
				addr = net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
				c.mu.Lock()
				if c.addrImg == img {
					c.addrs[id] = addr
				}
				c.mu.Unlock()
				return addr, nil
			}
		}
	}
	return "", fmt.Errorf("broker %d has no %s endpoint in the metadata image", id, proto.EndpointPlaintext)
}

// roundTrip sends req to broker id with the formatter's client id and
// returns the response body after its header, at most maxSize bytes, read
// into memory from alloc (nil: a new slice). A failed exchange closes its
// connection; the next one redials.
func (c *Client) roundTrip(ctx context.Context, id int32, f *kmsg.RequestFormatter, req kmsg.Request, maxSize int32, alloc func(int) []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled before anything was sent
	}
	addr, err := c.addrOf(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	var cn *conn
	if n := len(c.idle[id]); n > 0 {
		cn = c.idle[id][n-1]
		c.idle[id] = c.idle[id][:n-1]
	}
	c.mu.Unlock()
	if cn != nil && (cn.addr != addr || !cn.watch(ctx)) {
		cn.close() // the broker moved, or an earlier call's cancellation cut it
		cn = nil
	}
	if cn == nil {
		if cn, err = c.dial(ctx, addr); err != nil {
			return nil, err
		}
	}
	body, err := cn.roundTrip(ctx, f, req, maxSize, alloc)
	if err != nil {
		cn.close()
		return nil, err
	}
	c.mu.Lock()
	if !c.closed && !cn.cut && len(c.idle[id]) < maxIdlePerBroker {
		c.idle[id] = append(c.idle[id], cn)
		cn = nil
	}
	c.mu.Unlock()
	if cn != nil {
		cn.close()
	}
	return body, nil
}

// dial opens a connection to addr and, when configured, authenticates it.
func (c *Client) dial(ctx context.Context, addr string) (*conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	nc = sockio.Wrap(nc)
	cn := &conn{addr: addr, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
	if !c.cfg.SASL {
		return cn, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.authenticate(ctx, cn, deadline); err != nil {
		cn.close()
		return nil, fmt.Errorf("authenticating to broker %s as %s: %w", addr, c.cfg.User, err)
	}
	nc.SetDeadline(time.Time{})
	cn.deadline = time.Time{}
	return cn, nil
}

// callDeadlineSlack is how far past a call's deadline the socket's own
// deadline may lie. The socket deadline is only a backstop: the context's
// AfterFunc cuts the call when its context ends. Moving it on every call
// re-armed a runtime timer per fetch round, and an earlier timer wakes the
// netpoller (a thread wake-up per round); with the slack it moves once
// per slack.
const callDeadlineSlack = 5 * time.Second

// setCallDeadline makes sure the socket deadline lies no earlier than
// ctx's deadline and at most callDeadlineSlack (twice, when it moves)
// after it; without a deadline in ctx, none.
func (cn *conn) setCallDeadline(ctx context.Context) {
	d, ok := ctx.Deadline()
	if !ok {
		if !cn.deadline.IsZero() {
			cn.deadline = time.Time{}
			cn.nc.SetDeadline(cn.deadline)
		}
		return
	}
	if !cn.deadline.IsZero() && !cn.deadline.Before(d) && cn.deadline.Sub(d) <= 2*callDeadlineSlack {
		return
	}
	cn.deadline = d.Add(callDeadlineSlack)
	cn.nc.SetDeadline(cn.deadline)
}

// errConnCut: a pooled connection was cut by the cancellation of the
// context of an earlier call; nothing was sent on it.
var errConnCut = errors.New("connection cut by a cancelled call")

// watch makes the cancellation of ctx cut the call in flight on cn (its
// socket deadline moves to now). A fetcher's hook stays registered across
// its rounds, which share one Done channel: registering one per round
// (context.AfterFunc and its removal) allocated and locked the parent
// context twice per fetch round. It reports false when the hook of an
// earlier context has run or is running: the connection must not be used
// (Client.roundTrip asks before it reuses a pooled one).
func (cn *conn) watch(ctx context.Context) bool {
	done := ctx.Done()
	if done != nil && done == cn.watched {
		return !cn.fired.Load()
	}
	if !cn.unwatch() {
		return false
	}
	if done == nil {
		return true // never cancelled
	}
	cn.watched = done
	cn.stopWatch = context.AfterFunc(ctx, func() {
		cn.fired.Store(true)
		cn.nc.SetDeadline(time.Now())
	})
	return true
}

// unwatch removes the cancellation hook, reporting false when it had
// already started.
func (cn *conn) unwatch() bool {
	ok := true
	if cn.stopWatch != nil {
		ok = cn.stopWatch()
	}
	cn.watched, cn.stopWatch = nil, nil
	return ok && !cn.fired.Load()
}

// close closes the connection and drops its cancellation hook.
func (cn *conn) close() {
	cn.unwatch()
	cn.nc.Close()
}

// roundTrip writes req and reads its response: the size is bounded by
// maxSize, the correlation id checked, and flexible header tags skipped.
// The body is read into alloc(size) when alloc is set.
func (cn *conn) roundTrip(ctx context.Context, f *kmsg.RequestFormatter, req kmsg.Request, maxSize int32, alloc func(int) []byte) ([]byte, error) {
	cn.setCallDeadline(ctx)
	if !cn.watch(ctx) {
		cn.cut = true
		return nil, errConnCut
	}
	defer func() {
		// A fetch's context (socketDeadlineCtx, which Fetch always
		// makes) is the fetcher's, shared by its rounds: its hook stays
		// for the next round. Any other call's context ends with the call
		// (its caller cancels it), so its hook goes now.
		if _, rounds := ctx.(*socketDeadlineCtx); !rounds && !cn.unwatch() || cn.fired.Load() {
			cn.cut = true
		}
	}()
	cn.corr++
	cn.wbuf = f.AppendRequest(cn.wbuf[:0], req, cn.corr)
	var hdr [8]byte
	if sc, ok := cn.nc.(*sockio.Conn); ok && cn.r.Buffered() == 0 {
		// The answer's first read sends the request: it then parks at
		// once instead of first finding the socket empty.
		sc.SendWithNextRead(cn.wbuf)
	} else if _, err := cn.nc.Write(cn.wbuf); err != nil {
		return nil, err
	}
	_, err := io.ReadFull(cn.r, hdr[:])
	if cap(cn.wbuf) > maxKeptWriteBuf {
		cn.wbuf = nil
	}
	if err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != cn.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, cn.corr)
	}
	if size < 4 || size > maxSize {
		return nil, fmt.Errorf("response size %d", size)
	}
	var buf []byte
	if alloc != nil {
		buf = alloc(int(size - 4))
	} else {
		buf = make([]byte, size-4)
	}
	if _, err := io.ReadFull(cn.r, buf); err != nil {
		return nil, err
	}
	// ApiVersions answers with header v0 whatever its version; nothing
	// here sends it.
	if req.IsFlexible() {
		return proto.SkipTags(buf)
	}
	return buf, nil
}
