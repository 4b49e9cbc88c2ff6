package txn

import "errors"

// Errors the transaction coordinator returns. Each maps to exactly one
// Kafka error code (named in its comment); netpath translates them with
// errors.Is, so wrapped errors keep their code.
var (
	// ErrNotCoordinator: NOT_COORDINATOR (16). This node does not own the
	// transactional id's __transaction_state partition (or lost it).
	ErrNotCoordinator = errors.New("txn: not the coordinator for this transactional id")
	// ErrCoordinatorLoadInProgress: COORDINATOR_LOAD_IN_PROGRESS (14). The
	// partition is owned but still loading, or no producer id block is
	// available yet (Kafka answers the same, KIP-730).
	ErrCoordinatorLoadInProgress = errors.New("txn: coordinator load in progress")
	// ErrCoordinatorNotAvailable: COORDINATOR_NOT_AVAILABLE (15). Appending
	// the transaction's record failed; the client rediscovers and retries.
	ErrCoordinatorNotAvailable = errors.New("txn: coordinator not available")
	// ErrInvalidRequest: INVALID_REQUEST (42). An empty transactional id.
	ErrInvalidRequest = errors.New("txn: invalid request")
	// ErrInvalidProducerIDMapping: INVALID_PRODUCER_ID_MAPPING (49). The
	// transactional id is unknown or holds another producer id.
	ErrInvalidProducerIDMapping = errors.New("txn: invalid producer id mapping")
	// ErrInvalidProducerEpoch: INVALID_PRODUCER_EPOCH (47). Not returned by
	// the machine: netpath answers it instead of ErrProducerFenced to
	// clients too old to know PRODUCER_FENCED (EndTxn v0-1,
	// AddPartitionsToTxn v0-1, AddOffsetsToTxn v0-1, InitProducerId v0-2),
	// as Kafka does.
	ErrInvalidProducerEpoch = errors.New("txn: invalid producer epoch")
	// ErrProducerFenced: PRODUCER_FENCED (90). The request's epoch is not
	// the current one: another producer with this transactional id (or a
	// timeout abort) bumped it.
	ErrProducerFenced = errors.New("txn: producer fenced")
	// ErrConcurrentTransactions: CONCURRENT_TRANSACTIONS (51). A previous
	// transaction is still completing (markers not yet written, or a
	// record append in flight); the client retries with backoff.
	ErrConcurrentTransactions = errors.New("txn: concurrent transactions")
	// ErrInvalidTxnState: INVALID_TXN_STATE (48). The request does not fit
	// the state (EndTxn with nothing open, commit after abort...); also a
	// verify_only partition that is not in the transaction.
	ErrInvalidTxnState = errors.New("txn: invalid transaction state")
	// ErrTransactionalIDNotFound: TRANSACTIONAL_ID_NOT_FOUND (105).
	// DescribeTransactions of an id this coordinator does not know.
	ErrTransactionalIDNotFound = errors.New("txn: transactional id not found")
	// ErrInvalidTransactionTimeout: INVALID_TRANSACTION_TIMEOUT (50). Not
	// in (0, MaxTransactionTimeout].
	ErrInvalidTransactionTimeout = errors.New("txn: invalid transaction timeout")
)
