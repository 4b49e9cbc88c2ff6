package group

import (
	"errors"
	"sync"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Persister appends records to a __consumer_offsets partition. The
// coordinator calls Append while holding a group's lock, so records of one
// group reach the log in the order of the state changes they describe.
// Append must therefore only enqueue: it must not wait for durability and
// must not call back into the Manager. The returned Waiter reports when the
// records are durable (for ringlog: flushed and, with replication,
// committed by the ISR), or why they never will be.
type Persister interface {
	Append(partition int32, records []statelog.KV) statelog.Waiter
}

// TxnPersister is the part of the persister contract that transactional
// offset commits need. It is a separate interface so that a Persister
// written before it still compiles; NewManager picks it up with a type
// assertion, and without it CommitTxnOffsets answers
// ErrCoordinatorNotAvailable.
//
// AppendTxn appends records as one transactional record batch (attributes
// bit 4 set) carrying producerID and producerEpoch, so the log's producer
// state sees the transaction and a later marker for producerID on this
// partition ends it. The rules of Append hold: it is called with the
// group's lock held, must only enqueue, must not call back into the
// Manager, and its Waiter reports durability. Appends through Append and
// AppendTxn to one partition must reach the log in call order: the
// coordinator orders plain and transactional commits of a partition by
// that order (see CompleteTxn). A failure because the log fenced the
// producer (stale epoch) should wrap ErrInvalidProducerEpoch so the client
// is told; other failures map as for Append.
type TxnPersister interface {
	AppendTxn(partition int32, producerID int64, producerEpoch int16, records []statelog.KV) statelog.Waiter
}

// MemoryPersister keeps appended records in memory, per partition, in
// append order. Tests use it to inspect what the machine wrote and to feed
// Load; Hold and Release let a test keep appends pending, and Fail makes
// them fail, so "acknowledged only after durable" can be checked.
type MemoryPersister struct {
	mu      sync.Mutex
	parts   map[int32][]statelog.KV
	held    bool
	pending []chan error
	failErr error
}

// NewMemoryPersister returns an empty MemoryPersister.
func NewMemoryPersister() *MemoryPersister {
	return &MemoryPersister{parts: make(map[int32][]statelog.KV)}
}

// Append records the KVs and returns a Waiter that completes at once unless
// the persister is held.
func (p *MemoryPersister) Append(partition int32, records []statelog.KV) statelog.Waiter {
	return p.append(partition, records)
}

// AppendTxn implements TxnPersister: the KVs are stored with the batch
// context the loader would read back (Transactional, producer id and
// epoch), so Load sees what it would see on a real partition.
func (p *MemoryPersister) AppendTxn(partition int32, producerID int64, producerEpoch int16, records []statelog.KV) statelog.Waiter {
	kvs := make([]statelog.KV, len(records))
	for i, kv := range records {
		kvs[i] = statelog.KV{Key: kv.Key, Value: kv.Value, Transactional: true, ProducerID: producerID, ProducerEpoch: producerEpoch}
	}
	return p.append(partition, kvs)
}

// AppendMarker appends a transaction marker for producerID, as the broker
// does for WriteTxnMarkers. Key is Kafka's control record key (version 0,
// type 0 abort / 1 commit), for realism only: Load reads Control.
func (p *MemoryPersister) AppendMarker(partition int32, producerID int64, producerEpoch int16, commit bool) statelog.Waiter {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	return p.append(partition, []statelog.KV{{Key: key, Transactional: true, ProducerID: producerID,
		ProducerEpoch: producerEpoch, Control: &statelog.Marker{Commit: commit}}})
}

func (p *MemoryPersister) append(partition int32, records []statelog.KV) statelog.Waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failErr != nil {
		err := p.failErr
		return statelog.WaiterFunc(func() error { return err })
	}
	p.parts[partition] = append(p.parts[partition], records...)
	if !p.held {
		return statelog.Done
	}
	ch := make(chan error, 1)
	p.pending = append(p.pending, ch)
	return statelog.WaiterFunc(func() error { return <-ch })
}

// Hold keeps later appends pending until Release.
func (p *MemoryPersister) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Release completes every pending append with err and stops holding.
func (p *MemoryPersister) Release(err error) {
	p.mu.Lock()
	pend := p.pending
	p.pending, p.held = nil, false
	p.mu.Unlock()
	for _, ch := range pend {
		ch <- err
	}
}

// Fail makes later appends fail with err (nil clears it) without storing
// their records.
func (p *MemoryPersister) Fail(err error) {
	p.mu.Lock()
	p.failErr = err
	p.mu.Unlock()
}

// Records returns a copy of what was appended to partition, in order.
func (p *MemoryPersister) Records(partition int32) []statelog.KV {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]statelog.KV(nil), p.parts[partition]...)
}

// ErrAppendFailed is what tests pass to Fail or Release; it is not a Kafka
// code, the coordinator wraps append failures in ErrCoordinatorNotAvailable.
var ErrAppendFailed = errors.New("group: append failed")
