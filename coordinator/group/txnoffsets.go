package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// errNoTxnPersister explains the ErrCoordinatorNotAvailable that
// CommitTxnOffsets answers when the Persister cannot write transactional
// batches.
var errNoTxnPersister = errors.New("the Persister does not implement TxnPersister")

func txnCommitFail(req *TxnOffsetCommitRequest, err error) *Future[TxnOffsetCommitResponse] {
	var r TxnOffsetCommitResponse
	for _, o := range req.Offsets {
		r.Partitions = append(r.Partitions, PartitionError{Topic: o.Topic, Partition: o.Partition, Err: err})
	}
	return resolved(r)
}

// CommitTxnOffsets answers TxnOffsetCommit (KIP-98, KIP-447). The offsets
// are written to the group's partition as one transactional batch of
// ProducerID and stay pending, invisible to OffsetFetch, until the
// broker reports the transaction's marker through CompleteTxn. The future
// resolves when the batch is durable.
//
// A group it does not know is created as an empty simple group, as Kafka
// does, unless the request names a generation (ErrIllegalGeneration:
// that group is not ours to know). A request that carries any of
// generation, member id or instance id is fenced like OffsetCommit:
// ErrUnknownMemberID, ErrFencedInstanceID, ErrIllegalGeneration; this is
// what stops a zombie consumer's producer (KIP-447). Without them (v0-v2)
// any group accepts the commit, members or not. Unlike OffsetCommit a
// group in CompletingRebalance accepts it, and the member's session is not
// refreshed (the producer is not the consumer's heartbeat).
func (m *Manager) CommitTxnOffsets(req TxnOffsetCommitRequest) *Future[TxnOffsetCommitResponse] {
	switch {
	case req.GroupID == "":
		return txnCommitFail(&req, ErrInvalidGroupID)
	case m.txnPersist == nil:
		return txnCommitFail(&req, fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, errNoTxnPersister))
	case req.ProducerID < 0 || req.ProducerEpoch < 0:
		return txnCommitFail(&req, fmt.Errorf("%w: producer id %d epoch %d", ErrInvalidProducerEpoch, req.ProducerID, req.ProducerEpoch))
	}
	g, err := m.lockGroup(req.GroupID, req.Generation < 0)
	if err != nil {
		return txnCommitFail(&req, err)
	}
	if g == nil {
		return txnCommitFail(&req, ErrIllegalGeneration)
	}
	defer g.mu.Unlock()
	return g.commitTxn(&req, m.clock.Now())
}

func (g *group) commitTxn(req *TxnOffsetCommitRequest, now time.Time) *Future[TxnOffsetCommitResponse] {
	if g.share != nil {
		return txnCommitFail(req, fmt.Errorf("%w: %s is a share group", ErrGroupIDNotFound, g.id))
	}
	if g.consumer != nil {
		// KIP-848: the generation is the member epoch, which must be the
		// member's current one (Kafka is as strict for transactions).
		if req.Generation >= 0 || req.MemberID != "" {
			mem := g.consumer.members[req.MemberID]
			if mem == nil {
				return txnCommitFail(req, fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID))
			}
			if req.Generation != mem.epoch {
				return txnCommitFail(req, fmt.Errorf("%w: epoch %d, the member is at %d", ErrIllegalGeneration, req.Generation, mem.epoch))
			}
		}
	} else if req.Generation >= 0 || req.MemberID != "" || req.GroupInstanceID != nil {
		if err := g.checkInstance(req.GroupInstanceID, req.MemberID); err != nil {
			return txnCommitFail(req, err)
		}
		if g.members[req.MemberID] == nil {
			return txnCommitFail(req, ErrUnknownMemberID)
		}
		if req.Generation != g.generation {
			return txnCommitFail(req, ErrIllegalGeneration)
		}
	}
	pid := req.ProducerID
	t := g.txns[pid]
	if t != nil && req.ProducerEpoch < t.epoch {
		// The log fences an older epoch too, but it may not have seen the
		// newer one (its batch can be the one in flight).
		return txnCommitFail(req, fmt.Errorf("%w: epoch %d, the open transaction has %d", ErrInvalidProducerEpoch, req.ProducerEpoch, t.epoch))
	}
	g.seq++
	seq := g.seq
	ts := now.UnixMilli()
	resp := TxnOffsetCommitResponse{Partitions: make([]PartitionError, len(req.Offsets))}
	var kvs []statelog.KV
	var idx []int
	var entries []*offsetEntry
	for i, o := range req.Offsets {
		resp.Partitions[i] = PartitionError{Topic: o.Topic, Partition: o.Partition}
		if len(o.Metadata) > g.m.cfg.MaxOffsetMetadataBytes {
			resp.Partitions[i].Err = ErrOffsetMetadataTooLarge
			continue
		}
		v := OffsetValue{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestamp: ts}
		kvs = append(kvs, statelog.KV{
			Key:   EncodeOffsetKey(OffsetKey{Group: g.id, Topic: o.Topic, Partition: o.Partition}),
			Value: EncodeOffsetValue(v),
		})
		idx = append(idx, i)
		entries = append(entries, &offsetEntry{v: v, seq: seq})
	}
	if len(kvs) == 0 {
		return resolved(resp)
	}
	if t == nil {
		t = &openTxn{offsets: make(map[TopicPartition]*offsetEntry)}
		g.txns[pid] = t
		g.m.indexTxn(pid, g)
	}
	t.epoch = req.ProducerEpoch
	for j, i := range idx {
		t.offsets[TopicPartition{req.Offsets[i].Topic, req.Offsets[i].Partition}] = entries[j]
	}
	w := g.m.txnPersist.AppendTxn(g.part, pid, req.ProducerEpoch, kvs)
	fut := newFuture[TxnOffsetCommitResponse]()
	go func() {
		err := txnAppendErr(w.Wait())
		if err != nil {
			g.mu.Lock()
			// Take back what is still ours: a later commit of the same
			// partition, a deletion or the marker may have moved on.
			if t := g.txns[pid]; t != nil {
				for j, i := range idx {
					tp := TopicPartition{req.Offsets[i].Topic, req.Offsets[i].Partition}
					if t.offsets[tp] == entries[j] {
						delete(t.offsets, tp)
					}
				}
				if len(t.offsets) == 0 {
					g.dropTxn(pid)
				}
			}
			g.mu.Unlock()
			for _, i := range idx {
				resp.Partitions[i].Err = err
			}
		}
		fut.Resolve(resp)
	}()
	return fut
}

// txnAppendErr is appendErr, except that a producer fenced by the log is
// the client's to know.
func txnAppendErr(err error) error {
	if errors.Is(err, ErrInvalidProducerEpoch) {
		return err
	}
	return appendErr(err)
}

// CompleteTxn applies a transaction marker: the broker calls it after it
// appended producerID's COMMIT (commit true) or ABORT marker to
// __consumer_offsets partition `partition` (WriteTxnMarkers) and the
// marker is durable. Every group of the partition with offsets pending
// for producerID resolves them: on commit each becomes the committed
// offset unless a commit written later to the log (a plain OffsetCommit
// after the TxnOffsetCommit, or another producer's transaction) already
// holds the partition, as Kafka orders them by record offset; on abort
// they are dropped. A marker with nothing pending is a no-op, so
// duplicates are harmless.
//
// While the partition is loading the marker is kept and FinishLoad applies
// it, because the loader may have read the log before the marker landed.
// For a partition this node does not own it returns ErrNotCoordinator and
// does nothing: the marker is in the log, and whoever loads the partition
// next replays it. The error is informational; the marker is written
// either way, so the broker need not fail WriteTxnMarkers for it.
func (m *Manager) CompleteTxn(partition int32, producerID int64, commit bool) error {
	m.mu.Lock()
	loaded, owned := m.parts[partition]
	if !owned {
		m.mu.Unlock()
		return ErrNotCoordinator
	}
	if !loaded {
		m.loadMarkers[partition] = append(m.loadMarkers[partition], marker{producerID, commit})
		m.mu.Unlock()
		return nil
	}
	var gs []*group
	ids := m.txnGroups[producerID]
	for id := range ids {
		switch g := m.groups[id]; {
		case g == nil:
			delete(ids, id) // stale: the group is gone
		case g.part == partition:
			gs = append(gs, g)
		}
	}
	if len(ids) == 0 {
		delete(m.txnGroups, producerID)
	}
	m.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		if g.state != Dead {
			g.endTxn(producerID, commit)
			g.m.unindexTxn(producerID, g)
		}
		g.mu.Unlock()
	}
	return nil
}

// endTxn resolves producerID's pending offsets without touching the
// Manager's index (FinishLoad calls it on unpublished groups under
// Manager.mu). Ties in seq only happen in a hand-built Snapshot, where
// every loaded offset is 0: the transaction, the newer news, wins.
func (g *group) endTxn(producerID int64, commit bool) {
	t := g.txns[producerID]
	if t == nil {
		return
	}
	delete(g.txns, producerID)
	if !commit {
		return
	}
	for tp, e := range t.offsets {
		if cur := g.offsets[tp]; cur == nil || cur.seq <= e.seq {
			g.offsets[tp] = e
		}
	}
}

// dropTxn forgets producerID's open transaction in the group.
func (g *group) dropTxn(producerID int64) {
	delete(g.txns, producerID)
	g.m.unindexTxn(producerID, g)
}

// dropPending removes tp's pending offsets of every producer: a tombstone
// for tp deletes them too (Kafka replays it so), so a later commit marker
// cannot bring a deleted offset back.
func (g *group) dropPending(tp TopicPartition) {
	for pid, t := range g.txns {
		delete(t.offsets, tp)
		if len(t.offsets) == 0 {
			g.dropTxn(pid)
		}
	}
}

// hasPending reports whether some open transaction holds an offset for tp.
func (g *group) hasPending(tp TopicPartition) bool {
	for _, t := range g.txns {
		if t.offsets[tp] != nil {
			return true
		}
	}
	return false
}

// indexTxn records that g has offsets pending for producerID. Called with
// g.mu held (the lock order allows taking Manager.mu). A group no longer
// in the map (unloaded under the caller) is not indexed: Unload already
// swept the index.
func (m *Manager) indexTxn(producerID int64, g *group) {
	m.mu.Lock()
	if m.groups[g.id] == g {
		m.indexTxnLocked(producerID, g.id)
	}
	m.mu.Unlock()
}

func (m *Manager) indexTxnLocked(producerID int64, id string) {
	ids := m.txnGroups[producerID]
	if ids == nil {
		ids = make(map[string]struct{})
		m.txnGroups[producerID] = ids
	}
	ids[id] = struct{}{}
}

// unindexTxn undoes indexTxn, unless the id now names another group.
func (m *Manager) unindexTxn(producerID int64, g *group) {
	m.mu.Lock()
	if ids := m.txnGroups[producerID]; ids != nil && m.groups[g.id] == g {
		delete(ids, g.id)
		if len(ids) == 0 {
			delete(m.txnGroups, producerID)
		}
	}
	m.mu.Unlock()
}
