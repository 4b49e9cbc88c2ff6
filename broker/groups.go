package broker

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/engine/producerstate"
)

// This file bridges the group coordinator (coordinator/group) to the
// broker: the __consumer_offsets topic, the Persister that appends the
// coordinator's records to it through the engine, and the ownership of its
// partitions. The topic, ownership and append machinery is coordLog's
// (coordlog.go), shared with the transaction coordinator.
//
// The coordinator of a group is the leader of its offsets partition
// (statelog.PartitionFor). Requests for a partition being loaded get
// COORDINATOR_LOAD_IN_PROGRESS, for one owned elsewhere NOT_COORDINATOR
// (from the Manager's routing). A commit is acknowledged only once the ISR
// holds its records, so committed offsets survive the loss of the
// coordinator: the new leader of the offsets partition loads them.
//
// Transactional offset commits (TxnOffsetCommit) are appended as
// transactional batches of the producer (AppendTxn); the loader sees their
// producer and the transaction markers WriteTxnMarkers appends to the
// partition, and writeMarker (txn_markers.go) tells the Manager about
// each marker once it is durable (CompleteTxn).
//
// groupBridge is netpath.Groups: the Manager's request methods are
// promoted from the embedded *group.Manager.

// groupBridge owns the Manager and the offsets topic.
type groupBridge struct {
	*group.Manager
	s   *wireServer
	log *coordLog

	// txnMu makes choosing a transactional batch's sequence and
	// appending it one step (AppendTxn).
	txnMu sync.Mutex
}

// offsetCommitTimeout bounds the wait for the ISR (offsets.commit.timeout.ms).
const offsetCommitTimeout = 5 * time.Second

func newGroupBridge(s *wireServer) (*groupBridge, error) {
	b := &groupBridge{s: s}
	b.log = &coordLog{
		s: s, topic: group.OffsetsTopic, what: "consumer groups",
		partitions: s.cfg.Groups.OffsetsTopicPartitions, rf: s.cfg.OffsetsReplicationFactor, segmentBytes: s.cfg.OffsetsTopicSegmentBytes,
		notCoord: group.ErrNotCoordinator, markers: true, commitTimeout: offsetCommitTimeout,
		begin:  func(p int32) { b.Manager.BeginLoad(p) },
		unload: func(p int32) { b.Manager.Unload(p) },
		load: func(p, _ int32, recs iter.Seq2[statelog.KV, error]) (int, error) {
			snap, err := group.Load(recs)
			if err != nil {
				return 0, err
			}
			b.Manager.FinishLoad(p, snap)
			return len(snap.Groups), nil
		},
	}
	mgr, err := group.NewManager(s.cfg.Groups, b, group.SystemClock{})
	if err != nil {
		return nil, err
	}
	b.Manager = mgr
	return b, nil
}

// start runs the Manager's timers and the ownership loop until the server
// closes.
func (b *groupBridge) start() {
	// The node is attached by now (wireServer.Start): consumer-protocol
	// heartbeats resolve topics from its image.
	b.SetTopics(&topicView{image: func() *metadata.Image {
		if b.s.node == nil {
			return nil
		}
		return b.s.node.MetadataImage()
	}})
	b.s.wg.Add(1)
	go func() {
		defer b.s.wg.Done()
		b.Run(b.s.ctx, 100*time.Millisecond)
	}()
	b.log.start()
}

// Append implements group.Persister. Failures map as Kafka's OffsetCommit
// maps them: leadership lost -> NOT_COORDINATOR; NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
// timeouts and storage errors -> COORDINATOR_NOT_AVAILABLE (group.appendErr).
func (b *groupBridge) Append(p int32, kvs []statelog.KV) statelog.Waiter {
	if len(kvs) == 0 {
		return statelog.Done
	}
	return b.log.append(p, encodeBatch(kvs, time.Now().UnixMilli()))
}

// AppendTxn implements group.TxnPersister: the records go in one
// transactional batch of the producer, so the partition's producer state
// opens (or continues) the transaction there and WriteTxnMarkers' marker
// ends it. The batch needs the producer's next sequence on this
// partition: the engine checks sequences of every producer batch, as it
// would a client's. A stale epoch (the log saw a newer one) is
// INVALID_PRODUCER_EPOCH for the client.
func (b *groupBridge) AppendTxn(p int32, pid int64, epoch int16, kvs []statelog.KV) statelog.Waiter {
	if len(kvs) == 0 {
		return statelog.Done
	}
	b.txnMu.Lock()
	defer b.txnMu.Unlock()
	seq := int32(0)
	if part, err := b.s.engine.Partition(group.OffsetsTopic, p); err == nil {
		for _, pi := range part.Producers() {
			if pi.ProducerID == pid && pi.Epoch == epoch {
				seq = pi.LastSequence + 1 // -1 + 1 = 0 with no batch yet
			}
		}
	}
	if seq < 0 {
		seq = 0 // wrapped past MaxInt32, as sequences do
	}
	w := b.log.append(p, encodeProducerBatch(kvs, time.Now().UnixMilli(), pid, epoch, seq, true))
	return statelog.WaiterFunc(func() error {
		err := w.Wait()
		if errors.Is(err, producerstate.ErrInvalidProducerEpoch) || errors.Is(err, producerstate.ErrProducerFenced) {
			return fmt.Errorf("%w: %w", group.ErrInvalidProducerEpoch, err)
		}
		return err
	})
}

// Coordinator returns the broker coordinating groupID: the leader of its
// offsets partition, creating the offsets topic on first use.
func (b *groupBridge) Coordinator(ctx context.Context, groupID string) (int32, error) {
	return b.log.coordinator(ctx, groupID, statelog.PartitionFor)
}

// Stale returns the error every group request gets while this broker's
// metadata may be stale: clients rediscover the coordinator.
func (b *groupBridge) Stale() error { return b.log.stale() }
