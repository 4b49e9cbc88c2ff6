package loadgen

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoEmitter sends through franz-go, for comparison with the lean client.
// It allocates a record and a value per message, which is the point of the
// comparison.
type kgoEmitter struct {
	st     *runState
	client *kgo.Client
	ctx    context.Context
}

func kgoCompression(c Codec) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLZ4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func newKgoEmitter(st *runState) (*kgoEmitter, error) {
	cfg := st.cfg
	acks := kgo.AllISRAcks()
	switch cfg.Acks {
	case 0:
		acks = kgo.NoAck()
	case 1:
		acks = kgo.LeaderAck()
	}
	opts, err := cfg.kgoOpts(clientID)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(acks),
		// Idempotence would need acks=all and adds sequence bookkeeping the
		// lean client does not do; keep the two paths comparable.
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.BatchBytes)),
		kgo.ProducerBatchCompression(kgoCompression(cfg.Compression)),
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		kgo.MaxProduceRequestsInflightPerBroker(cfg.MaxInFlight),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		// The lean client's retry policy: the same backoff schedule and
		// delivery timeout, and the same optional bound on re-sends. Its
		// failed attempts reach the report through its log (kgoRetryLog).
		kgo.RetryBackoffFn(Backoff{Base: cfg.RetryBackoff, Max: cfg.RetryBackoffMax}.kgoBackoff()),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		// kgo re-sends a batch that failed with a partition error (for
		// example KAFKA_STORAGE_ERROR) only after a metadata refresh, and
		// spaces refreshes by MetadataMinAge (default 5 s): at the backoff
		// cap, a failing partition is re-tried about as often as the lean
		// client re-tries one at its cap.
		kgo.MetadataMinAge(cfg.RetryBackoffMax),
		kgo.WithLogger(kgoRetryLog{st}),
	)
	if cfg.Retries > 0 {
		opts = append(opts, kgo.RecordRetries(cfg.Retries))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kgoEmitter{st: st, client: cl, ctx: context.Background()}, nil
}

// kgoStale: an add returning this long after the caller's clock reading
// reports addedAfterWait, so the caller reads the clock again. Produce
// blocks while kgo's buffer is full; timing it costs one clock read, small
// next to the record and value this path allocates per message.
const kgoStale = int64(200 * time.Microsecond)

// add blocks in Produce while kgo's buffer is full, also after an
// interrupt: the record's context must stay uncancelled, or kgo would fail
// the records already buffered with it. So with a hung broker an interrupt
// of a kgo run waits for acks to free the buffer (a second signal kills),
// unlike the lean client, which gives up waiting for request memory.
func (e *kgoEmitter) add(i uint64, intended, now, key int64) addResult {
	value := make([]byte, e.st.cfg.MessageSize)
	e.st.valueHead(value, intended)
	copy(value[valueHeaderLen:], e.st.fillerFor(i))
	r := &kgo.Record{Value: value, Timestamp: time.Unix(0, e.st.t0WallNs+intended)}
	if key >= 0 {
		r.Key = e.st.keys[key]
	}
	e.client.Produce(e.ctx, r, func(r *kgo.Record, err error) {
		if err != nil {
			e.st.c.fail(1, err)
			return
		}
		at := e.st.now()
		// The value header carries the exact intended time; the record
		// timestamp is only millisecond precise on the wire.
		it := int64(binary.BigEndian.Uint64(r.Value[8:])) - e.st.t0WallNs
		e.st.ack.recordOne(at, it, e.st.measureNs)
		e.st.c.acked.Add(1)
		if it >= e.st.measureNs {
			e.st.c.measuredAcked.Add(1)
			e.st.c.bytesAcked.Add(int64(len(r.Value)))
			if int(r.Partition) < len(e.st.partAcked) {
				e.st.partAcked[r.Partition].Add(1)
			}
		}
	})
	if e.st.now()-now > kgoStale {
		return addedAfterWait
	}
	return added
}

func (e *kgoEmitter) tick(int64) int64 { return never }
func (e *kgoEmitter) finish()          {}

func (e *kgoEmitter) wait(ctx context.Context) {
	if err := e.client.Flush(ctx); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx) // the drain timeout or the interrupt, not "context canceled"
		}
		e.st.c.fail(0, fmt.Errorf("flush: %w", err))
	}
	// Close fails whatever is still buffered through the callbacks.
	e.client.Close()
}
