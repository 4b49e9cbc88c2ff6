package loadgen

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The lean client writes Produce requests it framed itself (see
// produceFrame) over one TCP connection per broker per producer. Kafka
// answers requests on a connection in order, so responses are matched to a
// FIFO of in-flight requests.

// framePool bounds the request memory of one producer. When it is empty the
// producer blocks, which the send-delay series then shows.
type framePool struct {
	free  chan *produceFrame
	made  int
	limit int
	size  int
}

func newFramePool(limit, size int) *framePool {
	return &framePool{free: make(chan *produceFrame, limit), limit: limit, size: size}
}

// tryGet returns a free frame, or a new one while under the limit, or nil
// when every frame is out. It is called only by the owning producer
// goroutine.
func (p *framePool) tryGet() *produceFrame {
	select {
	case f := <-p.free:
		return f
	default:
	}
	if p.made < p.limit {
		p.made++
		return &produceFrame{buf: make([]byte, 0, p.size), intended: make([]int64, 0, 1024)}
	}
	return nil
}

func (p *framePool) put(f *produceFrame) { p.free <- f }

// leanConn is one producer's connection to one broker.
type leanConn struct {
	st        *runState
	addr      string // the broker address dialed
	conn      net.Conn
	version   int16
	corr      int32
	sendq     chan *produceFrame
	inflight  chan *request
	pool      *framePool
	dead      atomic.Bool
	deadErr   atomic.Value  // error that killed the connection
	done      chan struct{} // reader finished (or never started, acks=0)
	wdone     chan struct{} // writer finished
	closeOnce sync.Once
	// onFail takes frames that did not get a successful response: the
	// emitter retries them on the current leader when the error is
	// retriable, or counts them as errors. acked counts successful
	// responses per partition (a failing partition is healthy again).
	onFail func(f *produceFrame, err error)
	acked  []atomic.Int64
}

// negotiateProduceVersion asks the broker (ApiVersions v0) for its Produce
// range; we frame v3-v8 (record batch v2, non-flexible).
func negotiateProduceVersion(conn net.Conn, codec Codec) (int16, error) {
	req := make([]byte, 0, 64)
	req = append(req, 0, 0, 0, 0)
	req = binary.BigEndian.AppendUint16(req, 18) // ApiVersions
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint32(req, 0x7fffffff)
	req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
	req = append(req, clientID...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write(req); err != nil {
		return 0, err
	}
	body, err := readFrame(conn, nil)
	if err != nil {
		return 0, fmt.Errorf("api versions: %w", err)
	}
	resp := kmsg.ApiVersionsResponse{Version: 0}
	if len(body) < 4 {
		return 0, fmt.Errorf("api versions: short response")
	}
	if err := resp.ReadFrom(body[4:]); err != nil {
		return 0, fmt.Errorf("api versions: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, fmt.Errorf("api versions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey != 0 {
			continue
		}
		v := min(k.MaxVersion, 8)
		if v < 3 || v < k.MinVersion {
			return 0, fmt.Errorf("broker produce versions %d-%d: lean client needs one of 3-8", k.MinVersion, k.MaxVersion)
		}
		if codec == CodecZstd && v < 7 {
			return 0, fmt.Errorf("broker produce max version %d: zstd needs 7", k.MaxVersion)
		}
		return v, nil
	}
	return 0, fmt.Errorf("broker does not advertise Produce")
}

// readFrame reads one size-prefixed frame into buf (reused when large enough).
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("bad response size %d", n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func dialLean(st *runState, addr string, pool *framePool, acked []atomic.Int64, onFail func(*produceFrame, error)) (*leanConn, error) {
	// TLS and SASL (when configured) come first: a SASL listener refuses
	// everything but ApiVersions and the SASL requests until then.
	conn, err := dialSecure(addr, st.tlsConfig, st.saslMech, st.cfg.Security.SASLUser, 10*time.Second)
	if err != nil {
		return nil, err
	}
	v, err := negotiateProduceVersion(conn, st.cfg.Compression)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	lc := &leanConn{
		st: st, addr: addr, conn: conn, version: v, pool: pool, acked: acked, onFail: onFail,
		sendq:    make(chan *produceFrame, pool.limit),
		inflight: make(chan *request, st.cfg.MaxInFlight),
		done:     make(chan struct{}),
		wdone:    make(chan struct{}),
	}
	go lc.writeLoop()
	if st.cfg.Acks != 0 {
		go lc.readLoop()
	} else {
		close(lc.done)
	}
	return lc, nil
}

// fail hands f to the emitter's failure path; err nil means the
// connection is gone (always retriable).
func (lc *leanConn) fail(f *produceFrame, err error) {
	if err == nil {
		err = lc.deathErr()
	}
	f.failedOn = lc.addr
	lc.onFail(f, err)
}

func (lc *leanConn) markDead(err error) {
	lc.closeOnce.Do(func() {
		lc.deadErr.Store(err)
		lc.dead.Store(true)
		lc.conn.Close()
	})
}

// errConnLost marks failures caused by a broken connection.
var errConnLost = errors.New("connection lost")

func (lc *leanConn) deathErr() error {
	if err, ok := lc.deadErr.Load().(error); ok {
		return fmt.Errorf("%w: %v", errConnLost, err)
	}
	return errConnLost
}

// writeLoop sends queued frames, gathering whatever is queued into one
// writev call and the gathered frames into as few Produce requests as it
// can (request.go), as Kafka clients send one request per broker for many
// partitions.
func (lc *leanConn) writeLoop() {
	defer close(lc.wdone)
	defer func() {
		if lc.st.cfg.Acks != 0 {
			close(lc.inflight)
		}
	}()
	var bufs net.Buffers
	var batch []*produceFrame
	var reqs []*request
	maxBytes := max(lc.st.cfg.BatchBytes, maxRequestBytes)
	for f := range lc.sendq {
		batch = append(batch[:0], f)
	gather:
		for len(batch) < 64 {
			select {
			case g, ok := <-lc.sendq:
				if !ok {
					break gather
				}
				batch = append(batch, g)
			default:
				break gather
			}
		}
		if lc.dead.Load() {
			for _, g := range batch {
				lc.fail(g, nil)
			}
			continue
		}
		reqs = groupFrames(reqs[:0], batch, maxBytes)
		bufs = bufs[:0]
		var err error
		for _, rq := range reqs {
			// The buffers are taken before rq is handed to the reader,
			// which may fail and release it as soon as it has it.
			mark := len(bufs)
			bufs = rq.appendBuffers(bufs)
			if lc.st.cfg.Acks == 0 {
				continue
			}
			select {
			case lc.inflight <- rq:
			default:
				// In-flight limit reached: send what is gathered before
				// rq first, or the responses freeing a slot could never
				// come.
				if err == nil {
					before := bufs[:mark]
					err = lc.write(&before)
				}
				bufs = append(bufs[:0], bufs[mark:]...)
				lc.inflight <- rq
			}
		}
		if err == nil {
			err = lc.write(&bufs)
		}
		if err != nil {
			lc.markDead(fmt.Errorf("write: %w", err))
			if lc.st.cfg.Acks == 0 {
				for _, g := range batch {
					lc.fail(g, nil)
				}
			}
			continue
		}
		if lc.st.cfg.Acks == 0 {
			// Nothing comes back: "ack" latency is time until written.
			now := lc.st.now()
			for _, g := range batch {
				lc.st.ack.recordSince(now, g.intended, lc.st.measureNs)
				lc.st.countAcked(g)
				lc.pool.put(g)
			}
			for _, rq := range reqs {
				rq.release()
			}
		}
	}
}

// write sends bufs with one writev and empties it.
func (lc *leanConn) write(bufs *net.Buffers) error {
	toWrite := *bufs // WriteTo consumes its receiver
	_, err := toWrite.WriteTo(lc.conn)
	*bufs = (*bufs)[:0]
	return err
}

// readLoop matches responses to in-flight requests in order, and each
// partition of a response to its frame.
func (lc *leanConn) readLoop() {
	defer close(lc.done)
	r := bufio.NewReaderSize(lc.conn, 64<<10)
	var buf []byte
	var resp kmsg.ProduceResponse
	failAll := func(rq *request, err error) {
		for _, f := range rq.frames {
			lc.fail(f, err)
		}
		rq.release()
	}
	for rq := range lc.inflight {
		if lc.dead.Load() {
			failAll(rq, nil)
			continue
		}
		body, err := readFrame(r, buf)
		if err != nil {
			lc.markDead(fmt.Errorf("read: %w", err))
			failAll(rq, nil)
			continue
		}
		buf = body
		now := lc.st.now()
		corr := int32(binary.BigEndian.Uint32(body))
		if want := rq.corr(); corr != want {
			lc.markDead(fmt.Errorf("response correlation id %d, expected %d", corr, want))
			failAll(rq, nil)
			continue
		}
		resp.Default()
		resp.Version = lc.version
		if err := resp.ReadFrom(body[4:]); err != nil {
			lc.markDead(fmt.Errorf("produce response: %w", err))
			failAll(rq, nil)
			continue
		}
		for _, f := range rq.frames {
			if err := produceError(&resp, f.partition); err != nil {
				lc.fail(f, err)
				continue
			}
			lc.st.ack.recordSince(now, f.intended, lc.st.measureNs)
			lc.st.countAcked(f)
			lc.acked[f.partition].Add(1)
			lc.pool.put(f)
		}
		rq.release()
	}
}

// produceError is the outcome of partition in a response to a request for
// one topic.
func produceError(resp *kmsg.ProduceResponse, partition int32) error {
	if len(resp.Topics) != 1 {
		return fmt.Errorf("produce response has %d topics, want the one produced to", len(resp.Topics))
	}
	for i := range resp.Topics[0].Partitions {
		p := &resp.Topics[0].Partitions[i]
		if p.Partition != partition {
			continue
		}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			if p.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *p.ErrorMessage)
			}
			return err
		}
		return nil
	}
	return fmt.Errorf("produce response does not echo partition %d", partition)
}

func (s *runState) countAcked(f *produceFrame) {
	n := int64(len(f.intended))
	s.c.acked.Add(n)
	measured := 0
	for _, t := range f.intended {
		if t >= s.measureNs {
			measured++
		}
	}
	s.c.measuredAcked.Add(int64(measured))
	s.c.bytesAcked.Add(int64(measured) * int64(s.cfg.MessageSize))
	s.partAcked[f.partition].Add(int64(measured))
}

// leanEmitter batches one producer's messages per partition.
type leanEmitter struct {
	st        *runState
	conns     []*leanConn // one per partition, shared per broker
	uniq      []*leanConn
	open      []*produceFrame // per partition
	openSince []int64
	pool      *framePool
	head      [valueHeaderLen]byte
	sticky    int32
	version   int16 // Produce version, negotiated with the first broker

	// Retries (leanretry.go). Connections hand failed frames to retryq
	// (any goroutine) and count acks per partition in acked; the rest is
	// the emitter goroutine's.
	byAddr      map[string]*leanConn
	backoff     Backoff
	retryq      chan *produceFrame
	retrying    []*produceFrame
	parts       []partRetry
	acked       []atomic.Int64
	nextRefresh int64 // run clock ns
	refreshing  bool
	refreshed   chan []string // leaders from the refresh in flight (nil: it failed)
	refreshedAt int64         // run clock when the refresh in flight started
	routedAsOf  int64         // run clock when the last applied refresh started
}

// route points every partition at its current leader, dialing brokers
// not connected yet and replacing dead connections.
func (e *leanEmitter) route(leaders []string) {
	for p, addr := range leaders {
		lc := e.byAddr[addr]
		if lc == nil || lc.dead.Load() {
			nlc, err := dialLean(e.st, addr, e.pool, e.acked, e.requeue)
			if err != nil || nlc.version != e.version {
				if err == nil {
					nlc.markDead(fmt.Errorf("%s negotiated produce v%d, frames are v%d", addr, nlc.version, e.version))
					close(nlc.sendq)
				}
				e.conns[p] = nil
				continue
			}
			lc = nlc
			e.byAddr[addr] = lc
			e.uniq = append(e.uniq, lc)
		}
		e.conns[p] = lc
	}
}

// getFrame takes a frame from the pool, waiting while all are out, and
// says whether it waited. The wait keeps re-routing failed frames: they
// are some of the frames out, and only this goroutine re-sends them, so
// blocking on the pool alone would deadlock after a leader dies. The time
// spent here shows up as send delay. It returns nil when the run is
// stopped while it waits (a hung broker must not hold up an interrupt).
func (e *leanEmitter) getFrame() (*produceFrame, bool) {
	for waited := false; ; waited = true {
		if f := e.pool.tryGet(); f != nil {
			return f, waited
		}
		// Wake for the next re-send or deadline, or every refreshEvery.
		now := e.st.now()
		d := min(e.handleRetries(now)-now, refreshEvery)
		wait := time.NewTimer(time.Duration(max(d, int64(time.Millisecond))))
		select {
		case f := <-e.pool.free:
			wait.Stop()
			return f, true
		case <-e.st.stop:
			wait.Stop()
			return nil, true
		case f := <-e.retryq:
			wait.Stop()
			e.failed(f)
			e.handleRetries(e.st.now())
		case <-wait.C:
			e.handleRetries(e.st.now())
		}
	}
}

// outstanding counts frames handed out by the pool and not yet back.
func (e *leanEmitter) outstanding() int { return e.pool.made - len(e.pool.free) }

func newLeanEmitter(st *runState, producer int) (*leanEmitter, error) {
	cfg := st.cfg
	limit := max(cfg.MaxBufferedBytes/cfg.BatchBytes, 2*int(cfg.Partitions)+cfg.MaxInFlight)
	e := &leanEmitter{
		st: st,
		// Buffers start small and grow to what batches need: at low rates
		// batches hold a few messages, and a stalled broker can leave
		// hundreds of them queued.
		pool:      newFramePool(limit, min(cfg.BatchBytes, 16<<10)+cfg.MessageSize+1024),
		open:      make([]*produceFrame, cfg.Partitions),
		openSince: make([]int64, cfg.Partitions),
		conns:     make([]*leanConn, cfg.Partitions),
		sticky:    int32(producer) % cfg.Partitions,
	}
	e.byAddr = map[string]*leanConn{}
	e.backoff = Backoff{Base: cfg.RetryBackoff, Max: cfg.RetryBackoffMax}
	e.retryq = make(chan *produceFrame, limit)
	e.refreshed = make(chan []string, 1)
	e.parts = make([]partRetry, cfg.Partitions)
	e.acked = make([]atomic.Int64, cfg.Partitions)
	for p, addr := range st.leaders {
		lc := e.byAddr[addr]
		if lc == nil {
			var err error
			if lc, err = dialLean(st, addr, e.pool, e.acked, e.requeue); err != nil {
				e.close()
				return nil, err
			}
			e.byAddr[addr] = lc
			e.uniq = append(e.uniq, lc)
		}
		e.conns[p] = lc
	}
	e.version = e.uniq[0].version
	return e, nil
}

func (e *leanEmitter) add(i uint64, intended, now, key int64) addResult {
	res := added
	part := e.sticky
	var k []byte
	if key >= 0 {
		part = int32(key % int64(len(e.open)))
		k = e.st.keys[key]
	}
	f := e.open[part]
	if f == nil {
		var waited bool
		if f, waited = e.getFrame(); f == nil {
			return notAdded
		}
		if waited {
			res, now = addedAfterWait, e.st.now() // linger runs from the frame's opening
		}
		f.reset(e.version, e.st.cfg.Acks, int32(e.st.cfg.RequestTimeout/time.Millisecond),
			e.st.cfg.Topic, part, e.st.cfg.Compression)
		e.open[part] = f
		e.openSince[part] = now
	}
	e.st.valueHead(e.head[:], intended)
	f.appendRecord((e.st.t0WallNs+intended)/1e6, k, e.head[:], e.st.fillerFor(i), intended)
	if f.size() >= e.st.cfg.BatchBytes && e.flush(part) {
		res = addedAfterWait
	}
	return res
}

// flush sends the open frame of part and says whether it had to wait for
// room in the connection's send queue.
func (e *leanEmitter) flush(part int32) (waited bool) {
	f := e.open[part]
	if f == nil {
		return false
	}
	e.open[part] = nil
	lc := e.conns[part]
	var corr int32
	if lc != nil {
		lc.corr++
		corr = lc.corr
	}
	if err := f.finish(corr); err != nil {
		e.st.c.fail(len(f.intended), err)
		e.pool.put(f)
		return false
	}
	if lc == nil || e.parts[part].fails > 0 {
		// No live leader connection right now, or the partition is
		// failing: wait for a route, or for the partition's probe.
		e.retrying = append(e.retrying, f)
	} else {
		select {
		case lc.sendq <- f:
		default:
			waited = true
			lc.sendq <- f
		}
	}
	if part == e.sticky {
		e.sticky = (e.sticky + 1) % int32(len(e.open))
	}
	return waited
}

func (e *leanEmitter) tick(now int64) int64 {
	next := e.handleRetries(now)
	linger := int64(e.st.cfg.Linger)
	for p, f := range e.open {
		if f == nil {
			continue
		}
		if deadline := e.openSince[p] + linger; deadline <= now {
			e.flush(int32(p))
		} else if deadline < next {
			next = deadline
		}
	}
	return next
}

func (e *leanEmitter) finish() {
	for p := range e.open {
		e.flush(int32(p))
	}
}

// wait keeps retrying failed frames until every frame came back or ctx
// ended (drain deadline, or an interrupt cutting the drain short); then it
// closes the connections, counting what never came back as errors.
func (e *leanEmitter) wait(ctx context.Context) {
	for e.outstanding() > 0 && ctx.Err() == nil {
		e.handleRetries(e.st.now())
		time.Sleep(5 * time.Millisecond)
	}
	e.handleRetries(e.st.now())
	for _, f := range e.retrying {
		e.st.c.fail(len(f.intended), fmt.Errorf("still waiting for a leader or a retry at the end of the drain (last error: %v)", f.lastErr))
		e.pool.put(f)
	}
	e.retrying = nil
	for _, lc := range e.uniq {
		close(lc.sendq)
	}
	for _, lc := range e.uniq {
		for _, ch := range []chan struct{}{lc.wdone, lc.done} {
			select {
			case <-ch:
				continue
			default:
			}
			select {
			case <-ch:
			case <-ctx.Done():
				lc.markDead(context.Cause(ctx))
				<-ch
			}
		}
	}
	// Frames failed while the connections closed.
	for drained := false; !drained; {
		select {
		case f := <-e.retryq:
			e.st.c.fail(len(f.intended), fmt.Errorf("failed at the end of the drain: %w", f.lastErr))
		default:
			drained = true
		}
	}
	e.close()
}

func (e *leanEmitter) close() {
	for _, lc := range e.uniq {
		lc.conn.Close()
	}
}
