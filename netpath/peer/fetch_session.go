package peer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client side of KIP-227 incremental fetch sessions, one per leader:
//
//   - A full request (session id 0, epoch 0) lists every partition and
//     asks the leader for a session; a response with a non-zero session
//     id opens one, and the next request is incremental with epoch 1.
//     A response with session id 0 means the leader keeps none: requests
//     stay full.
//   - An incremental request (session id, epoch 1, 2, ... wrapping to 1)
//     lists only partitions that are new to the session or whose fetch
//     state (offset, epochs, log start, max bytes) changed since it was
//     last sent, and names in ForgottenTopics the partitions of the
//     session the fetcher no longer asks for (removed, backing off,
//     fenced). The leader answers only partitions with news; the others
//     are filled in from the last high watermark and log start seen, so
//     replication gets an entry for every partition it asked about.
//   - Any failure (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
//     a network error, a cancelled request whose fate at the leader is
//     unknown) drops the session; the next request is full again. The
//     two session errors are retried at once with a full request.
//
// The leader's session keeps the fetch offset of an unlisted partition
// from the last request that listed it, which is why every change is
// listed and a partition left out of a request is forgotten rather than
// left in the session.

// fetchSession is the state of the session with one leader. It is used by
// one fetch at a time (takeSession).
type fetchSession struct {
	busy bool // guarded by Client.mu

	id    int32 // 0: none
	epoch int32 // epoch of the next request; 0: full
	// parts is what the leader's session holds, as last sent, with the
	// last high watermark and log start answered.
	parts map[replication.TopicPartition]sessionPart

	// The request in flight: full or incremental, and for an
	// incremental one what it lists and forgets (applied on success).
	full      bool
	listed    []replication.FetchPartition
	forgotten []replication.TopicPartition

	scratch map[replication.TopicPartition]struct{} // reused by build and answered
	sc      fetchScratch                            // the rounds' reused values
}

type sessionPart struct {
	fetch        replication.FetchPartition
	hw, logStart int64 // -1 until answered
}

// takeSession returns leader's session for one fetch, or nil when
// sessions are off or another fetch to that leader is using it (that
// one then goes without: a full request outside the session).
func (c *Client) takeSession(leader int32) *fetchSession {
	if c.cfg.DisableFetchSessions {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[leader]
	if s == nil {
		s = &fetchSession{}
		c.sessions[leader] = s
	}
	if s.busy {
		return nil
	}
	s.busy = true
	return s
}

func (c *Client) returnSession(leader int32, s *fetchSession) {
	if s == nil {
		return
	}
	c.mu.Lock()
	s.busy = false
	c.mu.Unlock()
}

// reset drops the session: the next request is full.
func (s *fetchSession) reset() {
	if s != nil {
		s.id, s.epoch, s.parts = 0, 0, nil
	}
}

// build sets kr's session fields for a fetch of want and returns the
// partitions to list in it.
func (s *fetchSession) build(kr *kmsg.FetchRequest, want []replication.FetchPartition) []replication.FetchPartition {
	// Reused round to round: both are read only within the exchange.
	clear(s.listed)
	clear(s.forgotten)
	s.listed, s.forgotten = s.listed[:0], s.forgotten[:0]
	if s.id == 0 || s.epoch == 0 {
		s.full = true
		kr.SessionID, kr.SessionEpoch = 0, 0
		return want
	}
	s.full = false
	kr.SessionID, kr.SessionEpoch = s.id, s.epoch
	asked := s.scratchSet()
	for _, p := range want {
		asked[p.TopicPartition] = struct{}{}
		if sp, ok := s.parts[p.TopicPartition]; !ok || sp.fetch != p {
			s.listed = append(s.listed, p)
		}
	}
	byTopic := map[string]int{}
	for tp := range s.parts {
		if _, ok := asked[tp]; ok {
			continue
		}
		s.forgotten = append(s.forgotten, tp)
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(kr.ForgottenTopics)
			byTopic[tp.Topic] = i
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = tp.Topic, tp.TopicID
			kr.ForgottenTopics = append(kr.ForgottenTopics, ft)
		}
		kr.ForgottenTopics[i].Partitions = append(kr.ForgottenTopics[i].Partitions, tp.Partition)
	}
	return s.listed
}

// scratchSet returns the reused set, emptied.
func (s *fetchSession) scratchSet() map[replication.TopicPartition]struct{} {
	if s.scratch == nil {
		s.scratch = make(map[replication.TopicPartition]struct{})
	}
	clear(s.scratch)
	return s.scratch
}

var errSessionMismatch = errors.New("fetch response for another session")

// answered applies a successful response (session id sessionID, partition
// answers got) to the session and returns the answers for replication:
// for an incremental fetch, got plus an entry for each asked partition
// the leader left out as quiet (only where its high watermark is known).
func (s *fetchSession) answered(sessionID int32, want []replication.FetchPartition, got []replication.FetchPartitionResponse) ([]replication.FetchPartitionResponse, error) {
	if s.full {
		if sessionID == 0 {
			s.reset() // the leader keeps no session: stay full
			return got, nil
		}
		s.id, s.epoch = sessionID, 1
		s.parts = make(map[replication.TopicPartition]sessionPart, len(want))
		for _, p := range want {
			s.parts[p.TopicPartition] = sessionPart{fetch: p, hw: -1, logStart: -1}
		}
	} else {
		if sessionID != s.id {
			return nil, fmt.Errorf("%w: id %d, ours %d", errSessionMismatch, sessionID, s.id)
		}
		for _, p := range s.listed {
			sp, ok := s.parts[p.TopicPartition]
			if !ok {
				sp = sessionPart{hw: -1, logStart: -1}
			}
			sp.fetch = p
			s.parts[p.TopicPartition] = sp
		}
		for _, tp := range s.forgotten {
			delete(s.parts, tp)
		}
		if s.epoch == math.MaxInt32 {
			s.epoch = 1
		} else {
			s.epoch++
		}
	}
	for _, r := range got {
		if sp, ok := s.parts[r.TopicPartition]; ok {
			sp.hw, sp.logStart = r.HighWatermark, r.LogStartOffset
			if len(r.Records) > 0 || r.Err != nil {
				// Listed again next time even if the fetcher could not
				// use the answer (its offset then stays the same): the
				// leader then holds our real position, whether or not
				// it moved its own past the records it sent.
				sp.fetch = replication.FetchPartition{}
			}
			s.parts[r.TopicPartition] = sp
		}
	}
	if s.full {
		return got, nil
	}
	answered := s.scratchSet()
	for _, r := range got {
		answered[r.TopicPartition] = struct{}{}
	}
	got = slices.Grow(got, len(want)-len(got))
	for _, p := range want {
		if _, ok := answered[p.TopicPartition]; ok {
			continue
		}
		if sp := s.parts[p.TopicPartition]; sp.hw >= 0 {
			got = append(got, replication.FetchPartitionResponse{TopicPartition: p.TopicPartition, HighWatermark: sp.hw, LogStartOffset: sp.logStart})
		}
	}
	return got, nil
}
