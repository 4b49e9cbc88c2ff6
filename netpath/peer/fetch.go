package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Follower fetches are Kafka Fetch v12 (replica id set, LastFetchedEpoch
// and DivergingEpoch carried) to the leader's plaintext listener, as the
// metadata image advertises it. Each leader has one Fetcher goroutine, so
// one pooled connection per leader carries them. Unless
// Config.DisableFetchSessions, they run in a KIP-227 incremental fetch
// session per leader (fetch_session.go).

var replicaFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("ringlog-replica-fetcher"))

// maxFetchResponse bounds a replica fetch response.
const maxFetchResponse = 256 << 20

// Response buffers handed back by Release are kept for later responses:
// at most maxPooledBufs of them (one per leader followed is the steady
// state), none larger than maxPooledBuf.
const (
	maxPooledBufs = 8
	maxPooledBuf  = 32 << 20
	minFetchBuf   = 64 << 10
)

var _ replication.FetchClient = (*Client)(nil)

// fetchBuf returns a buffer of n bytes, a pooled one when it is big
// enough. Capacities are powers of two from minFetchBuf, so a buffer
// settles at the size of the largest recent responses.
func (c *Client) fetchBuf(n int) []byte {
	select {
	case b := <-c.bufs:
		if cap(b) >= n {
			return b[:n]
		}
	default:
	}
	size := minFetchBuf
	for size < n {
		size <<= 1
	}
	return make([]byte, n, size)
}

// putFetchBuf keeps b for a later response, unless it is too large or
// the pool is full.
func (c *Client) putFetchBuf(b []byte) {
	if cap(b) > maxPooledBuf || c.cfg.DisableBufferReuse {
		return
	}
	select {
	case c.bufs <- b[:0]:
	default:
	}
}

// Fetch implements replication.FetchClient. The Records of the answer
// alias one response buffer; its Release hands that buffer back. A
// session the leader no longer knows is restarted with a full request
// within this call, so the fetcher sees no error for it.
func (c *Client) Fetch(ctx context.Context, leaderID int32, req *replication.FetchRequest) (*replication.FetchResponse, error) {
	sess := c.takeSession(leaderID)
	defer c.returnSession(leaderID, sess)
	var sc *fetchScratch
	if sess != nil {
		sc = &sess.sc
	} else {
		sc = new(fetchScratch) // outside a session: nothing to reuse
	}
	ctx = sc.withSocketDeadline(ctx, time.Now().Add(req.MaxWait+10*time.Second))
	for attempt := 0; ; attempt++ {
		resp, err := c.fetchOnce(ctx, leaderID, req, sess, sc)
		if err == nil {
			return resp, nil
		}
		sess.reset()
		if attempt > 0 || !errors.Is(err, errSessionLost) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// fetchScratch is what a fetch round reuses from the one before: the
// request and response codec values, whose slices keep their capacity,
// the context, and the answer handed to the fetcher once it is released.
// A session owns one, since its rounds run one at a time (takeSession); a
// fetch outside a session makes its own. Each round allocated about eight
// objects of these on every follower, for every acknowledged message
// (BENCHMARKS.md section 35).
type fetchScratch struct {
	dctx  socketDeadlineCtx
	kr    kmsg.FetchRequest
	kresp kmsg.FetchResponse
	// spare is an answer its fetcher released: Release runs on the
	// fetcher's goroutine after Fetch returned, so it is handed over
	// atomically.
	spare atomic.Pointer[fetchAnswer]
}

// fetchAnswer is a replication.FetchResponse with what its Release needs,
// bound once: a closure per round cost an allocation.
type fetchAnswer struct {
	resp replication.FetchResponse
	c    *Client
	sc   *fetchScratch
	buf  []byte
	// allocFn is alloc, bound once.
	allocFn func(int) []byte
}

func (a *fetchAnswer) release() {
	if a.buf != nil {
		a.c.putFetchBuf(a.buf)
		a.buf = nil
	}
	clear(a.resp.Partitions) // drop the references into the buffer
	a.resp.Partitions = a.resp.Partitions[:0]
	a.sc.spare.Store(a)
}

// answer returns a released answer to fill, or a new one.
func (sc *fetchScratch) answer(c *Client) *fetchAnswer {
	if a := sc.spare.Swap(nil); a != nil {
		return a
	}
	a := &fetchAnswer{c: c, sc: sc}
	a.resp.Release = a.release
	a.allocFn = a.alloc
	return a
}

// request returns the reused request, reset to a new one's defaults.
func (sc *fetchScratch) request() *kmsg.FetchRequest {
	kr := &sc.kr
	topics, forgotten := kr.Topics[:0], kr.ForgottenTopics[:0]
	*kr = kmsg.FetchRequest{}
	kr.Default()
	kr.Topics, kr.ForgottenTopics = topics, forgotten
	return kr
}

// addTopic appends a topic to kr, reusing the partition slice an earlier
// round left in that slot, and returns its index.
func addTopic(kr *kmsg.FetchRequest, topic string, id [16]byte) int {
	i := len(kr.Topics)
	if i < cap(kr.Topics) {
		kr.Topics = kr.Topics[:i+1]
		parts := kr.Topics[i].Partitions[:0]
		kr.Topics[i] = kmsg.NewFetchRequestTopic()
		kr.Topics[i].Partitions = parts
	} else {
		kr.Topics = append(kr.Topics, kmsg.NewFetchRequestTopic())
	}
	kr.Topics[i].Topic, kr.Topics[i].TopicID = topic, id
	return i
}

// socketDeadlineCtx is ctx with a deadline that only the socket enforces
// (conn.setCallDeadline, moved lazily): a fetch round then arms no
// runtime timer of its own. context.WithTimeout armed one per round, and
// a timer earlier than the others wakes the netpoller's thread. Past the
// deadline the call fails with the socket's timeout; cancelling ctx still
// ends it at once.
type socketDeadlineCtx struct {
	context.Context
	deadline time.Time
}

// withSocketDeadline wraps ctx always (an earlier deadline of ctx's own
// wins): the type marks a fetch's context for conn.roundTrip. The wrapper
// is sc's, so a round allocates none.
func (sc *fetchScratch) withSocketDeadline(ctx context.Context, d time.Time) context.Context {
	if pd, ok := ctx.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	sc.dctx = socketDeadlineCtx{ctx, d}
	return &sc.dctx
}

func (c *socketDeadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// errSessionLost marks the session errors a full request recovers from.
var errSessionLost = errors.New("fetch session lost")

// fetchOnce sends one request, built from req and sess (nil: no session),
// with sc's reused values.
func (c *Client) fetchOnce(ctx context.Context, leaderID int32, req *replication.FetchRequest, sess *fetchSession, sc *fetchScratch) (*replication.FetchResponse, error) {
	kr := sc.request()
	kr.Version = 12
	kr.ReplicaID = req.ReplicaID
	kr.MaxWaitMillis = int32(req.MaxWait / time.Millisecond)
	kr.MinBytes = req.MinBytes
	kr.MaxBytes = req.MaxBytes
	kr.SessionID, kr.SessionEpoch = 0, -1 // full, no session
	send := req.Partitions
	if sess != nil {
		send = sess.build(kr, req.Partitions)
	}
	var byTopic topicIndex
	for _, p := range send {
		i, ok := byTopic.find(p.Topic)
		if !ok {
			i = addTopic(kr, p.Topic, p.TopicID)
			byTopic.add(p.Topic, i)
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p.Partition
		fp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
		fp.FetchOffset = p.FetchOffset
		fp.LastFetchedEpoch = p.LastFetchedEpoch
		fp.LogStartOffset = p.LogStartOffset
		fp.PartitionMaxBytes = p.MaxBytes
		kr.Topics[i].Partitions = append(kr.Topics[i].Partitions, fp)
	}
	a := sc.answer(c)
	body, err := c.roundTrip(ctx, leaderID, replicaFormatter, kr, maxFetchResponse, a.allocFn)
	if err != nil {
		// The exchange failed: nothing reads the buffer (the connection
		// is closed), so it can serve the next response.
		a.release()
		return nil, err
	}
	// Unsafe: the response's strings alias body, which is reused once
	// released. The only strings that leave this function are topic
	// names, and those are the request's own (or a copy).
	kresp := &sc.kresp
	kresp.Version = 12
	if err := kresp.UnsafeReadFrom(body); err != nil {
		a.release()
		return nil, fmt.Errorf("decoding fetch response from broker %d: %w", leaderID, err)
	}
	if kresp.ErrorCode != 0 {
		a.release()
		err := fmt.Errorf("fetch from broker %d: %w", leaderID, kerr.ErrorForCode(kresp.ErrorCode))
		if sess != nil && (kresp.ErrorCode == kerr.FetchSessionIDNotFound.Code || kresp.ErrorCode == kerr.InvalidFetchSessionEpoch.Code) {
			err = fmt.Errorf("%w: %w", errSessionLost, err)
		}
		return nil, err
	}
	out := &a.resp
	var ids topicIndex // topic -> index of one of its partitions in req
	for k, p := range req.Partitions {
		if _, ok := ids.find(p.Topic); !ok {
			ids.add(p.Topic, k)
		}
	}
	for _, t := range kresp.Topics {
		var id [16]byte
		var topic string
		if k, ok := ids.find(t.Topic); ok {
			id, topic = req.Partitions[k].TopicID, req.Partitions[k].Topic
		} else {
			topic = strings.Clone(t.Topic) // not asked for: the fetcher skips it
		}
		for _, p := range t.Partitions {
			r := replication.FetchPartitionResponse{
				TopicPartition: replication.TopicPartition{Topic: topic, TopicID: id, Partition: p.Partition},
				Err:            fetchCodeErr(p.ErrorCode),
				HighWatermark:  p.HighWatermark,
				LogStartOffset: p.LogStartOffset,
				Records:        p.RecordBatches,
			}
			if p.DivergingEpoch.Epoch >= 0 && p.DivergingEpoch.EndOffset >= 0 {
				r.DivergingEpoch = &replication.EpochEndOffset{Epoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset}
			}
			out.Partitions = append(out.Partitions, r)
		}
	}
	if sess != nil {
		if out.Partitions, err = sess.answered(kresp.SessionID, req.Partitions, out.Partitions); err != nil {
			a.release()
			return nil, fmt.Errorf("fetch from broker %d: %w: %w", leaderID, errSessionLost, err)
		}
	}
	return out, nil
}

// alloc is roundTrip's buffer source for the response body.
func (a *fetchAnswer) alloc(n int) []byte {
	a.buf = a.c.fetchBuf(n)
	return a.buf
}

// fetchCodeErr maps a partition error code of a fetch response to
// replication's errors, which the Fetcher acts on.
func fetchCodeErr(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotLeaderForPartition.Code:
		return replication.ErrNotLeaderOrFollower
	case kerr.FencedLeaderEpoch.Code:
		return replication.ErrFencedLeaderEpoch
	case kerr.UnknownLeaderEpoch.Code:
		return replication.ErrUnknownLeaderEpoch
	case kerr.OffsetOutOfRange.Code:
		return replication.ErrOffsetOutOfRange
	case kerr.UnknownTopicOrPartition.Code:
		return replication.ErrUnknownTopicOrPartition
	case kerr.KafkaStorageError.Code:
		return replication.ErrStorage
	case kerr.OffsetMovedToTieredStorage.Code:
		return replication.ErrOffsetMovedToTieredStorage
	}
	return kerr.ErrorForCode(code)
}

// topicIndex maps topic names to indexes for one request. A follower
// fetches few topics from a leader, so the first few are found by a scan
// and a map is made only past them: a map per round cost its allocation
// and a string hash per partition.
type topicIndex struct {
	names [4]string
	idx   [4]int
	n     int
	more  map[string]int
}

func (x *topicIndex) find(topic string) (int, bool) {
	for i := range x.n {
		if x.names[i] == topic {
			return x.idx[i], true
		}
	}
	i, ok := x.more[topic]
	return i, ok
}

func (x *topicIndex) add(topic string, i int) {
	if x.n < len(x.names) {
		x.names[x.n], x.idx[x.n] = topic, i
		x.n++
		return
	}
	if x.more == nil {
		x.more = make(map[string]int)
	}
	x.more[topic] = i
}
