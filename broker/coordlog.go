package broker

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/statelog"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/replication"
)

// This file is what a coordinator backed by an internal topic needs from
// the broker; the group coordinator (__consumer_offsets, groups.go) and the
// transaction coordinator (__transaction_state, txn.go) each own one
// coordLog:
//
//   - the topic, created through the controller on first use (partition
//     count from the coordinator's config, replication factor min(3, live
//     brokers) unless configured) with cleanup.policy=compact: the
//     engine's cleaner keeps the latest record per key (a group's
//     metadata, a partition's committed offset, a transactional id's
//     state) and drops tombstones after delete.retention.ms, so a load
//     reads little more than the live state. Compaction leaves offset
//     gaps and never filters producer batches (transactional offset
//     commits) or markers; the loaders replay records in offset order
//     and need neither contiguity nor the superseded records;
//   - ownership: the coordinator of a key is the leader of its partition.
//     On every metadata change the partitions this broker leads (and their
//     leader epochs) are compared with what is owned: new ones are begun
//     (COORDINATOR_LOAD_IN_PROGRESS meanwhile), read from the local log
//     once replication leads them at that epoch, and installed; lost ones
//     (or ones led at a new epoch: another broker may have led them
//     meanwhile, so they are read again) are unloaded;
//   - durable appends: the coordinator's records as one magic-2 batch
//     appended with Partition.Append, acknowledged once flushed per the
//     fsync policy and, on a replicated partition, once the high watermark
//     covers it (the acks=all purgatory), so acknowledged state survives
//     the loss of this broker.

// coordLog is one coordinator's internal topic on this broker.
type coordLog struct {
	s     *wireServer
	topic string
	// what names the coordinator's state in log lines ("consumer groups").
	what string
	// partitions, rf and segmentBytes are used when the topic is
	// created; rf <= 0 is min(3, live brokers).
	partitions   int
	rf           int16
	segmentBytes int64
	// notCoord is the coordinator's NOT_COORDINATOR error: appends and
	// stale() wrap it so the coordinator recognises a lost partition.
	notCoord error
	// markers makes the loader see transaction markers (control records)
	// and the producer of transactional batches; otherwise control batches
	// are skipped.
	markers bool
	// commitTimeout bounds the wait for the ISR on an append
	// (offsets.commit.timeout.ms).
	commitTimeout time.Duration

	// The coordinator's side of ownership. load reads recs and installs
	// partition p led at epoch, returning how many keys it loaded (for the
	// log line); it runs after begin and with the partition already in
	// owned, so work it starts (transaction markers) sees it owned.
	begin  func(p int32)
	load   func(p, epoch int32, recs iter.Seq2[statelog.KV, error]) (int, error)
	unload func(p int32)

	mu     sync.Mutex
	owned  map[int32]int32 // partition -> leader epoch it was loaded at
	loaded map[int32]int32 // the subset of owned whose load has finished

	createMu sync.Mutex // one creation of the topic at a time
}

// start runs the ownership loop until the server closes.
func (c *coordLog) start() {
	c.mu.Lock()
	c.owned = make(map[int32]int32)
	c.loaded = make(map[int32]int32)
	c.mu.Unlock()
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			ch := c.s.node.Changed()
			c.syncOwnership()
			select {
			case <-ch:
			case <-tick.C: // also retries loads that failed
			case <-c.s.ctx.Done():
				return
			}
		}
	}()
}

// ownedAt returns the leader epoch partition p was loaded at, if this
// broker owns it.
func (c *coordLog) ownedAt(p int32) (int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.owned[p]
	return e, ok
}

// syncOwnership loads the partitions this broker now leads and unloads
// the ones it no longer leads (or leads at a new epoch).
func (c *coordLog) syncOwnership() {
	img := c.s.node.MetadataImage()
	want := map[int32]int32{}
	if t, ok := img.Topic(c.topic); ok {
		for i, p := range t.Partitions {
			if p.Leader == c.s.nodeID {
				want[int32(i)] = p.LeaderEpoch
			}
		}
	}
	c.mu.Lock()
	var load []int32
	for p, epoch := range c.owned {
		if e, ok := want[p]; !ok || e != epoch {
			c.unload(p)
			delete(c.owned, p)
			delete(c.loaded, p)
			c.s.log.Info("unloaded "+c.what, "topic", c.topic, "partition", p, "leader_epoch", epoch)
		}
	}
	for p := range want {
		if _, ok := c.owned[p]; !ok {
			c.begin(p)
			load = append(load, p)
		}
	}
	c.mu.Unlock()
	for _, p := range load {
		start := time.Now()
		n, err := c.loadPartition(p, want[p])
		if err != nil {
			// Give the partition up (clients get NOT_COORDINATOR) so a
			// later pass retries the load from scratch.
			c.mu.Lock()
			delete(c.owned, p)
			c.mu.Unlock()
			c.unload(p)
			c.s.log.Error("loading "+c.what, "topic", c.topic, "partition", p, "leader_epoch", want[p], "err", err)
			continue
		}
		c.mu.Lock()
		c.loaded[p] = want[p]
		c.mu.Unlock()
		c.s.log.Info("loaded "+c.what, "topic", c.topic, "partition", p, "leader_epoch", want[p], "keys", n,
			"took", time.Since(start).Round(time.Millisecond))
	}
}

// loadPartition reads partition p, led at epoch, from the local log and
// hands it to the coordinator. Meanwhile the partition is begun: its keys
// get COORDINATOR_LOAD_IN_PROGRESS.
//
// A replicated partition is read only once replication leads it at epoch
// (the new leader's epoch is in its log, so nothing read can be truncated
// away under the load), and to the log end, as Kafka's coordinators load:
// records above the high watermark on a new leader are ones the old
// leader never acknowledged, and they become committed as the followers
// catch up. Waiting for the HW would stall the load until the ISR drops a
// dead member (replica.lag.time.max).
func (c *coordLog) loadPartition(p, epoch int32) (int, error) {
	part, err := c.s.engine.Partition(c.topic, p)
	if err != nil {
		if rerr := c.s.reconcile(); rerr != nil {
			c.s.log.Warn("reconcile", "err", rerr)
		}
		if part, err = c.s.engine.Partition(c.topic, p); err != nil {
			return 0, err
		}
	}
	info, ok := c.s.node.MetadataImage().Partition(c.topic, p)
	replicated := c.s.repl != nil && ok && len(info.Replicas) > 1
	deadline := time.Now().Add(10 * time.Second)
	ready := func() (bool, error) {
		if info, ok := c.s.node.MetadataImage().Partition(c.topic, p); !ok || info.Leader != c.s.nodeID || info.LeaderEpoch != epoch {
			return false, fmt.Errorf("%w: %s-%d: leadership moved during the load", c.notCoord, c.topic, p)
		}
		if !replicated {
			// Appends of an earlier leadership may still be on their way
			// to disk: the high watermark covers the log end once written.
			return part.HighWatermark() >= part.LogEndOffset(), nil
		}
		lp := c.s.repl.leader(c.topic, p)
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
			return 0, err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			if replicated {
				return 0, fmt.Errorf("%s-%d: not leading it in replication at epoch %d after 10s", c.topic, p, epoch)
			}
			break
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-c.s.ctx.Done():
			return 0, c.s.ctx.Err()
		}
	}
	c.mu.Lock()
	c.owned[p] = epoch
	c.mu.Unlock()
	return c.load(p, epoch, readRecords(part, replicated, c.markers))
}

// append hands one encoded batch to the local partition p. On a
// replicated partition it first checks, as an acks=all produce does, that
// the ISR is at min.insync.replicas, and the Waiter then waits in the
// replication purgatory until the high watermark covers the batch.
// Failures: leadership lost wraps notCoord; NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
// timeouts and storage errors are returned as they are, for the
// coordinator to map (COORDINATOR_NOT_AVAILABLE in both).
func (c *coordLog) append(p int32, batch []byte) statelog.Waiter {
	fail := func(err error) statelog.Waiter { return statelog.WaiterFunc(func() error { return err }) }
	if info, ok := c.s.node.MetadataImage().Partition(c.topic, p); !ok || info.Leader != c.s.nodeID {
		return fail(fmt.Errorf("%w: %s-%d is led elsewhere", c.notCoord, c.topic, p))
	}
	part, err := c.s.engine.Partition(c.topic, p)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", c.notCoord, err))
	}
	var lp *leaderPart
	var epoch int32
	if c.s.repl != nil && part.Replicated() {
		if lp = c.s.repl.leader(c.topic, p); lp == nil {
			return fail(fmt.Errorf("%w: %s-%d: not leading it in replication yet", c.notCoord, c.topic, p))
		}
		var err error
		if epoch, err = lp.CheckProduce(-1); err != nil {
			return fail(c.persistErr(err))
		}
	}
	arrived := time.Now()
	deadline := arrived.Add(c.commitTimeout)
	// Group and transaction state draw from the free-space reserve: they
	// are small, and refusing them would stop consumers from committing.
	w, err := part.AppendInternal(batch)
	if err != nil {
		return fail(c.persistErr(err))
	}
	return statelog.WaiterFunc(func() error {
		<-w.Done()
		res, err := w.Result()
		if err != nil || lp == nil {
			return c.persistErr(err)
		}
		purg := c.s.repl.purg
		// A leadership that ended meanwhile fails the waiter at once.
		pw := c.s.repl.awaitHW(lp, epoch, res.LastOffset, arrived, deadline)
		select {
		case <-pw.Done():
		case <-c.s.ctx.Done():
			purg.Cancel(pw)
		}
		return c.persistErr(pw.Err())
	})
}

// persistErr classifies an append failure: a lost leadership wraps
// notCoord, the rest are left for the coordinator to map.
func (c *coordLog) persistErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrUnknownTopic),
		errors.Is(err, replication.ErrNotLeaderOrFollower), errors.Is(err, replication.ErrFencedLeaderEpoch):
		return fmt.Errorf("%w: %w", c.notCoord, err)
	}
	return err
}

// stale returns the error every request of the coordinator gets while
// this broker's metadata may be stale: clients rediscover the coordinator.
func (c *coordLog) stale() error {
	if err := c.s.node.Fresh(); err != nil {
		return fmt.Errorf("%w: %w", c.notCoord, err)
	}
	return nil
}

// coordinator finds the broker coordinating key: the leader of its
// partition (partitionFor(key, partition count)), creating the topic on
// first use. When that is this broker it waits (briefly) for the
// partition's load, so that the client's first request finds it loaded.
func (c *coordLog) coordinator(ctx context.Context, key string, partitionFor func(string, int) int32) (int32, error) {
	if err := c.s.node.Fresh(); err != nil {
		return -1, err
	}
	t, ok := c.s.lookupTopic(c.s.node.MetadataImage(), c.topic)
	if !ok {
		img, err := c.createTopic(ctx)
		if err != nil {
			return -1, err
		}
		if t, ok = img.Topic(c.topic); !ok {
			return -1, fmt.Errorf("%s not in metadata yet", c.topic)
		}
	}
	p := partitionFor(key, len(t.Partitions))
	leader := t.Partitions[p].Leader
	if leader == metadata.NoLeader {
		return -1, fmt.Errorf("%s-%d has no leader", c.topic, p)
	}
	if leader == c.s.nodeID {
		c.awaitLoad(ctx, p, t.Partitions[p].LeaderEpoch)
	}
	return leader, nil
}

// coordLoadWait bounds how long FindCoordinator waits for this broker to
// finish loading the partition it is about to name itself coordinator of.
const coordLoadWait = time.Second

// awaitLoad waits, at most coordLoadWait, until this broker has loaded
// partition p led at epoch. Named coordinator before that, a client's
// first request gets COORDINATOR_LOAD_IN_PROGRESS, on which librdkafka
// backs off about 3s; just after the topic is created or the leadership
// moved here the load usually takes milliseconds. A longer load still
// answers (with the coordinator) after the bound.
func (c *coordLog) awaitLoad(ctx context.Context, p, epoch int32) {
	deadline := time.Now().Add(coordLoadWait)
	for {
		c.mu.Lock()
		e, ok := c.loaded[p]
		c.mu.Unlock()
		if (ok && e == epoch) || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

func (c *coordLog) createTopic(ctx context.Context) (*metadata.Image, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if _, ok := c.s.node.MetadataImage().Topic(c.topic); ok {
		return c.s.node.MetadataImage(), nil
	}
	_, err := c.s.node.CreateTopic(ctx, controller.CreateTopicRequest{
		Name:              c.topic,
		Partitions:        int32(c.partitions),
		ReplicationFactor: c.rf, // <= 0: min(3, live brokers)
		Configs: map[string]string{
			// Kafka's offsets.topic.* / transaction.state.log.* settings:
			// compacted, never deleted by age or size.
			"cleanup.policy": "compact",
			"segment.bytes":  strconv.FormatInt(c.segmentBytes, 10),
		},
	})
	switch {
	case err == nil:
		c.s.log.Info("created internal topic", "topic", c.topic, "partitions", c.partitions)
	case errors.Is(err, metadata.ErrTopicExists):
		if err := c.s.node.Sync(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	if err := c.s.reconcile(); err != nil {
		c.s.log.Warn("reconcile after creating an internal topic", "topic", c.topic, "err", err)
	}
	return c.s.node.MetadataImage(), nil
}

// readRecords yields every record of part from its log start to its high
// watermark (toEnd: to the readable log end), in offset order. Batches
// are expected uncompressed (only the broker writes these topics). With
// markers, records carry their batch's producer and transactional flag
// and transaction markers are yielded; otherwise control batches are
// skipped.
func readRecords(part *engine.Partition, toEnd, markers bool) iter.Seq2[statelog.KV, error] {
	return func(yield func(statelog.KV, error) bool) {
		offset := part.Info().LogStartOffset
		buf := make([]byte, 0, 1<<20)
		name := part.Topic()
		for {
			var res engine.ReadResult
			var err error
			if toEnd {
				res, err = part.ReadReplica(offset, 1<<20)
			} else {
				res, err = part.Read(offset, 1<<20, true)
			}
			if err != nil {
				yield(statelog.KV{}, err)
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
				yield(statelog.KV{}, fmt.Errorf("reading %s-%d at %d: %w", name, part.Index(), offset, err))
				return
			}
			next, err := decodeBatches(name, buf, offset, markers, yield)
			if err != nil {
				yield(statelog.KV{}, err)
				return
			}
			if next < 0 {
				return // the consumer stopped
			}
			if next <= offset {
				yield(statelog.KV{}, fmt.Errorf("%s-%d: no progress reading at offset %d", name, part.Index(), offset))
				return
			}
			offset = next
		}
	}
}

// encodeBatch builds one uncompressed magic-2 record batch (base offset 0:
// the engine assigns offsets) holding kvs, all stamped ts, without a
// producer. A nil Value is a null value (a tombstone).
func encodeBatch(kvs []statelog.KV, ts int64) []byte {
	return encodeProducerBatch(kvs, ts, -1, -1, -1, false)
}

// encodeProducerBatch is encodeBatch for producer pid/epoch at base
// sequence seq, transactional or not.
func encodeProducerBatch(kvs []statelog.KV, ts int64, pid int64, epoch int16, seq int32, transactional bool) []byte {
	var attrs int16 // no codec, CreateTime
	if transactional {
		attrs |= records.AttrTransactional
	}
	// baseOffset 0, partitionLeaderEpoch 0 (both rewritten by the engine)
	h := records.Header{
		Attributes:    attrs,
		BaseTimestamp: ts,
		MaxTimestamp:  ts,
		ProducerID:    pid,
		ProducerEpoch: epoch,
		BaseSequence:  seq,
	}
	recs := make([]records.Record, len(kvs))
	for i, kv := range kvs {
		recs[i] = records.Record{OffsetDelta: int32(i), Key: kv.Key, Value: kv.Value}
	}
	return records.Encode(h, recs...)
}

// decodeBatches yields the records of the whole batches in buf with
// offsets >= from and returns the offset after the last batch, or -1 when
// yield asked to stop. topic names the log in errors. With markers, each
// record carries its batch's transactional flag and producer, and a
// control batch holding a transaction marker (control key: int16 version,
// int16 type, 0 abort, 1 commit) is yielded with Control set; other
// control records, and all of them without markers, are skipped.
func decodeBatches(topic string, buf []byte, from int64, markers bool, yield func(statelog.KV, error) bool) (int64, error) {
	next := from
	for len(buf) > 0 {
		batch, err := records.Parse(buf)
		if err != nil {
			break // a partial batch at the end of the range
		}
		buf = buf[len(batch.Raw):]
		base := batch.BaseOffset
		if batch.Magic != records.Magic {
			return 0, fmt.Errorf("%s: batch at offset %d has magic %d", topic, base, batch.Magic)
		}
		if !batch.CRCValid() {
			return 0, fmt.Errorf("%s: batch at offset %d fails its CRC", topic, base)
		}
		next = batch.LastOffset() + 1
		control := batch.IsControl()
		if control && !markers {
			continue
		}
		if c := batch.Codec(); c != 0 {
			return 0, fmt.Errorf("%s: batch at offset %d is compressed (codec %d); only the broker writes this topic", topic, base, c)
		}
		var ctx statelog.KV
		if markers {
			ctx.Transactional = batch.IsTransactional()
			ctx.ProducerID = batch.ProducerID
			ctx.ProducerEpoch = batch.ProducerEpoch
		}
		r := batch.Body()
		for i := 0; i < int(batch.RecordCount); i++ {
			kv, rest, delta, err := decodeRecord(r)
			if err != nil {
				return 0, fmt.Errorf("%s: batch at offset %d, record %d: %w", topic, base, i, err)
			}
			r = rest
			if base+delta < from {
				continue
			}
			kv.Transactional, kv.ProducerID, kv.ProducerEpoch = ctx.Transactional, ctx.ProducerID, ctx.ProducerEpoch
			if control {
				c, err := records.ParseControlKey(kv.Key, kv.Value)
				if err != nil {
					return 0, fmt.Errorf("%s: control record at offset %d has a %d-byte key", topic, base+delta, len(kv.Key))
				}
				switch c.Type {
				case records.ControlAbort:
					kv.Control = &statelog.Marker{Commit: false}
				case records.ControlCommit:
					kv.Control = &statelog.Marker{Commit: true}
				default:
					continue // not a transaction marker
				}
			}
			if !yield(kv, nil) {
				return -1, nil
			}
		}
	}
	return next, nil
}

var errShortRecord = errors.New("truncated record")

// decodeRecord parses the record at the start of b and returns it with
// its key and value copied (b is a reused read buffer), the rest of b and
// the record's offset delta.
func decodeRecord(b []byte) (statelog.KV, []byte, int64, error) {
	r, rest, err := records.NextRecord(b)
	if err != nil {
		return statelog.KV{}, nil, 0, errShortRecord
	}
	var kv statelog.KV
	if r.Key != nil {
		kv.Key = append([]byte{}, r.Key...)
	}
	if r.Value != nil {
		kv.Value = append([]byte{}, r.Value...)
	}
	return kv, rest, int64(r.OffsetDelta), nil
}
