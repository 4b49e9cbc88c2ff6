package producerstate

import "errors"

// Errors Check, CheckMarker and CompleteTxn return. Each maps to the Kafka
// error code named in its comment; netpath translates with errors.Is.
var (
	// ErrOutOfOrderSequence: OUT_OF_ORDER_SEQUENCE_NUMBER (45). The batch's
	// first sequence does not follow the producer's last one (a gap, or a
	// retry older than the last 5 batches), or a new epoch does not start
	// at 0.
	ErrOutOfOrderSequence = errors.New("producerstate: out of order sequence number")
	// ErrInvalidProducerEpoch: INVALID_PRODUCER_EPOCH (47). A data batch
	// from an epoch older than the partition's. Since Kafka 2.7 produce
	// answers this (abortable) instead of PRODUCER_FENCED (fatal).
	ErrInvalidProducerEpoch = errors.New("producerstate: invalid producer epoch")
	// ErrProducerFenced: PRODUCER_FENCED (90). A transaction marker for an
	// epoch older than the partition's: a newer producer took over.
	ErrProducerFenced = errors.New("producerstate: producer fenced")
	// ErrTransactionCoordinatorFenced: TRANSACTION_COORDINATOR_FENCED (52).
	// A marker from a coordinator epoch older than one already seen: a
	// zombie coordinator.
	ErrTransactionCoordinatorFenced = errors.New("producerstate: transaction coordinator fenced")
	// ErrInvalidTxnState: INVALID_TXN_STATE (48). A non-transactional batch
	// from a producer whose transaction is still open here; appending it
	// would put it inside the transaction's range.
	ErrInvalidTxnState = errors.New("producerstate: invalid transaction state")
	// ErrInvalidRecord: INVALID_RECORD (87). An idempotent batch without a
	// usable epoch or sequence, or a control batch sent by a client.
	ErrInvalidRecord = errors.New("producerstate: invalid record")
	// ErrCorruptBatch: CORRUPT_MESSAGE (2). ParseBatch got too few bytes or
	// a control batch whose record does not parse.
	ErrCorruptBatch = errors.New("producerstate: corrupt batch")
	// ErrCorruptSnapshot is not a Kafka code: Restore refuses the snapshot
	// (bad magic, version, CRC or lengths) and the engine must rebuild from
	// an older snapshot or the log.
	ErrCorruptSnapshot = errors.New("producerstate: corrupt snapshot")
	// ErrCorruptTxnIndex is not a Kafka code: a .txnindex with a torn tail
	// or an unknown entry version.
	ErrCorruptTxnIndex = errors.New("producerstate: corrupt transaction index")
)
