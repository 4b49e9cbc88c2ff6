package netpath

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ringlog/ringlog/internal/records"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestHeader is the Kafka request header (v0-v2) minus tagged fields.
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// request is one decoded request with its connection.
type request struct {
	hdr  requestHeader
	kreq kmsg.Request
	conn *conn
	// parked is the time resolve waited on others (appends, watermarks,
	// a long poll): not charged to the request quota (request_quota.go).
	// Only resolve (on the writer, or the reader: answerInline) adds to it.
	parked time.Duration
}

// resolveTimer returns the connection's timer, set to fire at deadline.
// Replies resolve one at a time on a connection (on the writer, or on the
// reader through answerInline while the writer has none queued), so one
// timer serves them all, stopped by each before the next: a timer per
// produce request cost two allocations on the leader for every message.
func (c *conn) resolveTimer(deadline time.Time) *time.Timer {
	if c.timer == nil {
		c.timer = time.NewTimer(time.Until(deadline))
	} else {
		c.timer.Reset(time.Until(deadline))
	}
	return c.timer
}

// park adds the time since t to what the request spent parked.
func (r *request) park(t time.Time) { r.parked += time.Since(t) }

// reply is what a handler returns. Handlers run on the connection's reader
// goroutine in request order, so work that must keep that order (appends)
// happens before they return; resolve then runs on the writer goroutine, in
// the same order, and may wait (for durability, for a long-poll fetch)
// without blocking the reading of pipelined requests. A reply with nothing
// queued before it and no request read ahead behind it the reader may
// resolve itself (answerInline).
type reply struct {
	// noResponse is set for acks=0 produce: nothing is written back.
	noResponse bool
	// closeAfter ends the connection once this reply is written (a
	// failed authentication): no further request is read.
	closeAfter bool
	// resolve produces the response. done is closed when the connection
	// is going away; resolve must then return promptly (its response is
	// released, not sent).
	resolve func(done <-chan struct{}) *response
	// produced is a produce request's records as the handler framed them
	// (indexed like its topics and partitions), so the metrics count
	// records from that view instead of walking the batches again.
	produced [][]records.Set
}

// immediate wraps an already built response.
func immediate(msg kmsg.Response) reply {
	return reply{resolve: func(<-chan struct{}) *response { return &response{msg: msg} }}
}

type pendingReply struct {
	hdr   requestHeader
	reply reply
	// req and start are for metrics: the decoded request (responses are
	// accounted against it) and when its frame had been read.
	req   kmsg.Request
	start time.Time
	// r and handled are for the request quota: the request (its parked
	// time) and how long reading it to its handler's return took.
	r       *request
	handled time.Duration
	// held is the request's share of the server's byte budget, released
	// once its response is written (limits.go).
	held int64
}

// conn is one client connection: a reader goroutine that reads ahead and
// dispatches, and a writer goroutine that sends responses in request order
// (some of which the reader answers itself: answerInline).
type conn struct {
	s       *Server
	l       *listener
	nc      net.Conn
	br      *bufio.Reader
	pending chan pendingReply
	done    chan struct{}
	once    sync.Once
	head    [9]byte     // writeResponse's response header
	timer   *time.Timer // resolveTimer's
	// quietUntilClose, when non-zero, means the server is draining: the
	// connection ends once no new request has arrived for this long.
	quietUntilClose atomic.Int64
	// auth is the SASL state and principal (auth.go).
	auth connAuth
	// mutedUntil (unix ns) holds the reader back while a client quota
	// throttles the connection (quotas.go).
	mutedUntil atomic.Int64
	// iovs is the writer's gather list for writev (writeSendfile), kept
	// between responses.
	iovs [][]byte
	// readDeadline is the read deadline last set (idleDeadline, readBody).
	readDeadline time.Time
	// writeDeadline is the write deadline last set, the writer's like
	// head (writeDeadlineAhead).
	writeDeadline time.Time
	// queued counts replies handed to the writer and not yet answered
	// (answerInline).
	queued atomic.Int32
	// lastClientID is the client id of the last request read (reader
	// goroutine only).
	lastClientID *string
}

func newConn(s *Server, l *listener, nc net.Conn) *conn {
	c := &conn{
		s:       s,
		l:       l,
		nc:      nc,
		br:      bufio.NewReaderSize(nc, 64<<10),
		pending: make(chan pendingReply, s.cfg.MaxInflightPerConn),
		done:    make(chan struct{}),
	}
	c.auth.required = s.saslRequired(l)
	c.auth.ok.Store(!c.auth.required)
	return c
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.s.budget.wake()
		c.nc.Close()
	})
}

func (c *conn) run() {
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := c.handshake(tc); err != nil {
			c.s.stats.tlsHandshakeErrors.Add(1)
			c.s.log.Debug("tls handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
			c.close()
			return
		}
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	close(c.pending)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, errDrained) && !errors.Is(err, errAuthClosed) {
		c.s.log.Debug("connection closed", "remote", c.nc.RemoteAddr().String(), "err", err)
	}
	<-writerDone
	c.close()
}

// handshake completes the TLS handshake before any request is read, so a
// client that stalls or presents no (or an untrusted) certificate under
// mutual TLS is dropped within the handshake timeout.
func (c *conn) handshake(tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.TLSHandshakeTimeout)
	defer cancel()
	return tc.HandshakeContext(ctx)
}

// errAuthClosed ends the reader after a reply that closes the connection
// (failed authentication).
var errAuthClosed = errors.New("connection closed after failed authentication")

// errDrained ends the reader of a connection that stayed quiet while the
// server drained; the writer still answers what was read.
var errDrained = errors.New("connection drained")

// drain makes the connection end once it has had no new request for
// quiet; requests already read are still answered.
func (c *conn) drain(quiet time.Duration) {
	c.quietUntilClose.Store(int64(quiet))
	c.nc.SetReadDeadline(time.Now().Add(quiet))
}

// idleDeadline keeps the read deadline between IdleTimeout and
// IdleTimeout plus an eighth from now, moving it only when it would come
// sooner. Moving it before every request re-armed a runtime timer per
// request, and an earlier timer wakes the netpoller's thread; now it
// moves at most once per eighth of the timeout. A connection idle for
// IdleTimeout is still closed, up to an eighth later.
func (c *conn) idleDeadline() {
	if deadlineAhead(&c.readDeadline, c.s.cfg.IdleTimeout) {
		c.nc.SetReadDeadline(c.readDeadline)
	}
}

// deadlineAhead moves *last to d plus an eighth from now when it would
// come sooner than d from now, and reports whether it moved (the caller
// then sets it on the socket).
func deadlineAhead(last *time.Time, d time.Duration) bool {
	now := time.Now()
	if last.Sub(now) >= d {
		return false
	}
	*last = now.Add(d + d/8)
	return true
}

// errFrame marks protocol violations that close the connection.
var errFrame = errors.New("bad request frame")

func (c *conn) readLoop() error {
	var sizeBuf [4]byte
	for {
		if !c.waitUnmuted() {
			return net.ErrClosed
		}
		if quiet := time.Duration(c.quietUntilClose.Load()); quiet > 0 {
			c.readDeadline = time.Now().Add(quiet)
			c.nc.SetReadDeadline(c.readDeadline)
		} else if c.s.cfg.IdleTimeout > 0 {
			c.idleDeadline()
		}
		if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
			if c.quietUntilClose.Load() > 0 && c.br.Buffered() == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				return errDrained
			}
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		// The length prefix is checked before allocating the body, with
		// a smaller limit before authentication.
		limit := c.s.cfg.MaxRequestBytes
		if !c.auth.authenticated() {
			limit = min(limit, c.s.cfg.Security.PreAuthMaxRequestBytes)
		}
		if size < 8 || size > limit {
			c.s.stats.rejectedFrames.Add(1)
			c.s.metrics.reject(rejectFrameSize)
			return fmt.Errorf("%w: request size %d outside [8, %d]", errFrame, size, limit)
		}
		frame, held, err := c.readBody(int(size))
		if err != nil {
			return err
		}
		// A fetch throttled by the writer mutes the connection after this
		// request may already have been read: it waits here instead, as
		// if it had not been read yet (KIP-219).
		if !c.waitUnmuted() {
			c.s.budget.release(held)
			return net.ErrClosed
		}
		c.l.bytesIn.Add(uint64(size) + 4)
		c.s.stats.requests.Add(1)
		start := time.Now()
		p, err := c.dispatch(frame)
		if err != nil {
			c.s.budget.release(held)
			c.s.stats.rejectedFrames.Add(1)
			return err
		}
		p.start, p.held, p.handled = start, held, time.Since(start)
		if c.answerInline(&p) {
			broken := false
			c.answer(&p, &broken)
			if broken {
				return net.ErrClosed
			}
			continue
		}
		c.queued.Add(1)
		select {
		case c.pending <- p:
		case <-c.done:
			c.queued.Add(-1)
			c.s.budget.release(held)
			return net.ErrClosed
		}
		if p.reply.closeAfter {
			return errAuthClosed
		}
	}
}

// dispatch decodes one frame and runs its handler.
func (c *conn) dispatch(frame []byte) (pendingReply, error) {
	hdr, kreq, err := decodeRequest(frame, c.lastClientID)
	if err != nil {
		c.s.metrics.reject(rejectReason(hdr, frame))
		return pendingReply{}, err
	}
	c.lastClientID = hdr.clientID
	if !preAuthAllowed(hdr.key) && !c.auth.authenticated() {
		c.s.stats.unauthenticated.Add(1)
		return pendingReply{}, fmt.Errorf("%w: %s before SASL authentication", errFrame, kmsg.NameForKey(hdr.key))
	}
	c.s.stats.apiRequests[hdr.key].Add(1)
	if kreq == nil {
		// KIP-511: answer with v0 and our ranges so the client can retry.
		return pendingReply{hdr: hdr, reply: apiVersionsUnsupported()}, nil
	}
	r := &request{hdr: hdr, kreq: kreq, conn: c}
	rep := handlers[hdr.key].handle(c.s, r)
	if hdr.key == produceKey {
		if d := c.s.recordQuota(quotaTypeProduce, c, hdr.clientID, len(frame), time.Now()); d > 0 {
			rep = throttleProduce(rep, hdr.version, d)
			c.mute(d)
		}
	}
	return pendingReply{hdr: hdr, reply: rep, req: kreq, r: r}, nil
}

// decodeRequest turns a frame into a header and a decoded request of a
// served API and version. A nil request with a nil error is an ApiVersions
// request above our range, which gets the KIP-511 answer. Every other
// problem is an error that closes the connection, as Kafka does.
// prev is parseRequestHeader's.
func decodeRequest(frame []byte, prev *string) (requestHeader, kmsg.Request, error) {
	hdr, body, err := parseRequestHeader(frame, prev)
	if err != nil {
		return hdr, nil, err
	}
	h := handlers[hdr.key]
	if h == nil {
		return hdr, nil, fmt.Errorf("%w: unsupported api key %d", errFrame, hdr.key)
	}
	if hdr.key == apiVersionsKey && hdr.version > h.max {
		return hdr, nil, nil
	}
	if hdr.version < h.min || hdr.version > h.max {
		return hdr, nil, fmt.Errorf("%w: api key %d version %d not supported", errFrame, hdr.key, hdr.version)
	}
	kreq := kmsg.RequestForKey(hdr.key)
	kreq.SetVersion(hdr.version)
	if err := kreq.ReadFrom(body); err != nil {
		return hdr, nil, fmt.Errorf("%w: decoding %s v%d: %v", errFrame, kmsg.NameForKey(hdr.key), hdr.version, err)
	}
	return hdr, kreq, nil
}

// parseRequestHeader splits a frame into header and body, checking every
// length against the bytes that remain.
//
// prev is the client id of the connection's previous request, shared when
// this one names the same client: a client sends the same id on every
// request, and a copy per request was two allocations each.
func parseRequestHeader(frame []byte, prev *string) (requestHeader, []byte, error) {
	var h requestHeader
	if len(frame) < 10 {
		return h, nil, fmt.Errorf("%w: header truncated", errFrame)
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if n >= 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id length %d exceeds frame", errFrame, n)
		}
		if prev != nil && *prev == string(rest[:n]) {
			h.clientID = prev
		} else {
			id := string(rest[:n])
			h.clientID = &id
		}
		rest = rest[n:]
	} else if n != -1 {
		return h, nil, fmt.Errorf("%w: bad client id length %d", errFrame, n)
	}
	if !headerIsFlexible(h.key, h.version) {
		return h, rest, nil
	}
	rest, err := proto.SkipTags(rest)
	if err != nil {
		return h, nil, fmt.Errorf("%w: %w", errFrame, err)
	}
	return h, rest, nil
}

// headerIsFlexible reports whether the request uses header v2.
func headerIsFlexible(key, version int16) bool {
	if key < 0 || int(key) >= len(flexibleFrom) || version < 0 {
		return false
	}
	// Versions above the codec's (only ApiVersions gets here, KIP-511;
	// its body is not read) are not flexible.
	f := flexibleFrom[key]
	return f.from >= 0 && version >= f.from && version <= f.max
}

// flexibleFrom holds, per API key, the first version with flexible
// headers (-1: none) and the codec's highest version. headerIsFlexible
// asked the codec on every request, which built a request value each time.
var flexibleFrom = func() []struct{ from, max int16 } {
	var out []struct{ from, max int16 }
	for key := int16(0); key < 1024; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for int(key) >= len(out) {
			out = append(out, struct{ from, max int16 }{-1, -1})
		}
		f := struct{ from, max int16 }{-1, req.MaxVersion()}
		for v := int16(0); v <= f.max; v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				f.from = v
				break
			}
		}
		out[key] = f
	}
	return out
}()

func (c *conn) writeLoop() {
	broken := false
	for p := range c.pending {
		c.answer(&p, &broken)
		c.queued.Add(-1)
	}
}

// answer resolves one reply and writes its response (unless the
// connection broke before: then it is only released). The writer calls it
// in request order; the reader calls it itself for a reply it answers
// inline (answerInline).
func (c *conn) answer(p *pendingReply, broken *bool) {
	m := &c.s.metrics
	if p.reply.noResponse {
		c.chargeRequest(p, 0, nil)
		m.observeLatency(p.hdr.key, p.hdr.version, time.Since(p.start))
		m.responded(c.s, p, nil)
		c.s.budget.release(p.held)
		return
	}
	resolving := &m.resolving[p.hdr.key&maxAPIKey]
	resolving.Add(1)
	resolveStart := time.Now()
	resp := p.reply.resolve(c.done)
	onWriter := time.Since(resolveStart)
	resolving.Add(-1)
	if resp != nil && p.hdr.key == fetchKey {
		if !c.throttleFetch(*p, resp) {
			resp.releaseAll()
			resp = nil
		}
	}
	if resp == nil {
		c.s.budget.release(p.held)
		return
	}
	c.chargeRequest(p, onWriter, resp)
	if !*broken {
		if err := c.writeResponse(p.hdr, resp); err != nil {
			*broken = true
			c.s.log.Debug("write failed, closing connection", "remote", c.nc.RemoteAddr().String(), "err", err)
			c.close()
		} else {
			m.observeLatency(p.hdr.key, p.hdr.version, time.Since(p.start))
			m.responded(c.s, p, resp)
		}
	}
	resp.releaseAll()
	c.s.budget.release(p.held)
}

// answerInline reports whether the reader should resolve and write p
// itself instead of handing it to the writer: a produce that waits for
// its acknowledgement, or a replica's fetch, while nothing is queued for
// the writer and no further request has been read ahead. Handing over
// would wake the writer only for it to wait at once (for durability, the
// high watermark, a long poll), a thread wake-up per request; answered
// here, the reader wakes when the answer is ready and writes it. Reading
// the next request waits meanwhile, as Kafka's own network layer does
// (it mutes a connection until its response is sent); a client that
// pipelines has its next request read ahead already and goes through the
// writer as before. Consumer fetches keep the writer: a long poll must
// not hold back the other requests of a client that shares one
// connection (librdkafka).
func (c *conn) answerInline(p *pendingReply) bool {
	if p.reply.noResponse || p.reply.closeAfter || c.queued.Load() != 0 || c.br.Buffered() != 0 {
		return false
	}
	switch p.hdr.key {
	case produceKey:
		return true
	case fetchKey:
		f, ok := p.req.(*kmsg.FetchRequest)
		return ok && f.ReplicaID >= 0
	}
	return false
}
