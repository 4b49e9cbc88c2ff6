package netpath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"net"
	"sync"
	"time"

	"github.com/ringlog/ringlog/coordinator"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file bridges the group coordinator (coordinator/group) to the
// broker: the __consumer_offsets topic, the Persister that appends the
// coordinator's records to it through the engine, and the ownership loop
// that loads a partition's groups when this broker becomes its leader and
// unloads them when it stops being it.
//
// __consumer_offsets is an internal topic created through the controller on
// the first FindCoordinator (OffsetsTopicPartitions partitions, replication
// factor min(3, live brokers) unless configured). Kafka makes it compacted;
// ringlog's engine does not compact yet, so the topic is created with
// retention disabled (retention.ms=-1, retention.bytes=-1) and a load reads
// every record since the log start. The partitions are replicated like any
// other (replicas.go): a commit is acknowledged only once the ISR holds its
// records (Append), so committed offsets survive the loss of the
// coordinator: the new leader of the offsets partition loads them.
//
// The coordinator of a group is the leader of its offsets partition
// (group.PartitionFor). Ownership follows the metadata image: on every
// change the bridge compares the partitions this broker leads (and their
// leader epochs) with what the Manager owns, BeginLoads new ones, reads
// each from the engine (log start to log end, once replication leads it at
// that epoch: load) through group.Load, then FinishLoads; partitions it no longer leads are Unloaded. Requests
// for a partition being loaded get COORDINATOR_LOAD_IN_PROGRESS, for one
// owned elsewhere NOT_COORDINATOR (from the Manager's routing).

// groupBridge owns the Manager and the ownership state.
type groupBridge struct {
	s   *Server
	mgr *group.Manager

	mu    sync.Mutex
	owned map[int32]int32 // offsets partition -> leader epoch it was loaded at

	createMu sync.Mutex // one creation of the offsets topic at a time
}

func newGroupBridge(s *Server) (*groupBridge, error) {
	b := &groupBridge{s: s, owned: make(map[int32]int32)}
	mgr, err := group.NewManager(s.cfg.Groups, b, group.SystemClock{})
	if err != nil {
		return nil, err
	}
	b.mgr = mgr
	return b, nil
}

// start runs the Manager's timers and the ownership loop until the server
// closes.
func (b *groupBridge) start() {
	b.s.wg.Add(2)
	go func() {
		defer b.s.wg.Done()
		b.mgr.Run(b.s.ctx, 100*time.Millisecond)
	}()
	go func() {
		defer b.s.wg.Done()
		b.ownershipLoop()
	}()
}

func (b *groupBridge) ownershipLoop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ch := b.s.node.Changed()
		b.syncOwnership()
		select {
		case <-ch:
		case <-tick.C: // also retries loads that failed
		case <-b.s.ctx.Done():
			return
		}
	}
}

// syncOwnership loads the offsets partitions this broker now leads and
// unloads the ones it no longer leads (or leads at a new epoch: another
// broker may have led it meanwhile, so its groups are read again).
func (b *groupBridge) syncOwnership() {
	img := b.s.node.MetadataImage()
	want := map[int32]int32{}
	if t, ok := img.Topic(group.OffsetsTopic); ok {
		for i, p := range t.Partitions {
			if p.Leader == b.s.cfg.NodeID {
				want[int32(i)] = p.LeaderEpoch
			}
		}
	}
	b.mu.Lock()
	var load []int32
	for p, epoch := range b.owned {
		if e, ok := want[p]; !ok || e != epoch {
			b.mgr.Unload(p)
			delete(b.owned, p)
			b.s.log.Info("unloaded consumer groups", "offsets_partition", p)
		}
	}
	for p := range want {
		if _, ok := b.owned[p]; !ok {
			b.mgr.BeginLoad(p)
			load = append(load, p)
		}
	}
	b.mu.Unlock()
	for _, p := range load {
		start := time.Now()
		snap, err := b.load(p, want[p])
		if err != nil {
			// Give the partition up (clients get NOT_COORDINATOR) so a
			// later pass retries the load from scratch.
			b.mgr.Unload(p)
			b.s.log.Error("loading consumer groups", "offsets_partition", p, "err", err)
			continue
		}
		b.mu.Lock()
		b.owned[p] = want[p]
		b.mu.Unlock()
		b.mgr.FinishLoad(p, snap)
		b.s.log.Info("loaded consumer groups", "offsets_partition", p, "groups", len(snap.Groups),
			"took", time.Since(start).Round(time.Millisecond))
	}
}

// load reads offsets partition p, led at epoch, from the local log into a
// Snapshot. Meanwhile the partition is in BeginLoad state: its groups get
// COORDINATOR_LOAD_IN_PROGRESS.
//
// A replicated partition is read only once replication leads it at epoch
// (the new leader's epoch is in its log, so nothing read can be truncated
// away under the load), and to the log end, as Kafka's coordinator loads:
// records above the high watermark on a new leader are ones the old
// leader never acknowledged, and they become committed as the followers
// catch up. Waiting for the HW would stall the load until the ISR drops a
// dead member (replica.lag.time.max).
func (b *groupBridge) load(p, epoch int32) (*group.Snapshot, error) {
	part, err := b.s.engine.Partition(group.OffsetsTopic, p)
	if err != nil {
		if rerr := b.s.reconcile(); rerr != nil {
			b.s.log.Warn("reconcile", "err", rerr)
		}
		if part, err = b.s.engine.Partition(group.OffsetsTopic, p); err != nil {
			return nil, err
		}
	}
	info, ok := b.s.node.MetadataImage().Partition(group.OffsetsTopic, p)
	replicated := b.s.repl != nil && ok && len(info.Replicas) > 1
	deadline := time.Now().Add(10 * time.Second)
	ready := func() (bool, error) {
		if info, ok := b.s.node.MetadataImage().Partition(group.OffsetsTopic, p); !ok || info.Leader != b.s.cfg.NodeID || info.LeaderEpoch != epoch {
			return false, fmt.Errorf("%w: %s-%d: leadership moved during the load", group.ErrNotCoordinator, group.OffsetsTopic, p)
		}
		if !replicated {
			// Appends of an earlier leadership may still be on their way
			// to disk: the high watermark covers the log end once written.
			return part.HighWatermark() >= part.LogEndOffset(), nil
		}
		lp := b.s.repl.leader(group.OffsetsTopic, p)
		if lp == nil || lp.part != part {
			return false, nil
		}
		lp.mu.Lock()
		led := lp.gen && lp.st.LeaderEpoch() == epoch
		lp.mu.Unlock()
		return led && part.DurableEnd() >= part.LogEndOffset(), nil
	}
	for {
		ch := part.Changed()
		ok, err := ready()
		if err != nil {
			return nil, err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			if replicated {
				return nil, fmt.Errorf("%s-%d: not leading it in replication at epoch %d after 10s", group.OffsetsTopic, p, epoch)
			}
			break
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-b.s.ctx.Done():
			return nil, b.s.ctx.Err()
		}
	}
	return group.Load(readRecords(part, replicated))
}

// readRecords yields every record of part from its log start to its high
// watermark (toEnd: to the readable log end), in offset order. Batches are expected uncompressed (only the
// coordinator writes this topic); control batches are skipped.
func readRecords(part *engine.Partition, toEnd bool) iter.Seq2[group.KV, error] {
	return func(yield func(group.KV, error) bool) {
		offset := part.Info().LogStartOffset
		buf := make([]byte, 0, 1<<20)
		for {
			var res engine.ReadResult
			var err error
			if toEnd {
				res, err = part.ReadReplica(offset, 1<<20)
			} else {
				res, err = part.Read(offset, 1<<20, true)
			}
			if err != nil {
				yield(group.KV{}, err)
				return
			}
			n := int(res.Data.Len())
			if n == 0 {
				res.Data.Release()
				return
			}
			buf = buf[:0]
			buf = append(buf, make([]byte, n)...)
			_, err = res.Data.ReadAt(buf, res.Data.Pos())
			res.Data.Release()
			if err != nil {
				yield(group.KV{}, fmt.Errorf("reading %s-%d at %d: %w", group.OffsetsTopic, part.Index(), offset, err))
				return
			}
			next, err := decodeBatches(buf, offset, yield)
			if err != nil {
				yield(group.KV{}, err)
				return
			}
			if next < 0 {
				return // the consumer stopped
			}
			if next <= offset {
				yield(group.KV{}, fmt.Errorf("%s-%d: no progress reading at offset %d", group.OffsetsTopic, part.Index(), offset))
				return
			}
			offset = next
		}
	}
}

// Persister: Append encodes one batch and hands it to the local partition.
// On a replicated offsets partition it first checks, as an acks=all
// produce does, that the ISR is at min.insync.replicas, and the Waiter
// then waits in the replication purgatory (the produce path's acks=all
// mechanism) until the high watermark covers the batch: a commit is
// acknowledged only once the ISR holds it, so it survives the loss of this
// broker. Failures map as Kafka's OffsetCommit maps them: leadership lost
// -> NOT_COORDINATOR; NOT_ENOUGH_REPLICAS(_AFTER_APPEND), timeouts and
// storage errors -> COORDINATOR_NOT_AVAILABLE (group.appendErr).

// offsetCommitTimeout bounds the wait for the ISR (offsets.commit.timeout.ms).
const offsetCommitTimeout = 5 * time.Second

// Append implements group.Persister.
func (b *groupBridge) Append(p int32, kvs []group.KV) group.Waiter {
	fail := func(err error) group.Waiter { return group.WaiterFunc(func() error { return err }) }
	if len(kvs) == 0 {
		return group.Done
	}
	if info, ok := b.s.node.MetadataImage().Partition(group.OffsetsTopic, p); !ok || info.Leader != b.s.cfg.NodeID {
		return fail(fmt.Errorf("%w: %s-%d is led elsewhere", group.ErrNotCoordinator, group.OffsetsTopic, p))
	}
	part, err := b.s.engine.Partition(group.OffsetsTopic, p)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", group.ErrNotCoordinator, err))
	}
	var lp *leaderPart
	if b.s.repl != nil && part.Replicated() {
		if lp = b.s.repl.leader(group.OffsetsTopic, p); lp == nil {
			return fail(fmt.Errorf("%w: %s-%d: not leading it in replication yet", group.ErrNotCoordinator, group.OffsetsTopic, p))
		}
		if err := lp.checkProduce(-1); err != nil {
			return fail(persistErr(err))
		}
	}
	deadline := time.Now().Add(offsetCommitTimeout)
	w, err := part.Append(encodeBatch(kvs, time.Now().UnixMilli()))
	if err != nil {
		return fail(persistErr(err))
	}
	return group.WaiterFunc(func() error {
		<-w.Done()
		res, err := w.Result()
		if err != nil || lp == nil {
			return persistErr(err)
		}
		purg := b.s.repl.purg
		pw := purg.Add(lp.tp, res.LastOffset, deadline)
		// dropLeader clears gen before failing the partition's waiters: a
		// waiter added after that would only time out.
		lp.mu.Lock()
		gone := !lp.gen
		lp.mu.Unlock()
		if gone {
			purg.Cancel(pw)
			return fmt.Errorf("%w: %s-%d: leadership moved", group.ErrNotCoordinator, group.OffsetsTopic, p)
		}
		select {
		case <-pw.Done():
		case <-b.s.ctx.Done():
			purg.Cancel(pw)
		}
		return persistErr(pw.Err())
	})
}

// persistErr classifies an append failure for group.appendErr: a lost
// leadership wraps ErrNotCoordinator, the rest become
// COORDINATOR_NOT_AVAILABLE there.
func persistErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrUnknownTopic),
		errors.Is(err, replication.ErrNotLeaderOrFollower), errors.Is(err, replication.ErrFencedLeaderEpoch):
		return fmt.Errorf("%w: %w", group.ErrNotCoordinator, err)
	}
	return err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeBatch builds one uncompressed magic-2 record batch (base offset 0:
// the engine assigns offsets) holding kvs, all stamped ts. A nil Value is a
// null value (a tombstone).
func encodeBatch(kvs []group.KV, ts int64) []byte {
	const headerSize = 61
	b := make([]byte, headerSize, headerSize+len(kvs)*64)
	be := binary.BigEndian
	// baseOffset 0, partitionLeaderEpoch 0 (both rewritten by the engine)
	b[16] = 2                                // magic
	be.PutUint16(b[21:], 0)                  // attributes: no codec, CreateTime
	be.PutUint32(b[23:], uint32(len(kvs)-1)) // lastOffsetDelta
	be.PutUint64(b[27:], uint64(ts))         // baseTimestamp
	be.PutUint64(b[35:], uint64(ts))         // maxTimestamp
	be.PutUint64(b[43:], ^uint64(0))         // producerId -1
	be.PutUint16(b[51:], ^uint16(0))         // producerEpoch -1
	be.PutUint32(b[53:], ^uint32(0))         // baseSequence -1
	be.PutUint32(b[57:], uint32(len(kvs)))   // record count
	var rec []byte
	for i, kv := range kvs {
		rec = rec[:0]
		rec = append(rec, 0)              // record attributes
		rec = binary.AppendVarint(rec, 0) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarBytes(rec, kv.Key)
		rec = appendVarBytes(rec, kv.Value)
		rec = binary.AppendVarint(rec, 0) // headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// decodeBatches yields the records of the whole batches in buf with
// offsets >= from and returns the offset after the last batch, or -1 when
// yield asked to stop.
func decodeBatches(buf []byte, from int64, yield func(group.KV, error) bool) (int64, error) {
	be := binary.BigEndian
	next := from
	for len(buf) >= 61 {
		base := int64(be.Uint64(buf[0:]))
		size := int(be.Uint32(buf[8:])) + 12
		if size < 61 || size > len(buf) {
			break // a partial batch at the end of the range
		}
		batch := buf[:size]
		buf = buf[size:]
		if batch[16] != 2 {
			return 0, fmt.Errorf("%s: batch at offset %d has magic %d", group.OffsetsTopic, base, batch[16])
		}
		if crc32.Checksum(batch[21:], castagnoli) != be.Uint32(batch[17:]) {
			return 0, fmt.Errorf("%s: batch at offset %d fails its CRC", group.OffsetsTopic, base)
		}
		attrs := be.Uint16(batch[21:])
		last := base + int64(be.Uint32(batch[23:]))
		next = last + 1
		if attrs&0x20 != 0 { // control batch
			continue
		}
		if attrs&0x07 != 0 {
			return 0, fmt.Errorf("%s: batch at offset %d is compressed (codec %d); only the coordinator writes this topic", group.OffsetsTopic, base, attrs&0x07)
		}
		count := int(int32(be.Uint32(batch[57:])))
		r := batch[61:]
		for i := 0; i < count; i++ {
			kv, rest, delta, err := decodeRecord(r)
			if err != nil {
				return 0, fmt.Errorf("%s: batch at offset %d, record %d: %w", group.OffsetsTopic, base, i, err)
			}
			r = rest
			if base+delta < from {
				continue
			}
			if !yield(kv, nil) {
				return -1, nil
			}
		}
	}
	return next, nil
}

var errShortRecord = errors.New("truncated record")

func decodeRecord(b []byte) (group.KV, []byte, int64, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return group.KV{}, nil, 0, errShortRecord
	}
	rest := b[n+int(length):]
	r := b[n : n+int(length)]
	if len(r) < 1 {
		return group.KV{}, nil, 0, errShortRecord
	}
	r = r[1:] // attributes
	var vals [2]int64
	for i := range vals { // timestamp delta, offset delta
		v, n := binary.Varint(r)
		if n <= 0 {
			return group.KV{}, nil, 0, errShortRecord
		}
		vals[i], r = v, r[n:]
	}
	var kv group.KV
	for i := 0; i < 2; i++ {
		l, n := binary.Varint(r)
		if n <= 0 || l < -1 || int64(len(r)-n) < l {
			return group.KV{}, nil, 0, errShortRecord
		}
		r = r[n:]
		var v []byte
		if l >= 0 {
			v = append([]byte{}, r[:l]...)
			r = r[l:]
		}
		if i == 0 {
			kv.Key = v
		} else {
			kv.Value = v
		}
	}
	return kv, rest, vals[1], nil
}

// coordinatorFor finds the broker coordinating groupID: the leader of its
// offsets partition, creating the offsets topic on first use. It returns
// the broker's endpoint for listener l, or an error code.
func (b *groupBridge) coordinatorFor(ctx context.Context, l *listener, groupID string) (brokerEndpoint, int16, error) {
	if err := b.s.node.Fresh(); err != nil {
		return brokerEndpoint{}, kerr.CoordinatorNotAvailable.Code, err
	}
	img := b.s.node.MetadataImage()
	t, img, ok := b.s.lookupTopic(img, group.OffsetsTopic)
	if !ok {
		var err error
		if img, err = b.createOffsetsTopic(ctx); err != nil {
			return brokerEndpoint{}, kerr.CoordinatorNotAvailable.Code, err
		}
		if t, ok = img.Topic(group.OffsetsTopic); !ok {
			return brokerEndpoint{}, kerr.CoordinatorNotAvailable.Code, errors.New("offsets topic not in metadata yet")
		}
	}
	p := group.PartitionFor(groupID, len(t.Partitions))
	leader := t.Partitions[p].Leader
	if leader == metadata.NoLeader {
		return brokerEndpoint{}, kerr.CoordinatorNotAvailable.Code, fmt.Errorf("%s-%d has no leader", group.OffsetsTopic, p)
	}
	for _, be := range b.s.liveBrokers(img, l) {
		if be.id == leader {
			return be, 0, nil
		}
	}
	return brokerEndpoint{}, kerr.CoordinatorNotAvailable.Code, fmt.Errorf("coordinator broker %d is not available", leader)
}

func (b *groupBridge) createOffsetsTopic(ctx context.Context) (*metadata.Image, error) {
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if _, ok := b.s.node.MetadataImage().Topic(group.OffsetsTopic); ok {
		return b.s.node.MetadataImage(), nil
	}
	n := b.s.cfg.Groups.OffsetsTopicPartitions
	_, err := b.s.node.CreateTopic(ctx, coordinator.CreateTopicRequest{
		Name:              group.OffsetsTopic,
		Partitions:        int32(n),
		ReplicationFactor: b.s.cfg.OffsetsReplicationFactor, // <= 0: min(3, live brokers)
		Configs: map[string]string{
			// No compaction yet: keep everything so a load sees every key.
			"retention.ms":    "-1",
			"retention.bytes": "-1",
			"segment.bytes":   "104857600",
		},
	})
	switch {
	case err == nil:
		b.s.log.Info("created the offsets topic", "topic", group.OffsetsTopic, "partitions", n)
	case errors.Is(err, metadata.ErrTopicExists):
		if err := b.s.node.Sync(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	if err := b.s.reconcile(); err != nil {
		b.s.log.Warn("reconcile after creating the offsets topic", "err", err)
	}
	return b.s.node.MetadataImage(), nil
}

// stale returns the error every group request gets while this broker's
// metadata may be stale: clients rediscover the coordinator.
func (b *groupBridge) stale() error {
	if err := b.s.node.Fresh(); err != nil {
		return fmt.Errorf("%w: %w", group.ErrNotCoordinator, err)
	}
	return nil
}

// clientHost is the remote host of a connection, as DescribeGroups shows.
func clientHost(c *conn) string {
	addr := c.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return "/" + h
	}
	return addr
}

// waitFuture blocks in a reply's resolve until f resolves or the
// connection goes away (ok false: send nothing).
func waitFuture[T any](f *group.Future[T], done <-chan struct{}) (T, bool) {
	select {
	case <-f.Done():
		return f.Result(), true
	case <-done:
		var zero T
		return zero, false
	}
}
