package producerstate

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// NumBatchesToRetain is how many of a producer's latest batches are kept
// for duplicate detection: the Java producer's
// max.in.flight.requests.per.connection limit with idempotence, so every
// batch that can be in flight when a connection dies can be recognized.
const NumBatchesToRetain = 5

// Config holds the partition producer-state settings.
type Config struct {
	// ProducerIDExpiration removes a producer's state after this long
	// without an append (producer.id.expiration.ms, 1 day). Producers
	// with an ongoing transaction never expire here: the coordinator's
	// timeout aborts them first.
	ProducerIDExpiration time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{ProducerIDExpiration: 24 * time.Hour}
}

// Validate checks the fields.
func (c Config) Validate() error {
	if c.ProducerIDExpiration <= 0 {
		return fmt.Errorf("producerstate: ProducerIDExpiration %v must be positive", c.ProducerIDExpiration)
	}
	return nil
}

// BatchMetadata is one appended batch of a producer.
type BatchMetadata struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	// Timestamp is the append time given to Update (or the batch's max
	// timestamp when replayed); a duplicate's produce response reports it.
	Timestamp int64
}

// Decision is Check's answer: Duplicate is nil when the batch should be
// appended, otherwise it names the original append, whose offsets the
// produce response must carry; nothing is appended.
type Decision struct {
	Duplicate *BatchMetadata
}

// AbortedTxn is one aborted transaction: what Fetch returns to
// read_committed consumers and what .txnindex stores.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	// LastOffset is the abort marker's offset.
	LastOffset int64
	// LastStableOffset is the LSO right after the marker was appended
	// (only .txnindex keeps it; Fetch does not send it).
	LastStableOffset int64
}

// Marker is a transaction marker as WriteTxnMarkers delivers it.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

type producerEntry struct {
	epoch            int16
	batches          []BatchMetadata // oldest first, at most NumBatchesToRetain
	lastTimestamp    int64
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1: no ongoing transaction
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].LastSeq
}

type completedTxn struct {
	producerID              int64
	firstOffset, lastOffset int64
}

// State is one partition's producer state. The zero value is not usable;
// call New.
type State struct {
	cfg Config

	mu        sync.Mutex
	producers map[int64]*producerEntry
	// ongoing maps producer id -> first offset of its open transaction.
	ongoing map[int64]int64
	// unreplicated holds completed transactions whose marker may still be
	// at or above the high watermark: the LSO must not pass their first
	// offset until the marker is replicated, or a consumer could read the
	// transaction's records before its outcome is durable (Kafka does the
	// same).
	unreplicated []completedTxn
	aborted      []AbortedTxn // in marker (LastOffset) order
	mapEnd       int64        // next offset not yet applied
}

// New returns an empty state.
func New(cfg Config) (*State, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &State{cfg: cfg}
	s.reset()
	return s, nil
}

func (s *State) reset() {
	s.producers = make(map[int64]*producerEntry)
	s.ongoing = make(map[int64]int64)
	s.unreplicated = nil
	s.aborted = nil
	s.mapEnd = 0
}

// MapEndOffset is the offset after the last batch applied: a snapshot
// taken now lets recovery replay from here.
func (s *State) MapEndOffset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mapEnd
}

// Check decides whether a client's data batch may be appended. Only
// idempotent batches (ProducerID >= 0) are checked. Order follows Kafka:
// a duplicate of a retained batch of the same epoch wins over every
// other check, then the epoch, then the sequence.
func (s *State) Check(h BatchHeader) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return check(s.producers[h.ProducerID], h)
}

// CheckBatches checks several batches of one append in order, as if each
// earlier one had been appended, so a request holding consecutive
// batches of one producer passes. Nothing is changed: call Update for
// each batch once offsets are assigned.
func (s *State) CheckBatches(hs []BatchHeader) ([]Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scratch := make(map[int64]*producerEntry)
	out := make([]Decision, len(hs))
	for i, h := range hs {
		if !h.Idempotent() {
			continue
		}
		e, ok := scratch[h.ProducerID]
		if !ok {
			if cur := s.producers[h.ProducerID]; cur != nil {
				c := *cur
				c.batches = slices.Clone(cur.batches)
				e = &c
			}
		}
		d, err := check(e, h)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
		out[i] = d
		if d.Duplicate == nil {
			// Offsets are unknown before assignment; only sequence and
			// epoch matter for the batches that follow.
			if e == nil {
				e = &producerEntry{txnFirstOffset: -1}
			}
			update(e, h, -1, -1, 0)
			if h.Transactional && e.txnFirstOffset < 0 {
				e.txnFirstOffset = 0
			}
		}
		scratch[h.ProducerID] = e
	}
	return out, nil
}

func check(e *producerEntry, h BatchHeader) (Decision, error) {
	if !h.Idempotent() {
		return Decision{}, nil
	}
	if h.Control {
		return Decision{}, fmt.Errorf("%w: control batch from a client", ErrInvalidRecord)
	}
	if h.ProducerEpoch < 0 || h.BaseSequence < 0 {
		return Decision{}, fmt.Errorf("%w: producer %d with epoch %d and sequence %d", ErrInvalidRecord, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	if e == nil {
		return Decision{}, nil // unknown producer: accepted, see doc.go
	}
	if h.ProducerEpoch == e.epoch {
		last := h.LastSequence()
		for i := range e.batches {
			if b := e.batches[i]; b.FirstSeq == h.BaseSequence && b.LastSeq == last {
				dup := b
				return Decision{Duplicate: &dup}, nil
			}
		}
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return Decision{}, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return Decision{}, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
	default:
		if last := e.lastSeq(); !inSequence(last, h.BaseSequence) {
			return Decision{}, fmt.Errorf("%w: producer %d epoch %d expected sequence after %d, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, last, h.BaseSequence)
		}
	}
	if !h.Transactional && e.txnFirstOffset >= 0 {
		return Decision{}, fmt.Errorf("%w: non-transactional batch from producer %d with a transaction open at offset %d", ErrInvalidTxnState, h.ProducerID, e.txnFirstOffset)
	}
	return Decision{}, nil
}

// Update records a data batch the engine appended at [firstOffset,
// lastOffset] (after Check said Append). appendTimeMs is the broker's
// append time; it drives expiry and is what a duplicate reports.
func (s *State) Update(h BatchHeader, firstOffset, lastOffset, appendTimeMs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyData(h, firstOffset, lastOffset, appendTimeMs)
}

func (s *State) applyData(h BatchHeader, firstOffset, lastOffset, ts int64) {
	s.mapEnd = max(s.mapEnd, lastOffset+1)
	if !h.Idempotent() {
		return
	}
	e := s.producers[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1}
		s.producers[h.ProducerID] = e
	}
	update(e, h, firstOffset, lastOffset, ts)
	if h.Transactional && e.txnFirstOffset < 0 {
		e.txnFirstOffset = firstOffset
		s.ongoing[h.ProducerID] = firstOffset
	}
}

// update appends the batch to the entry's window; a new epoch starts a
// new window because sequences restart with it.
func update(e *producerEntry, h BatchHeader, firstOffset, lastOffset, ts int64) {
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == NumBatchesToRetain {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:NumBatchesToRetain-1]
	}
	e.batches = append(e.batches, BatchMetadata{
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(),
		FirstOffset: firstOffset, LastOffset: lastOffset, Timestamp: ts,
	})
	e.lastTimestamp = ts
}

// CheckMarker validates a transaction marker before the engine appends
// it: an older producer epoch is ErrProducerFenced, an older coordinator
// epoch ErrTransactionCoordinatorFenced.
func (s *State) CheckMarker(m Marker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return checkMarker(s.producers[m.ProducerID], m)
}

func checkMarker(e *producerEntry, m Marker) error {
	if e == nil {
		return nil
	}
	if m.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker for producer %d epoch %d, partition has %d", ErrProducerFenced, m.ProducerID, m.ProducerEpoch, e.epoch)
	}
	if m.CoordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, partition has seen %d", ErrTransactionCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// CompleteTxn records a marker the engine appended at markerOffset. It
// ends the producer's open transaction, if any; for an abort it returns
// the aborted-transaction entry, which the engine appends to the
// .txnindex of the segment holding the marker. A marker with a newer
// epoch (a coordinator fencing a timed-out producer) raises the
// producer's epoch, fencing its older data batches.
func (s *State) CompleteTxn(m Marker, markerOffset, appendTimeMs int64) (*AbortedTxn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkMarker(s.producers[m.ProducerID], m); err != nil {
		return nil, err
	}
	return s.applyMarker(m, markerOffset, appendTimeMs), nil
}

func (s *State) applyMarker(m Marker, off, ts int64) *AbortedTxn {
	s.mapEnd = max(s.mapEnd, off+1)
	e := s.producers[m.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: m.ProducerEpoch, coordinatorEpoch: m.CoordinatorEpoch, txnFirstOffset: -1}
		s.producers[m.ProducerID] = e
	}
	if m.ProducerEpoch > e.epoch {
		e.epoch = m.ProducerEpoch
		e.batches = e.batches[:0]
	}
	e.coordinatorEpoch = max(e.coordinatorEpoch, m.CoordinatorEpoch)
	e.lastTimestamp = ts
	first := e.txnFirstOffset
	if first < 0 {
		return nil // no data of this transaction here (or a resent marker)
	}
	e.txnFirstOffset = -1
	delete(s.ongoing, m.ProducerID)
	s.unreplicated = append(s.unreplicated, completedTxn{m.ProducerID, first, off})
	if m.Commit {
		return nil
	}
	// Kafka's LSO for the index entry: the first offset of another
	// producer's open transaction, else just past the marker.
	lso := off + 1
	for _, f := range s.ongoing {
		lso = min(lso, f)
	}
	a := AbortedTxn{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: off, LastStableOffset: lso}
	s.aborted = append(s.aborted, a)
	return &a
}

// ApplyBatch replays a batch from the log: recovery from a snapshot's
// offset, a follower appending its leader's batches, or a new leader that
// rebuilt from the log. No client checks run (the log is the truth); a
// control batch completes its producer's transaction. h must come from
// ParseBatch so BaseOffset and the control fields are set; the batch's
// MaxTimestamp stands in for the append time.
func (s *State) ApplyBatch(h BatchHeader) *AbortedTxn {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := h.BaseOffset + int64(h.LastOffsetDelta)
	if h.Control {
		s.mapEnd = max(s.mapEnd, last+1)
		if !h.Idempotent() || (h.ControlType != ControlAbort && h.ControlType != ControlCommit) {
			return nil
		}
		m := Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, Commit: h.ControlType == ControlCommit, CoordinatorEpoch: h.CoordinatorEpoch}
		return s.applyMarker(m, h.BaseOffset, h.MaxTimestamp)
	}
	s.applyData(h, h.BaseOffset, last, h.MaxTimestamp)
	return nil
}

// OngoingTxn returns the first offset of the producer's open transaction
// here. The broker uses it for KIP-890 verification: a transactional
// batch from a producer with no open transaction must first be verified
// with the coordinator (AddPartitionsToTxn verify_only).
func (s *State) OngoingTxn(producerID int64) (firstOffset int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.ongoing[producerID]
	return f, ok
}

// LastStableOffset is the offset read_committed consumers may read up to:
// the high watermark, or the first offset of the earliest transaction
// that is still open or whose marker is not below hw yet, if lower.
// Completed transactions whose marker is below hw are forgotten here, so
// hw must not go backwards between calls (it does not on a leader;
// truncation rebuilds the state).
func (s *State) LastStableOffset(hw int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onHighWatermark(hw)
	lso := hw
	for _, f := range s.ongoing {
		lso = min(lso, f)
	}
	for _, c := range s.unreplicated {
		lso = min(lso, c.firstOffset)
	}
	return lso
}

// OnHighWatermark forgets completed transactions whose marker is below
// hw. LastStableOffset does it too; a follower, which never asks for the
// LSO, calls this when its high watermark advances so the list stays
// short.
func (s *State) OnHighWatermark(hw int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onHighWatermark(hw)
}

func (s *State) onHighWatermark(hw int64) {
	s.unreplicated = slices.DeleteFunc(s.unreplicated, func(c completedTxn) bool { return c.lastOffset < hw })
}

// AbortedTxns lists the aborted transactions a fetch of [fetchOffset,
// upperOffset) must report: those whose range overlaps it (marker at or
// after fetchOffset, first offset below upperOffset), in marker order as
// Kafka's index returns them.
func (s *State) AbortedTxns(fetchOffset, upperOffset int64) []AbortedTxn {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.aborted, fetchOffset, func(a AbortedTxn, off int64) int {
		switch {
		case a.LastOffset < off:
			return -1
		case a.LastOffset > off:
			return 1
		}
		return 0
	})
	// FirstOffset is not ordered, so every later entry is a candidate.
	var out []AbortedTxn
	for _, a := range s.aborted[i:] {
		if a.FirstOffset < upperOffset {
			out = append(out, a)
		}
	}
	return out
}

// DropAbortedBefore forgets aborted transactions whose marker is below
// logStartOffset (retention deleted them).
func (s *State) DropAbortedBefore(logStartOffset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = slices.DeleteFunc(s.aborted, func(a AbortedTxn) bool { return a.LastOffset < logStartOffset })
}

// RemoveExpired drops producers idle for ProducerIDExpiration as of nowMs
// and returns how many. Producers with an open transaction stay.
func (s *State) RemoveExpired(nowMs int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, e := range s.producers {
		if e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= s.cfg.ProducerIDExpiration.Milliseconds() {
			delete(s.producers, id)
			n++
		}
	}
	return n
}

// ProducerInfo describes one producer (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32 // -1 when no batch in this epoch
	LastTimestamp    int64
	CoordinatorEpoch int32
	// TxnFirstOffset is the open transaction's first offset, -1 if none.
	TxnFirstOffset int64
	Batches        []BatchMetadata
}

// Producers lists every producer, sorted by id.
func (s *State) Producers() []ProducerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProducerInfo, 0, len(s.producers))
	for id, e := range s.producers {
		out = append(out, ProducerInfo{
			ProducerID: id, Epoch: e.epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, TxnFirstOffset: e.txnFirstOffset, Batches: slices.Clone(e.batches),
		})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmpInt64(a.ProducerID, b.ProducerID) })
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
