package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Retries of the lean client.
//
// A batch that failed retriably is re-sent to the partition's current
// leader after a backoff (backoff.go), until --retries re-sends or its
// --delivery-timeout; then its messages count as errors. A partition whose
// batch failed is failing: like the Java producer, which re-queues a
// failed batch at the head of its partition's queue and sends nothing from
// a partition whose head is backing off, the failing partition sends one
// batch at a time (the probe, its oldest waiting batch) once per backoff,
// and holds its other batches, new ones included, until a batch of it is
// acknowledged. So a broker that refuses a partition (full disk, too few
// in-sync replicas) sees about one batch per partition per backoff
// instead of all of them. Held batches keep their intended times: their
// latency, and the send delay once request memory runs out, show the wait.
//
// Failures that say the leader may have moved wait for a leader lookup
// started after them; the lookup starts at once. When it routes the
// partition to another broker than the one that refused it, the probe goes
// there without waiting out the backoff (KIP-951's rule for clients: a
// known new leader is retried at once); the backoff still paces retries
// while the lookup names the same broker. Lookups run on their own
// goroutine, at most one at a time and one per refreshEvery, so a slow
// metadata request does not hold up the schedule.

// refreshEvery bounds metadata requests while frames wait for a leader. A
// lookup is one small Metadata request; a wave of leader moves (a
// reassignment completing, preferred elections) fails partitions a few
// milliseconds apart, and a longer gap would make the later ones wait.
const refreshEvery = int64(20 * time.Millisecond)

// pollEvery is how often the emitter looks for a probe's answer or a
// leader lookup's result while either is outstanding.
const pollEvery = int64(2 * time.Millisecond)

// partRetry is one partition's retry state (emitter goroutine only).
type partRetry struct {
	// fails counts consecutive failed probes; 0: the partition is healthy.
	fails int
	// next (run clock) is when the next probe may go.
	next int64
	// probe is the batch in flight for a failing partition (nil: none).
	probe *produceFrame
	// ackedSeen is the partition's ack count when it started failing; a
	// higher count means a batch got through.
	ackedSeen int64
	// oldest is the waiting batch chosen as the probe in this pass of
	// handleRetries.
	oldest *produceFrame
}

// staleLeader lists the failures after which the partition's leader is
// looked up again before the re-send (the Java client's
// InvalidMetadataException family).
func staleLeader(err error) bool {
	return errors.Is(err, errConnLost) ||
		errors.Is(err, kerr.NotLeaderForPartition) ||
		errors.Is(err, kerr.LeaderNotAvailable) ||
		errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.KafkaStorageError)
}

// retriable lists the failures a re-send to the current leader can fix.
// (kerr marks more codes retriable, CORRUPT_MESSAGE among them; re-sending
// those bytes cannot help.)
func retriable(err error) bool {
	switch {
	case errors.Is(err, errConnLost),
		errors.Is(err, kerr.NotLeaderForPartition),
		errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.NotEnoughReplicas),
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend),
		errors.Is(err, kerr.RequestTimedOut),
		errors.Is(err, kerr.KafkaStorageError):
		return true
	}
	return false
}

// requeue is the connections' failure path; it may run on any goroutine.
// Every failed attempt counts in the error mix; the emitter goroutine
// decides the rest. retryq holds as many frames as the pool can make, so
// it never blocks.
func (e *leanEmitter) requeue(f *produceFrame, err error) {
	e.st.c.mix.add(err)
	f.lastErr, f.failedAt = err, e.st.now()
	e.retryq <- f
}

// takeFailed hands the failed frames queued in retryq to failed.
func (e *leanEmitter) takeFailed() {
	for {
		select {
		case f := <-e.retryq:
			e.failed(f)
		default:
			return
		}
	}
}

// failed moves a failed frame to retrying, or counts it as errors when it
// cannot or may no longer be retried, and backs off its partition
// (emitter goroutine only).
func (e *leanEmitter) failed(f *produceFrame) {
	cfg := &e.st.cfg
	ps := &e.parts[f.partition]
	wasProbe := ps.probe == f
	if wasProbe {
		ps.probe = nil
	}
	err := f.lastErr
	switch {
	case !retriable(err):
	case f.failedAt-f.intended[0] >= int64(cfg.DeliveryTimeout):
		err = fmt.Errorf("gave up after %d retries at the %v delivery timeout: %w", f.retries, cfg.DeliveryTimeout, err)
	case cfg.Retries > 0 && f.retries >= cfg.Retries:
		err = fmt.Errorf("gave up after %d retries: %w", f.retries, err)
	default:
		err = nil
	}
	// The first failure of a healthy partition, or a failed probe, backs
	// the partition off; batches failing meanwhile (sent before the first
	// failure) just wait.
	if retriable(f.lastErr) && (ps.fails == 0 || wasProbe) {
		if ps.fails == 0 {
			ps.ackedSeen = e.acked[f.partition].Load()
		}
		ps.fails++
		ps.next = f.failedAt + int64(e.backoff.Delay(ps.fails, rand.Float64()))
	}
	if err != nil {
		e.st.c.fail(len(f.intended), err)
		e.pool.put(f)
		return
	}
	if staleLeader(f.lastErr) {
		e.refresh(e.st.now())
	}
	e.retrying = append(e.retrying, f)
}

// movedAway says a lookup that started after f failed routes f's partition
// to a live connection to another broker than the one that refused it (a
// reconnect to the same broker keeps the backoff).
func (e *leanEmitter) movedAway(f *produceFrame) bool {
	lc := e.conns[f.partition]
	return staleLeader(f.lastErr) && e.routedAsOf >= f.failedAt &&
		lc != nil && !lc.dead.Load() && lc.addr != f.failedOn
}

// handleRetries sends waiting frames that may go (emitter goroutine only)
// and returns when it wants to run again: the next probe or delivery
// deadline, or soon while a probe or leader lookup is outstanding.
func (e *leanEmitter) handleRetries(now int64) int64 {
	e.takeFailed()
	e.applyRefresh()
	next := int64(never)
	for p := range e.parts {
		ps := &e.parts[p]
		ps.oldest = nil // chosen afresh below
		if ps.fails > 0 && e.acked[p].Load() != ps.ackedSeen {
			*ps = partRetry{} // a batch got through: healthy again
		}
		if ps.probe != nil {
			next = min(next, now+pollEvery)
		}
	}
	if len(e.retrying) == 0 {
		return next
	}
	timeout := int64(e.st.cfg.DeliveryTimeout)
	keep := e.retrying[:0]
	for _, f := range e.retrying {
		deadline := f.intended[0] + timeout
		if now >= deadline {
			err := f.lastErr
			if err == nil {
				err = errors.New("never sent: no leader connection, or its partition kept failing")
			}
			e.st.c.fail(len(f.intended), fmt.Errorf("gave up after %d retries at the %v delivery timeout: %w", f.retries, e.st.cfg.DeliveryTimeout, err))
			e.pool.put(f)
			continue
		}
		keep = append(keep, f)
		next = min(next, deadline)
	}
	e.retrying = keep
	// A partition whose leader moved probes the new leader now.
	for _, f := range e.retrying {
		if ps := &e.parts[f.partition]; ps.fails > 0 && ps.probe == nil && ps.next > now && e.movedAway(f) {
			ps.next = now
		}
	}
	if e.refreshing {
		next = min(next, now+pollEvery)
	}
	// A failing partition due for a probe probes with its oldest batch,
	// as a queue would (the others would expire before it anyway).
	for _, f := range e.retrying {
		ps := &e.parts[f.partition]
		if ps.fails > 0 && ps.probe == nil && now >= ps.next &&
			(ps.oldest == nil || f.intended[0] < ps.oldest.intended[0]) {
			ps.oldest = f
		}
	}
	keep = e.retrying[:0]
	for _, f := range e.retrying {
		ps := &e.parts[f.partition]
		if ps.fails > 0 && (ps.probe != nil || now < ps.next || f != ps.oldest) {
			keep = append(keep, f)
			if ps.probe == nil && ps.next > now { // (a due probe sets its own wake)
				next = min(next, ps.next)
			}
			continue
		}
		lc := e.conns[f.partition]
		if lc == nil || lc.dead.Load() || staleLeader(f.lastErr) && e.routedAsOf < f.failedAt {
			keep = append(keep, f)
			e.refresh(now)
			if e.refreshing {
				next = min(next, now+pollEvery)
			} else {
				next = min(next, max(e.nextRefresh, now+int64(time.Millisecond)))
			}
			continue
		}
		if ps.fails > 0 {
			ps.probe = f
			next = min(next, now+pollEvery)
		}
		if f.lastErr != nil { // a re-send, not a first send
			f.retries++
			e.st.c.retries.Add(1)
			e.st.c.retried.Add(int64(len(f.intended)))
		}
		lc.corr++
		binary.BigEndian.PutUint32(f.buf[f.corrAt:], uint32(lc.corr))
		lc.sendq <- f
	}
	e.retrying = keep
	return next
}

// refresh starts a leader lookup unless one is in flight or the last
// started less than refreshEvery ago (emitter goroutine only).
func (e *leanEmitter) refresh(now int64) {
	if e.refreshing || now < e.nextRefresh || e.st.refreshLeaders == nil {
		return
	}
	e.refreshing, e.refreshedAt, e.nextRefresh = true, now, now+refreshEvery
	go func() {
		leaders, err := e.st.refreshLeaders()
		if err != nil {
			leaders = nil
		}
		e.refreshed <- leaders
	}()
}

// applyRefresh routes by the leaders of a finished lookup (emitter
// goroutine only).
func (e *leanEmitter) applyRefresh() {
	select {
	case leaders := <-e.refreshed:
		e.refreshing = false
		if len(leaders) == len(e.conns) {
			e.route(leaders)
			e.routedAsOf = e.refreshedAt
		}
	default:
	}
}
