package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/netpath/peer"
	"github.com/ringlog/ringlog/replication"
)

// This file writes transaction markers: the transaction coordinator's
// txn.MarkerWriter, and WriteMarker, the leader's side that both the
// writer (for partitions this broker leads) and netpath's WriteTxnMarkers
// handler (for the other brokers' coordinators) use.
//
// A job (one transaction's commit or abort) is split by partition leader,
// as the metadata image has it: partitions led here are appended locally,
// each other leader gets one WriteTxnMarkers request through the peer
// client (netpath/peer). Partitions answered with a
// retriable error (leader moved, NOT_ENOUGH_REPLICAS, timeouts, a broker
// unreachable) are tried again with backoff, for as long as this broker
// still owns the transaction's __transaction_state partition at the job's
// coordinator epoch; the job then fails with ErrNotCoordinator and the new
// coordinator resends it from the Prepare record. A partition of a deleted
// topic counts as done. PRODUCER_FENCED / INVALID_PRODUCER_EPOCH /
// TRANSACTION_COORDINATOR_FENCED mean a newer coordinator has acted on the
// partition: this one stops, as Kafka's does.

// markerTimeout bounds one marker write on its leader (append, flush, ISR);
// WriteTxnMarkers answers REQUEST_TIMED_OUT after it.
const markerTimeout = 30 * time.Second

type markerWriter struct {
	s *wireServer
	b *txnBridge
}

func newMarkerWriter(s *wireServer, b *txnBridge) *markerWriter {
	return &markerWriter{s: s, b: b}
}

// WriteMarkers implements txn.MarkerWriter: the job runs on its own
// goroutine and the Waiter waits for it.
func (w *markerWriter) WriteMarkers(m txn.Markers) statelog.Waiter {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = w.run(m)
	}()
	return statelog.WaiterFunc(func() error {
		<-done
		return err
	})
}

// markerResult is one partition's outcome in one attempt: nil, or the
// engine's or replication's error (the peer client maps a remote leader's
// codes back to them).
type markerResult struct {
	tp  txn.TopicPartition
	err error
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
				if leader == s.nodeID {
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
			switch {
			case r.err == nil, errors.Is(r.err, engine.ErrUnsupportedVersion):
			case errors.Is(r.err, producerstate.ErrProducerFenced), errors.Is(r.err, producerstate.ErrInvalidProducerEpoch),
				errors.Is(r.err, producerstate.ErrTransactionCoordinatorFenced):
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
			out[i] = markerResult{tp: tp, err: w.s.txns.WriteMarker(tp.Topic, tp.Partition, mk, deadline, nil)}
		}()
	}
	wg.Wait()
	return out
}

// remote sends the marker for tps to their leader with WriteTxnMarkers.
// A failed round trip is a retriable error for every partition.
func (w *markerWriter) remote(leader int32, m txn.Markers, tps []txn.TopicPartition) []markerResult {
	mk := producerstate.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	ptps := make([]peer.TopicPartition, len(tps))
	for i, tp := range tps {
		ptps[i] = peer.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	ctx, cancel := context.WithTimeout(w.s.ctx, markerTimeout+10*time.Second)
	defer cancel()
	errs, err := w.s.peers.WriteMarkers(ctx, leader, mk, ptps)
	out := make([]markerResult, len(tps))
	for i, tp := range tps {
		out[i] = markerResult{tp: tp, err: err}
		if err == nil {
			out[i].err = errs[ptps[i]]
		}
	}
	return out
}

// WriteMarker appends mk to topic/p, which this broker must lead, and
// returns once it is durable and, on a replicated partition, covered by
// the high watermark (by deadline); on a __consumer_offsets partition the
// group coordinator then completes the transaction's offset commits.
// done, when closed, abandons the wait (the requester went away).
func (b *txnBridge) WriteMarker(topic string, p int32, mk producerstate.Marker, deadline time.Time, done <-chan struct{}) error {
	s := b.s
	part, err := s.ledPartition(topic, p)
	if err != nil {
		return err
	}
	var lp *leaderPart
	var epoch int32
	if s.repl != nil && part.Replicated() {
		if lp = s.repl.leader(topic, p); lp == nil {
			return replication.ErrNotLeaderOrFollower
		}
		var err error
		if epoch, err = lp.CheckProduce(-1); err != nil {
			return err
		}
	}
	w, err := part.AppendMarker(mk)
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
		if err := s.groups.CompleteTxn(p, mk.ProducerID, mk.Commit); err != nil {
			s.log.Debug("transaction marker on an offsets partition not loaded here", "partition", p, "err", err)
		}
	}
	return nil
}

// ledPartition returns the local log of topic/p if the image, fresh,
// says this broker leads it.
func (s *wireServer) ledPartition(topic string, p int32) (*engine.Partition, error) {
	info, ok := s.node.MetadataImage().Partition(topic, p)
	if !ok {
		return nil, fmt.Errorf("%s-%d: %w", topic, p, replication.ErrUnknownTopicOrPartition)
	}
	if err := s.node.Fresh(); err != nil || info.Leader != s.nodeID {
		return nil, fmt.Errorf("%s-%d: led by %d: %w", topic, p, info.Leader, replication.ErrNotLeaderOrFollower)
	}
	part, err := s.engine.Partition(topic, p)
	if err != nil {
		// The image is ahead of the reconcile loop: catch up now.
		if rerr := s.reconcile(); rerr != nil {
			s.log.Warn("reconcile", "err", rerr)
		}
		if part, err = s.engine.Partition(topic, p); err != nil {
			return nil, fmt.Errorf("%s-%d: %w", topic, p, replication.ErrNotLeaderOrFollower)
		}
	}
	return part, nil
}

// errRequesterGone ends a marker wait whose requester went away.
var errRequesterGone = errors.New("the requester went away")
