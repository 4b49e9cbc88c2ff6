package txn

import (
	"sync"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Persister appends records to a __transaction_state partition. The
// coordinator calls Append while holding the transaction's lock, so one
// transaction's records reach the log in state order: Append must only
// enqueue and must not call back into the Manager. The Waiter reports
// durability (flushed and, with replication, acknowledged by the ISR); a
// failure meaning "no longer the leader" should wrap ErrNotCoordinator.
type Persister interface {
	Append(partition int32, records []statelog.KV) statelog.Waiter
}

// IDAllocator hands out producer ids. The broker's implementation takes
// them from blocks of 1000 the controller allocates (AllocateProducerIds,
// KIP-730) and should fetch the next block before the current one runs
// out. NextProducerID must not wait on the network: with no id at hand
// it returns an error and the client is told to retry
// (ErrCoordinatorLoadInProgress).
type IDAllocator interface {
	NextProducerID() (int64, error)
}

// Markers is one WriteTxnMarkers job: the commit or abort marker for one
// producer on every partition of its transaction.
type Markers struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// MarkerWriter writes transaction markers to the partitions' leaders (the
// broker implements it with WriteTxnMarkers). WriteMarkers must not block
// and must not call back into the Manager; its Waiter completes once every
// partition has the marker. The writer retries retriable errors itself
// (leader moves, NOT_ENOUGH_REPLICAS) and treats a partition whose topic
// was deleted as done, as Kafka does. A Waiter error makes the coordinator
// send the whole job again on a later Tick (markers are idempotent at the
// partition); one wrapping ErrNotCoordinator means this node lost the
// __transaction_state partition and the new coordinator will resend.
type MarkerWriter interface {
	WriteMarkers(m Markers) statelog.Waiter
}

// CounterIDAllocator hands out consecutive ids from Next; for tests and
// single-node setups without a controller allocating blocks.
type CounterIDAllocator struct {
	mu   sync.Mutex
	Next int64
}

// NextProducerID returns Next and increments it.
func (a *CounterIDAllocator) NextProducerID() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.Next
	a.Next++
	return id, nil
}
