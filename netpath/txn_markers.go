package netpath

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file writes transaction markers: the transaction coordinator's
// txn.MarkerWriter, and writeMarker, the leader's side that both the
// writer (for partitions this broker leads) and WriteTxnMarkers (for the
// other brokers' coordinators) use.
//
// A job (one transaction's commit or abort) is split by partition leader,
// as the metadata image has it: partitions led here are appended locally,
// each other leader gets one WriteTxnMarkers request (v1, to its plaintext
// listener, client id markerClientID). Partitions answered with a
// retriable error (leader moved, NOT_ENOUGH_REPLICAS, timeouts, a broker
// unreachable) are tried again with backoff, for as long as this broker
// still owns the transaction's __transaction_state partition at the job's
// coordinator epoch; the job then fails with ErrNotCoordinator and the new
// coordinator resends it from the Prepare record. A partition of a deleted
// topic counts as done. PRODUCER_FENCED / INVALID_PRODUCER_EPOCH /
// TRANSACTION_COORDINATOR_FENCED mean a newer coordinator has acted on the
// partition: this one stops, as Kafka's does.

// markerClientID is the client id of WriteTxnMarkers requests between
// brokers; 27_write_txn_markers.go accepts no other.
const markerClientID = "ringlog-txn-markers"

var markerFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID(markerClientID))

// markerTimeout bounds one marker write on its leader (append, flush, ISR);
// WriteTxnMarkers answers REQUEST_TIMED_OUT after it.
const markerTimeout = 30 * time.Second

// maxIdleMarkerConns bounds the idle connections kept per broker.
const maxIdleMarkerConns = 4

type markerWriter struct {
	s *Server
	b *txnBridge

	mu   sync.Mutex
	idle map[int32][]*markerConn
}

func newMarkerWriter(s *Server, b *txnBridge) *markerWriter {
	w := &markerWriter{s: s, b: b, idle: make(map[int32][]*markerConn)}
	context.AfterFunc(s.ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, cs := range w.idle {
			for _, c := range cs {
				c.c.Close()
			}
		}
		w.idle = nil
	})
	return w
}

// WriteMarkers implements txn.MarkerWriter: the job runs on its own
// goroutine and the Waiter waits for it.
func (w *markerWriter) WriteMarkers(m txn.Markers) txn.Waiter {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = w.run(m)
	}()
	return txn.WaiterFunc(func() error {
		<-done
		return err
	})
}

// markerResult is one partition's outcome in one attempt.
type markerResult struct {
	tp   txn.TopicPartition
	code int16
	err  error
}

func (w *markerWriter) run(m txn.Markers) error {
	s := w.s
	txnPart := txn.PartitionFor(m.TransactionalID, s.cfg.Transactions.TransactionLogPartitions)
	pending := slices.Clone(m.Partitions)
	backoff := 20 * time.Millisecond
	for {
		if e, ok := w.b.log.ownedAt(txnPart); !ok || e != m.CoordinatorEpoch {
			return fmt.Errorf("%w: %s-%d is no longer owned at coordinator epoch %d", txn.ErrNotCoordinator, txn.TransactionTopic, txnPart, m.CoordinatorEpoch)
		}
		img := s.node.MetadataImage()
		byLeader := map[int32][]txn.TopicPartition{}
		var retry []txn.TopicPartition
		for _, tp := range pending {
			t, ok := img.Topic(tp.Topic)
			if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
				continue // deleted: nothing is left to mark
			}
			leader := t.Partitions[tp.Partition].Leader
			if leader == metadata.NoLeader {
				retry = append(retry, tp)
				continue
			}
			byLeader[leader] = append(byLeader[leader], tp)
		}
		var mu sync.Mutex
		var results []markerResult
		var wg sync.WaitGroup
		for leader, tps := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rs []markerResult
				if leader == s.cfg.NodeID {
					rs = w.local(m, tps)
				} else {
					rs = w.remote(leader, m, tps)
				}
				mu.Lock()
				results = append(results, rs...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		var lastErr error
		for _, r := range results {
			switch r.code {
			case 0, kerr.UnsupportedForMessageFormat.Code:
			case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
				s.log.Warn("transaction marker refused; a newer coordinator acted", "transactional_id", m.TransactionalID,
					"topic", r.tp.Topic, "partition", r.tp.Partition, "err", r.err)
				return fmt.Errorf("%w: marker for %s-%d: %w", txn.ErrNotCoordinator, r.tp.Topic, r.tp.Partition, r.err)
			default:
				retry = append(retry, r.tp)
				lastErr = r.err
			}
		}
		if len(retry) == 0 {
			return nil
		}
		pending = retry
		s.log.Debug("retrying transaction markers", "transactional_id", m.TransactionalID, "partitions", len(pending), "err", lastErr)
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
			return fmt.Errorf("%w: shutting down", txn.ErrNotCoordinator)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// local writes the marker to partitions this broker leads.
func (w *markerWriter) local(m txn.Markers, tps []txn.TopicPartition) []markerResult {
	mk := producerstate.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	deadline := time.Now().Add(markerTimeout)
	out := make([]markerResult, len(tps))
	var wg sync.WaitGroup
	for i, tp := range tps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.s.writeMarker(tp.Topic, tp.Partition, mk, deadline, nil)
			out[i] = markerResult{tp: tp, err: err}
			if err != nil {
				out[i].code = replErrorCode(err)
			}
		}()
	}
	wg.Wait()
	return out
}

// remote sends the marker for tps to their leader with WriteTxnMarkers.
// A failed round trip is a retriable error for every partition.
func (w *markerWriter) remote(leader int32, m txn.Markers, tps []txn.TopicPartition) []markerResult {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	km := kmsg.NewWriteTxnMarkersRequestMarker()
	km.ProducerID, km.ProducerEpoch, km.Committed, km.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, tp := range tps {
		if n := len(km.Topics); n == 0 || km.Topics[n-1].Topic != tp.Topic {
			kt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			kt.Topic = tp.Topic
			km.Topics = append(km.Topics, kt)
		}
		kt := &km.Topics[len(km.Topics)-1]
		kt.Partitions = append(kt.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, km)
	all := func(err error) []markerResult {
		out := make([]markerResult, len(tps))
		for i, tp := range tps {
			out[i] = markerResult{tp: tp, code: kerr.NetworkException.Code, err: err}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(w.s.ctx, markerTimeout+10*time.Second)
	defer cancel()
	body, err := w.roundTrip(ctx, leader, req)
	if err != nil {
		return all(fmt.Errorf("WriteTxnMarkers to broker %d: %w", leader, err))
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		return all(fmt.Errorf("decoding WriteTxnMarkers response from broker %d: %w", leader, err))
	}
	codes := map[txn.TopicPartition]int16{}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				codes[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	out := make([]markerResult, len(tps))
	for i, tp := range tps {
		code, ok := codes[tp]
		if !ok {
			code = kerr.UnknownServerError.Code
		}
		out[i] = markerResult{tp: tp, code: code}
		if code != 0 {
			out[i].err = fmt.Errorf("broker %d: %w", leader, kerr.ErrorForCode(code))
		}
	}
	return out
}

// writeMarker appends mk to topic/p, which this broker must lead, and
// returns once it is durable and, on a replicated partition, covered by
// the high watermark (by deadline); on a __consumer_offsets partition the
// group coordinator then completes the transaction's offset commits.
// done, when closed, abandons the wait (the requester went away).
func (s *Server) writeMarker(topic string, p int32, mk producerstate.Marker, deadline time.Time, done <-chan struct{}) error {
	lc := s.leaderPartition(s.node.MetadataImage(), s.node.Fresh(), topic, p, -1)
	if lc.code != 0 {
		return kerr.ErrorForCode(lc.code)
	}
	var lp *leaderPart
	var epoch int32
	if s.repl != nil && lc.part.Replicated() {
		if lp = s.repl.leader(topic, p); lp == nil {
			return replication.ErrNotLeaderOrFollower
		}
		var err error
		if epoch, err = lp.checkProduce(-1); err != nil {
			return err
		}
	}
	w, err := lc.part.AppendMarker(mk)
	if err != nil {
		return err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.Done():
	case <-timer.C:
		return replication.ErrRequestTimedOut
	case <-done:
		return errRequesterGone
	}
	res, err := w.Result()
	if err != nil {
		return err
	}
	if lp != nil {
		purg := s.repl.purg
		// A leadership that ended meanwhile fails the waiter at once.
		pw := s.repl.awaitHW(lp, epoch, res.LastOffset, time.Now(), deadline)
		select {
		case <-pw.Done():
		case <-done:
			purg.Cancel(pw)
			return errRequesterGone
		case <-s.ctx.Done():
			purg.Cancel(pw)
			return engine.ErrClosed
		}
		if err := pw.Err(); err != nil {
			return err
		}
	}
	if topic == group.OffsetsTopic {
		// Not owning the partition is fine: the marker is in the log and
		// whoever loads the partition replays it.
		if err := s.groups.mgr.CompleteTxn(p, mk.ProducerID, mk.Commit); err != nil {
			s.log.Debug("transaction marker on an offsets partition not loaded here", "partition", p, "err", err)
		}
	}
	return nil
}

var errRequesterGone = errors.New("the requester went away")

// markerConn is one broker-to-broker connection for WriteTxnMarkers, used
// by one job at a time (taken from and returned to the writer's pool).
type markerConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func (w *markerWriter) roundTrip(ctx context.Context, leader int32, req kmsg.Request) ([]byte, error) {
	addr, err := (&replicaClient{s: w.s}).addrOf(leader)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	var c *markerConn
	if n := len(w.idle[leader]); n > 0 {
		c = w.idle[leader][n-1]
		w.idle[leader] = w.idle[leader][:n-1]
	}
	w.mu.Unlock()
	if c != nil && c.addr != addr {
		c.c.Close() // the broker moved
		c = nil
	}
	if c == nil {
		// dialBroker authenticates as the inter-broker user when the
		// plaintext listener requires SASL.
		nc, br, err := w.s.dialBroker(ctx, addr)
		if err != nil {
			return nil, err
		}
		c = &markerConn{addr: addr, c: nc, r: br}
	}
	body, err := c.roundTrip(ctx, req)
	if err != nil {
		c.c.Close()
		return nil, err
	}
	w.mu.Lock()
	if len(w.idle[leader]) < maxIdleMarkerConns && w.s.ctx.Err() == nil {
		w.idle[leader] = append(w.idle[leader], c)
		c = nil
	}
	w.mu.Unlock()
	if c != nil {
		c.c.Close()
	}
	return body, nil
}

// roundTrip sends req and returns the response body after the header.
func (c *markerConn) roundTrip(ctx context.Context, req kmsg.Request) ([]byte, error) {
	if d, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Now()) })
	defer stop()
	c.corr++
	if _, err := c.c.Write(markerFormatter.AppendRequest(nil, req, c.corr)); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, c.corr)
	}
	if size < 4 || size > 16<<20 {
		return nil, fmt.Errorf("response size %d", size)
	}
	buf := make([]byte, size-4)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return nil, err
	}
	if req.IsFlexible() {
		// Response header tagged fields: skip them.
		n, k := binary.Uvarint(buf)
		if k <= 0 {
			return nil, errors.New("bad response header tags")
		}
		buf = buf[k:]
		for range n {
			_, k1 := binary.Uvarint(buf)
			if k1 <= 0 {
				return nil, errors.New("bad response header tag")
			}
			l, k2 := binary.Uvarint(buf[k1:])
			if k2 <= 0 || uint64(len(buf)) < uint64(k1+k2)+l {
				return nil, errors.New("bad response header tag")
			}
			buf = buf[uint64(k1+k2)+l:]
		}
	}
	return buf, nil
}
