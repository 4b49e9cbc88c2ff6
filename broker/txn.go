package broker

import (
	"context"
	"iter"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/coordinator/txn"
)

// This file bridges the transaction coordinator (coordinator/txn) to the
// broker, as groups.go does for consumer groups:
//
//   - __transaction_state (txn.Config.TransactionLogPartitions partitions,
//     replication factor min(3, live brokers) unless configured, retention
//     off) is a coordLog: created on the first FindCoordinator of key type
//     1, its partitions loaded (txn.Load, FinishLoad with the partition's
//     leader epoch as the coordinator epoch) when this broker becomes
//     their leader and unloaded when it stops being it;
//   - the Persister appends the coordinator's records there, acknowledged
//     once the ISR holds them;
//   - producer ids come from the controller's blocks (producer_ids.go);
//   - the MarkerWriter (txn_markers.go) writes the commit/abort markers to
//     the transaction's partitions: locally when this broker leads one,
//     otherwise with WriteTxnMarkers to its leader.
//
// The coordinator of a transactional id is the leader of its partition
// (txn.PartitionFor); requests routed elsewhere get NOT_COORDINATOR from
// the Manager, and a broker whose metadata may be stale answers
// NOT_COORDINATOR to every transactional request.
//
// txnBridge is netpath.Transactions: the Manager's request methods are
// promoted from the embedded *txn.Manager.

// txnStateTimeout bounds the wait for the ISR on a __transaction_state
// append; past it the request fails with COORDINATOR_NOT_AVAILABLE.
const txnStateTimeout = 5 * time.Second

// txnTickInterval is how often the Manager checks transaction timeouts and
// failed marker jobs (Kafka checks every 10 s).
const txnTickInterval = 500 * time.Millisecond

// txnBridge owns the transaction Manager and __transaction_state.
type txnBridge struct {
	*txn.Manager
	s       *wireServer
	log     *coordLog
	markers *markerWriter
}

func newTxnBridge(s *wireServer) (*txnBridge, error) {
	b := &txnBridge{s: s}
	b.markers = newMarkerWriter(s, b)
	b.log = &coordLog{
		s: s, topic: txn.TransactionTopic, what: "transactions",
		partitions: s.cfg.Transactions.TransactionLogPartitions, rf: s.cfg.TransactionStateReplicationFactor, segmentBytes: s.cfg.TransactionStateSegmentBytes,
		notCoord: txn.ErrNotCoordinator, commitTimeout: txnStateTimeout,
		begin:  func(p int32) { b.Manager.BeginLoad(p) },
		unload: func(p int32) { b.Manager.Unload(p) },
		load: func(p, epoch int32, recs iter.Seq2[statelog.KV, error]) (int, error) {
			snap, err := txn.Load(recs)
			if err != nil {
				return 0, err
			}
			b.Manager.FinishLoad(p, epoch, snap)
			return len(snap.Txns), nil
		},
	}
	mgr, err := txn.NewManager(s.cfg.Transactions, b, s.pids, b.markers, txn.SystemClock{})
	if err != nil {
		return nil, err
	}
	b.Manager = mgr
	return b, nil
}

// start runs the Manager's timers and the ownership loop until the server
// closes.
func (b *txnBridge) start() {
	b.s.wg.Add(1)
	go func() {
		defer b.s.wg.Done()
		b.Run(b.s.ctx, txnTickInterval)
	}()
	b.log.start()
}

// Append implements txn.Persister.
func (b *txnBridge) Append(p int32, kvs []statelog.KV) statelog.Waiter {
	if len(kvs) == 0 {
		return statelog.Done
	}
	return b.log.append(p, encodeBatch(kvs, time.Now().UnixMilli()))
}

// Coordinator returns the broker coordinating transactionalID (see
// coordLog.coordinator).
func (b *txnBridge) Coordinator(ctx context.Context, transactionalID string) (int32, error) {
	return b.log.coordinator(ctx, transactionalID, txn.PartitionFor)
}

// Stale returns the error every transactional request gets while this
// broker's metadata may be stale.
func (b *txnBridge) Stale() error { return b.log.stale() }
