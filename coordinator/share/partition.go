package share

import (
	"fmt"
	"time"
)

// RecordState is the state of one in-flight record.
type RecordState int8

// Record states (Kafka's RecordState values, as __share_group_state
// stores them).
const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archived     RecordState = 4
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge.
type AckType int8

// Acknowledgement types (KIP-932, renew from KIP-1222).
const (
	AckGap     AckType = 0 // no record at the offset: archive it
	AckAccept  AckType = 1
	AckRelease AckType = 2 // hand it to a consumer again
	AckReject  AckType = 3 // never deliver it again
	AckRenew   AckType = 4 // extend the lock
)

// record is one in-flight offset.
type record struct {
	state      RecordState
	deliveries int16
	owner      string    // member holding the lock, while Acquired
	deadline   time.Time // lock expiry, while Acquired
}

// Span is one record batch a read of the log returned: offsets First to
// Last. A batch that is not Deliverable (a control batch, or an aborted
// or still-open transaction's records under read_committed) is archived
// when the window reaches it.
type Span struct {
	First, Last int64
	Deliverable bool
}

// Lease is a run of offsets acquired for one consumer, all with the
// same delivery count.
type Lease struct {
	First, Last   int64
	DeliveryCount int16
}

// Ack is one acknowledgement range. Types holds one type for the whole
// range or one per offset.
type Ack struct {
	First, Last int64
	Types       []AckType
}

// Counters are a partition's lifetime counts (for metrics).
type Counters struct {
	Delivered    int64 // acquisitions, redeliveries included
	Redelivered  int64 // acquisitions with delivery count > 1
	LockTimeouts int64 // locks that expired
	Archived     int64 // records archived (rejected, gaps, delivery limit)
}

// Partition is one share-partition: a group's consumption state of one
// topic partition. It is not safe for concurrent use (Manager locks it).
type Partition struct {
	start int64    // SPSO
	recs  []record // offsets [start, start+len(recs)); start+len is SPEO
	// nextDeadline is the earliest lock deadline, zero when none is held:
	// Tick skips the scan before it.
	nextDeadline time.Time
	counters     Counters
}

// NewPartition returns a share-partition starting at start with nothing in
// flight.
func NewPartition(start int64) *Partition { return &Partition{start: start} }

// Start is the share-partition start offset.
func (p *Partition) Start() int64 { return p.start }

// End is the share-partition end offset: the first offset never acquired.
func (p *Partition) End() int64 { return p.start + int64(len(p.recs)) }

// Counters returns the lifetime counts.
func (p *Partition) Counters() Counters { return p.counters }

// State returns the state and delivery count of offset o; offsets below
// the start read as Acknowledged, offsets at or above the end as
// Available with no delivery.
func (p *Partition) State(o int64) (RecordState, int16) {
	switch {
	case o < p.start:
		return Acknowledged, 0
	case o >= p.End():
		return Available, 0
	}
	r := p.recs[o-p.start]
	return r.state, r.deliveries
}

// InFlight counts the window's records in state s.
func (p *Partition) InFlight(s RecordState) int {
	n := 0
	for i := range p.recs {
		if p.recs[i].state == s {
			n++
		}
	}
	return n
}

// Done counts the window's records that are finished (acknowledged or
// archived) but above the start, held back by an unfinished one below.
func (p *Partition) Done() int {
	return p.InFlight(Acknowledged) + p.InFlight(Archived)
}

// Trim moves the start up to logStart when retention or DeleteRecords
// removed the records below it: those are gone, whatever their state.
func (p *Partition) Trim(logStart int64) {
	if logStart <= p.start {
		return
	}
	if n := logStart - p.start; n >= int64(len(p.recs)) {
		p.recs = p.recs[:0]
	} else {
		p.recs = p.recs[n:]
	}
	p.start = logStart
	p.advance()
}

// NextOffset is where a read for an acquisition should start: the first
// Available record of the window, else the end if the window has room
// and limit (the high watermark or last stable offset) is above it.
// ok is false when nothing can be acquired now.
func (p *Partition) NextOffset(limit int64, maxLocks int) (int64, bool) {
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i), true
		}
	}
	if end := p.End(); end < limit && len(p.recs) < maxLocks {
		return end, true
	}
	return 0, false
}

// Acquire locks records of spans (the batches a read from NextOffset
// returned, in offset order) for member until now+lock: Available records
// in the window, and new ones past its end while the window holds fewer
// than maxLocks and they are below limit. Offsets between spans past the
// end do not exist in the log and are archived, as are non-deliverable
// spans. It acquires at most maxRecords records, splitting a batch if
// need be (consumers skip a batch's records outside their ranges): one
// large producer batch is then shared among the consumers instead of
// going to the first that asks, which Kafka's batch-aligned mode allows
// too. It returns the acquired runs in offset order.
func (p *Partition) Acquire(member string, spans []Span, maxRecords int, limit int64, maxLocks int, lock time.Duration, now time.Time) []Lease {
	var out []Lease
	n := 0
	deadline := now.Add(lock)
	take := func(o int64, r *record) {
		r.state, r.owner, r.deadline = Acquired, member, deadline
		r.deliveries++
		p.counters.Delivered++
		if r.deliveries > 1 {
			p.counters.Redelivered++
		}
		n++
		if k := len(out) - 1; k >= 0 && out[k].Last == o-1 && out[k].DeliveryCount == r.deliveries {
			out[k].Last = o
		} else {
			out = append(out, Lease{First: o, Last: o, DeliveryCount: r.deliveries})
		}
	}
spans:
	for _, s := range spans {
		for o := max(s.First, p.start); o <= s.Last; o++ {
			if o >= limit || n >= maxRecords {
				break spans
			}
			if o >= p.End() {
				if len(p.recs) >= maxLocks {
					break spans
				}
				// Offsets the log skips (compacted, or between the read's
				// start and its first batch) are not records.
				for p.End() < o && len(p.recs) < maxLocks {
					p.recs = append(p.recs, record{state: Archived})
				}
				if len(p.recs) >= maxLocks {
					break spans
				}
				p.recs = append(p.recs, record{state: Available})
			}
			r := &p.recs[o-p.start]
			if r.state != Available {
				continue
			}
			if !s.Deliverable {
				r.state = Archived
				p.counters.Archived++
				continue
			}
			take(o, r)
		}
	}
	if n > 0 && (p.nextDeadline.IsZero() || deadline.Before(p.nextDeadline)) {
		p.nextDeadline = deadline
	}
	p.advance()
	return out
}

// Acknowledge applies member's acknowledgements. Every offset must be
// Acquired by member (ErrInvalidRecordState) and the ranges ascending and
// disjoint (ErrInvalidRequest); nothing is applied unless all are valid.
// A release (and a lock expiry) of a record at deliveryLimit archives it.
func (p *Partition) Acknowledge(member string, acks []Ack, deliveryLimit int, lock time.Duration, now time.Time) error {
	prev := int64(-1)
	for _, a := range acks {
		if a.First < 0 || a.Last < a.First || a.First <= prev {
			return fmt.Errorf("%w: acknowledgement range %d-%d after %d", ErrInvalidRequest, a.First, a.Last, prev)
		}
		prev = a.Last
		if len(a.Types) != 1 && int64(len(a.Types)) != a.Last-a.First+1 {
			return fmt.Errorf("%w: %d acknowledgement types for %d offsets", ErrInvalidRequest, len(a.Types), a.Last-a.First+1)
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew {
				return fmt.Errorf("%w: acknowledgement type %d", ErrInvalidRequest, t)
			}
		}
		for o := a.First; o <= a.Last; o++ {
			if o < p.start || o >= p.End() {
				return fmt.Errorf("%w: offset %d is outside the in-flight window %d-%d", ErrInvalidRecordState, o, p.start, p.End())
			}
			if r := &p.recs[o-p.start]; r.state != Acquired || r.owner != member {
				return fmt.Errorf("%w: offset %d is %s", ErrInvalidRecordState, o, r.state)
			}
		}
	}
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			r := &p.recs[o-p.start]
			switch t {
			case AckAccept:
				*r = record{state: Acknowledged, deliveries: r.deliveries}
			case AckGap, AckReject:
				*r = record{state: Archived, deliveries: r.deliveries}
				p.counters.Archived++
			case AckRelease:
				p.release(r, deliveryLimit)
			case AckRenew:
				r.deadline = now.Add(lock)
				if r.deadline.Before(p.nextDeadline) || p.nextDeadline.IsZero() {
					p.nextDeadline = r.deadline
				}
			}
		}
	}
	p.advance()
	return nil
}

// release makes an acquired record available again, or archives it when
// it has been delivered deliveryLimit times.
func (p *Partition) release(r *record, deliveryLimit int) {
	if int(r.deliveries) >= deliveryLimit {
		*r = record{state: Archived, deliveries: r.deliveries}
		p.counters.Archived++
		return
	}
	*r = record{state: Available, deliveries: r.deliveries}
}

// ReleaseMember releases every record member holds (its session closed
// or it left the group) and reports whether there was any.
func (p *Partition) ReleaseMember(member string, deliveryLimit int) bool {
	released := false
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.owner == member {
			p.release(r, deliveryLimit)
			released = true
		}
	}
	if released {
		p.advance()
	}
	return released
}

// Tick releases the records whose lock expired by now and reports whether
// there was any.
func (p *Partition) Tick(now time.Time, deliveryLimit int) bool {
	if p.nextDeadline.IsZero() || now.Before(p.nextDeadline) {
		return false
	}
	expired := false
	var next time.Time
	for i := range p.recs {
		r := &p.recs[i]
		if r.state != Acquired {
			continue
		}
		if !now.Before(r.deadline) {
			p.release(r, deliveryLimit)
			p.counters.LockTimeouts++
			expired = true
		} else if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	p.nextDeadline = next
	if expired {
		p.advance()
	}
	return expired
}

// Reset moves the start to offset and forgets the window
// (AlterShareGroupOffsets, which needs a group without members).
func (p *Partition) Reset(offset int64) {
	p.start, p.recs, p.nextDeadline = offset, nil, time.Time{}
}

// advance moves the start past finished records and gives the slice's
// unused head back once it is large.
func (p *Partition) advance() {
	k := 0
	for k < len(p.recs) && (p.recs[k].state == Acknowledged || p.recs[k].state == Archived) {
		k++
	}
	if k == 0 {
		return
	}
	p.start += int64(k)
	p.recs = p.recs[k:]
	if cap(p.recs) > 4096 && len(p.recs) < cap(p.recs)/4 {
		p.recs = append([]record(nil), p.recs...)
	}
}
