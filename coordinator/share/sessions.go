package share

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Share sessions (KIP-932): a consumer's ShareFetch names only the
// partitions that join or leave its session; the session remembers the
// rest. Epoch 0 opens a session (replacing the member's previous one,
// whose records are released), each later request carries the epoch the
// previous answer moved to (1, 2, ..., wrapping to 1), and -1 closes it:
// its acknowledgements are applied, then every record the member still
// holds in the session's partitions is released.

// Session epochs with a meaning of their own.
const (
	OpenEpoch  int32 = 0
	FinalEpoch int32 = -1
)

// SessionKey names a share session: one per member and broker.
type SessionKey struct {
	Group, Member string
}

type session struct {
	key   SessionKey
	epoch int32 // what the next request must carry
	parts map[TP]struct{}
	used  time.Time
}

func (s *session) partitions() []TP {
	return slices.SortedFunc(maps.Keys(s.parts), compareTP)
}

// SessionRequest is the session part of a ShareFetch or
// ShareAcknowledge.
type SessionRequest struct {
	Group, Member string
	Epoch         int32
	// Add and Forget change the session's partitions (ShareFetch only).
	Add, Forget []TP
}

// SessionResult is what a request's session says.
type SessionResult struct {
	// Partitions are the session's partitions after the request, sorted:
	// what a ShareFetch reads.
	Partitions []TP
	// Final: the request closes the session (epoch -1); call
	// CloseSession once its acknowledgements are applied.
	Final bool
}

// Session checks req against the member's share session and applies it:
// opens, advances or (epoch -1) marks it final. A forgotten partition's
// records held by the member are released.
func (m *Manager) Session(req SessionRequest, now time.Time) (SessionResult, error) {
	k := SessionKey{req.Group, req.Member}
	m.mu.Lock()
	s := m.sessions[k]
	var release []TP
	var res SessionResult
	switch {
	case req.Epoch == OpenEpoch:
		if s != nil {
			release = s.partitions()
		} else if len(m.sessions) >= m.cfg.MaxSessions {
			m.mu.Unlock()
			return res, fmt.Errorf("%w: %d sessions", ErrSessionLimitReached, len(m.sessions))
		}
		s = &session{key: k, parts: make(map[TP]struct{})}
		m.sessions[k] = s
		m.busy.Notify()
	case req.Epoch == FinalEpoch:
		res.Final = true
		if s != nil {
			res.Partitions = s.partitions()
		}
		m.mu.Unlock()
		return res, nil
	case req.Epoch < 0:
		m.mu.Unlock()
		return res, fmt.Errorf("%w: epoch %d", ErrInvalidSessionEpoch, req.Epoch)
	case s == nil:
		m.mu.Unlock()
		return res, fmt.Errorf("%w: member %s of group %s", ErrSessionNotFound, req.Member, req.Group)
	case s.epoch != req.Epoch:
		m.mu.Unlock()
		return res, fmt.Errorf("%w: epoch %d, the session is at %d", ErrInvalidSessionEpoch, req.Epoch, s.epoch)
	}
	for _, tp := range req.Add {
		s.parts[tp] = struct{}{}
	}
	for _, tp := range req.Forget {
		if _, ok := s.parts[tp]; ok {
			delete(s.parts, tp)
			release = append(release, tp)
		}
	}
	if s.epoch == math.MaxInt32 {
		s.epoch = 1
	} else {
		s.epoch++
	}
	s.used = now
	res.Partitions = s.partitions()
	m.mu.Unlock()
	if len(release) > 0 {
		m.release(req.Group, req.Member, release)
	}
	return res, nil
}

// CloseSession ends the member's share session and releases the records
// it still holds in tps (the session's partitions, as Session returned
// them with Final).
func (m *Manager) CloseSession(group, member string, tps []TP) {
	m.mu.Lock()
	delete(m.sessions, SessionKey{group, member})
	m.mu.Unlock()
	m.release(group, member, tps)
}

// CloseMember ends the member's session, if any, releasing what it holds
// (the member left its group).
func (m *Manager) CloseMember(group, member string) {
	m.mu.Lock()
	s := m.sessions[SessionKey{group, member}]
	delete(m.sessions, SessionKey{group, member})
	m.mu.Unlock()
	if s != nil {
		m.release(group, member, s.partitions())
	}
}

// Sessions counts the open share sessions.
func (m *Manager) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}
