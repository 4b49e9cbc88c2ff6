package controller

import "time"

// applyLag answers "how old is this broker's image?" from the heartbeats:
// each acknowledgement carries the controller's commit index, read after
// the heartbeat was sent. Once this broker has applied up to that index,
// its image holds everything committed by the send time, so the image is
// no older than the latest such send time (caughtUp). A broker that keeps
// hearing from the controller but applies slowly (a stalled FSM, a slow
// disk under raft's log) is then stale by its apply lag, which raft
// contact alone does not show.
type applyLag struct {
	caughtUp time.Time
	pending  []lagMark // ascending send times, commit indexes not yet applied
}

type lagMark struct {
	sent   time.Time
	commit uint64
}

// maxLagMarks bounds pending: one mark per heartbeat, and a broker that
// stays this far behind is stale long before the oldest mark matters.
const maxLagMarks = 64

// ack records a heartbeat sent at sent and answered with the controller's
// commit index, with applied the broker's applied index now.
func (l *applyLag) ack(sent time.Time, commit, applied uint64) {
	if len(l.pending) == maxLagMarks {
		l.pending = append(l.pending[:0], l.pending[1:]...)
	}
	l.pending = append(l.pending, lagMark{sent, commit})
	l.advance(applied)
}

// advance moves caughtUp to the latest mark applied has reached.
func (l *applyLag) advance(applied uint64) {
	n := 0
	for i, m := range l.pending {
		if m.commit <= applied {
			if m.sent.After(l.caughtUp) {
				l.caughtUp = m.sent
			}
			n = i + 1
		}
	}
	l.pending = append(l.pending[:0], l.pending[n:]...)
}

// behind is how many entries the oldest outstanding mark is ahead of
// applied (0 when none).
func (l *applyLag) behind(applied uint64) uint64 {
	if len(l.pending) == 0 || l.pending[0].commit <= applied {
		return 0
	}
	return l.pending[0].commit - applied
}
