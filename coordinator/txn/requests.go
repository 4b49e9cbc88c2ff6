package txn

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// OffsetsTopic is where AddOffsetsToTxn's group partition lives.
const OffsetsTopic = "__consumer_offsets"

// InitProducerIDRequest is InitProducerId. netpath fills ProducerID and
// ProducerEpoch from v3+ requests (KIP-360) and sets them to -1 otherwise.
type InitProducerIDRequest struct {
	// TransactionalID is nil for an idempotent-only producer.
	TransactionalID    *string
	TransactionTimeout time.Duration
	ProducerID         int64
	ProducerEpoch      int16
}

// InitProducerIDResult is InitProducerId's answer.
type InitProducerIDResult struct {
	Err           error
	ProducerID    int64
	ProducerEpoch int16
}

// AddPartitionsRequest is one transaction of AddPartitionsToTxn (v3 has
// one; v4+ batches several, which netpath sends here one by one).
type AddPartitionsRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partitions      []TopicPartition
	// VerifyOnly (v4+, brokers only, KIP-890 part 1) asks whether each
	// partition is already in the transaction without adding it.
	VerifyOnly bool
}

// PartitionResult is one partition's answer.
type PartitionResult struct {
	TopicPartition
	Err error
}

// EndTxnRequest is EndTxn.
type EndTxnRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
}

// InitProducerID answers InitProducerId. Without a transactional id it
// just hands out a new producer id with epoch 0 (any broker may answer
// that). With one it bumps the epoch, fencing every older producer of
// the id; an Ongoing transaction of the old producer is aborted first and
// the caller gets ErrConcurrentTransactions to retry once it completes.
// An exhausted epoch moves the id to a new producer id.
func (m *Manager) InitProducerID(req InitProducerIDRequest) *Future[InitProducerIDResult] {
	fail := func(err error) *Future[InitProducerIDResult] {
		return resolved(InitProducerIDResult{Err: err, ProducerID: -1, ProducerEpoch: -1})
	}
	if req.TransactionalID == nil {
		id, err := m.allocate()
		if err != nil {
			return fail(err)
		}
		return resolved(InitProducerIDResult{ProducerID: id, ProducerEpoch: 0})
	}
	id := *req.TransactionalID
	if id == "" {
		return fail(ErrInvalidRequest)
	}
	if req.TransactionTimeout <= 0 || req.TransactionTimeout > m.cfg.MaxTransactionTimeout {
		return fail(fmt.Errorf("%w: %v not in (0, %v]", ErrInvalidTransactionTimeout, req.TransactionTimeout, m.cfg.MaxTransactionTimeout))
	}
	t, err := m.lockTxn(id, true)
	if err != nil {
		return fail(err)
	}
	defer t.mu.Unlock()
	expected := req.ProducerID >= 0 && req.ProducerEpoch >= 0
	cur := t.meta
	if t.pending {
		return fail(ErrConcurrentTransactions)
	}
	if cur.ProducerID < 0 {
		pid, err := m.allocate()
		if err != nil {
			return fail(err)
		}
		cur.ProducerID = pid // epoch -1: the bump below makes it 0
	} else if expected && !(cur.ProducerEpoch == -1 || req.ProducerID == cur.ProducerID ||
		(req.ProducerID == t.lastProducerID && exhausted(req.ProducerEpoch))) {
		return fail(fmt.Errorf("%w: producer %d/%d is not the current %d/%d", ErrProducerFenced, req.ProducerID, req.ProducerEpoch, cur.ProducerID, cur.ProducerEpoch))
	}
	switch cur.State {
	case Empty, CompleteCommit, CompleteAbort:
	case Ongoing:
		f := newFuture[InitProducerIDResult]()
		m.fenceAndAbort(t, func(err error) {
			if err == nil {
				err = fmt.Errorf("%w: aborting the previous producer's transaction", ErrConcurrentTransactions)
			}
			f.Resolve(InitProducerIDResult{Err: err, ProducerID: -1, ProducerEpoch: -1})
		})
		return f
	default: // Prepare*, or a transition Kafka keeps pending
		return fail(ErrConcurrentTransactions)
	}
	next := cur.clone()
	next.TimeoutMs = int32(req.TransactionTimeout.Milliseconds())
	next.State, next.Partitions, next.StartMs, next.LastUpdateMs = Empty, nil, -1, m.nowMs()
	lastPID, lastEpoch := cur.ProducerID, int16(-1)
	switch {
	case exhausted(cur.ProducerEpoch) && (!expected || req.ProducerEpoch == cur.ProducerEpoch):
		pid, err := m.allocate()
		if err != nil {
			return fail(err)
		}
		next.ProducerID, next.ProducerEpoch = pid, 0
		if expected {
			lastEpoch = cur.ProducerEpoch
		}
	case !expected:
		next.ProducerEpoch++
	case cur.ProducerEpoch == -1 || req.ProducerEpoch == cur.ProducerEpoch:
		next.ProducerEpoch++
		lastEpoch = cur.ProducerEpoch
	case req.ProducerEpoch == t.lastEpoch:
		// A retry of a bump whose answer was lost: same answer, no write.
		return resolved(InitProducerIDResult{ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch})
	default:
		return fail(fmt.Errorf("%w: epoch %d is neither current %d nor last %d", ErrProducerFenced, req.ProducerEpoch, cur.ProducerEpoch, t.lastEpoch))
	}
	f := newFuture[InitProducerIDResult]()
	m.write(t, &next, func(err error) {
		if err != nil {
			f.Resolve(InitProducerIDResult{Err: err, ProducerID: -1, ProducerEpoch: -1})
			return
		}
		t.lastProducerID, t.lastEpoch = lastPID, lastEpoch
		f.Resolve(InitProducerIDResult{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch})
	})
	return f
}

// exhausted: one epoch is kept in reserve so a timeout can still fence
// the producer (Kafka's isEpochExhausted).
func exhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

func (m *Manager) allocate() (int64, error) {
	id, err := m.ids.NextProducerID()
	if err != nil {
		return -1, fmt.Errorf("%w: no producer id available: %w", ErrCoordinatorLoadInProgress, err)
	}
	return id, nil
}

// checkProducer validates the producer of a request against t. t.mu held;
// t may be nil (unknown id).
func checkProducer(t *txn, pid int64, epoch int16) error {
	switch {
	case t == nil || t.meta.ProducerID < 0 || t.meta.ProducerID != pid:
		return ErrInvalidProducerIDMapping
	case t.meta.ProducerEpoch != epoch:
		return fmt.Errorf("%w: epoch %d, current %d", ErrProducerFenced, epoch, t.meta.ProducerEpoch)
	}
	return nil
}

// AddPartitions answers AddPartitionsToTxn: the partitions join the
// transaction (starting it if none is open) once the record is durable.
// With VerifyOnly nothing changes: each partition is answered nil if it
// is in the open transaction, ErrInvalidTxnState if not.
func (m *Manager) AddPartitions(req AddPartitionsRequest) *Future[[]PartitionResult] {
	all := func(err error) []PartitionResult {
		out := make([]PartitionResult, len(req.Partitions))
		for i, tp := range req.Partitions {
			out[i] = PartitionResult{tp, err}
		}
		return out
	}
	f := newFuture[[]PartitionResult]()
	m.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Partitions, req.VerifyOnly, func(err error, perPart []PartitionResult) {
		if perPart != nil {
			f.Resolve(perPart)
		} else {
			f.Resolve(all(err))
		}
	})
	return f
}

// AddOffsets answers AddOffsetsToTxn: the group's __consumer_offsets
// partition joins the transaction, so the group coordinator gets a
// marker that makes the transaction's offset commits visible or drops
// them.
func (m *Manager) AddOffsets(transactionalID string, producerID int64, producerEpoch int16, groupID string) *Future[error] {
	tp := TopicPartition{OffsetsTopic, PartitionFor(groupID, m.cfg.OffsetsTopicPartitions)}
	f := newFuture[error]()
	m.addPartitions(transactionalID, producerID, producerEpoch, []TopicPartition{tp}, false, func(err error, _ []PartitionResult) { f.Resolve(err) })
	return f
}

// addPartitions calls done exactly once, possibly later from a goroutine.
func (m *Manager) addPartitions(id string, pid int64, epoch int16, tps []TopicPartition, verify bool, done func(error, []PartitionResult)) {
	t, err := m.lockTxn(id, false)
	if err != nil {
		done(err, nil)
		return
	}
	if t == nil {
		done(ErrInvalidProducerIDMapping, nil)
		return
	}
	defer t.mu.Unlock()
	if err := checkProducer(t, pid, epoch); err != nil {
		done(err, nil)
		return
	}
	st := t.meta.State
	if verify {
		if st == PrepareCommit || st == PrepareAbort {
			done(ErrConcurrentTransactions, nil)
			return
		}
		out := make([]PartitionResult, len(tps))
		for i, tp := range tps {
			out[i].TopicPartition = tp
			if st != Ongoing || !slices.Contains(t.meta.Partitions, tp) {
				out[i].Err = ErrInvalidTxnState
			}
		}
		done(nil, out)
		return
	}
	switch {
	case st == PrepareCommit, st == PrepareAbort:
		// Ending the previous transaction: the client backs off.
		done(ErrConcurrentTransactions, nil)
		return
	case t.pending:
		// Another partition's AddPartitions (or this transaction's first
		// record) is being written: answer after it, from the state it
		// leaves, instead of sending the client into a back-off for a
		// write that takes milliseconds.
		t.queued = append(t.queued, func() { m.addPartitions(id, pid, epoch, tps, verify, done) })
		return
	case st == Ongoing && subset(tps, t.meta.Partitions):
		done(nil, nil)
		return
	case st != Empty && st != Ongoing && st != CompleteCommit && st != CompleteAbort:
		done(fmt.Errorf("%w: %v", ErrInvalidTxnState, st), nil)
		return
	}
	next := t.meta.clone()
	now := m.nowMs()
	if st != Ongoing {
		next.StartMs = now
		next.Partitions = nil
	}
	next.State, next.LastUpdateMs = Ongoing, now
	for _, tp := range tps {
		if !slices.Contains(next.Partitions, tp) {
			next.Partitions = append(next.Partitions, tp)
		}
	}
	sortPartitions(next.Partitions)
	m.write(t, &next, func(err error) { done(err, nil) })
}

func subset(a, of []TopicPartition) bool {
	for _, tp := range a {
		if !slices.Contains(of, tp) {
			return false
		}
	}
	return true
}

// EndTxn answers EndTxn. Commit or abort moves an Ongoing transaction to
// PrepareCommit/PrepareAbort; the answer comes once that record is
// durable, and the markers and the Complete record follow in the
// background (until then the id answers ErrConcurrentTransactions). A
// retry after completion with the same outcome succeeds; the other
// outcome is ErrInvalidTxnState.
func (m *Manager) EndTxn(req EndTxnRequest) *Future[error] {
	t, err := m.lockTxn(req.TransactionalID, false)
	if err != nil {
		return resolved(err)
	}
	if t == nil {
		return resolved(ErrInvalidProducerIDMapping)
	}
	defer t.mu.Unlock()
	if err := checkProducer(t, req.ProducerID, req.ProducerEpoch); err != nil {
		return resolved(err)
	}
	if t.pending {
		return resolved(ErrConcurrentTransactions)
	}
	st := t.meta.State
	verb := "abort"
	if req.Commit {
		verb = "commit"
	}
	wrong := fmt.Errorf("%w: %s while %v", ErrInvalidTxnState, verb, st)
	switch st {
	case Ongoing:
	case CompleteCommit, CompleteAbort:
		if (st == CompleteCommit) == req.Commit {
			return resolved[error](nil) // a retry of what already happened
		}
		return resolved(wrong)
	case PrepareCommit, PrepareAbort:
		if (st == PrepareCommit) == req.Commit {
			return resolved(ErrConcurrentTransactions)
		}
		return resolved(wrong)
	default:
		return resolved(wrong)
	}
	next := t.meta.clone()
	next.State = PrepareAbort
	if req.Commit {
		next.State = PrepareCommit
	}
	next.LastUpdateMs = m.nowMs()
	f := newFuture[error]()
	m.write(t, &next, func(err error) {
		if err != nil || m.cfg.EndTxnWait == 0 {
			if err == nil {
				m.sendMarkers(t)
			}
			f.Resolve(err)
			return
		}
		// Decided; answer once the markers are out (settle) or after
		// EndTxnWait, whichever comes first.
		var once sync.Once
		answer := func() { once.Do(func() { f.Resolve(nil) }) }
		t.onSettled = append(t.onSettled, answer)
		time.AfterFunc(m.cfg.EndTxnWait, answer)
		m.sendMarkers(t)
	})
	return f
}

// Description is one transactional id as DescribeTransactions shows it.
type Description struct {
	TransactionalID string
	State           State
	ProducerID      int64
	ProducerEpoch   int16
	TimeoutMs       int32
	StartMs         int64
	Partitions      []TopicPartition
}

// Describe answers DescribeTransactions for one id.
func (m *Manager) Describe(transactionalID string) (Description, error) {
	t, err := m.lockTxn(transactionalID, false)
	if err != nil {
		return Description{}, err
	}
	if t == nil {
		return Description{}, ErrTransactionalIDNotFound
	}
	defer t.mu.Unlock()
	if t.meta.ProducerID < 0 {
		return Description{}, ErrTransactionalIDNotFound
	}
	return Description{
		TransactionalID: t.id, State: t.meta.State, ProducerID: t.meta.ProducerID, ProducerEpoch: t.meta.ProducerEpoch,
		TimeoutMs: t.meta.TimeoutMs, StartMs: t.meta.StartMs, Partitions: slices.Clone(t.meta.Partitions),
	}, nil
}
