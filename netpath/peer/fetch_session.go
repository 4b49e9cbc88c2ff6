package peer

import (
	"errors"
	"fmt"
	"math"

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
//     fenced). The leader answers only partitions with news, and so
//     does the client: replication hears nothing of a quiet partition
//     (filling each in from the last answer cost the follower a look at
//     every partition it fetches, in every round).
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
	// parts is what the leader's session holds, as last sent.
	parts map[replication.TopicPartition]replication.FetchPartition

	// The request in flight: full or incremental, and for an
	// incremental one what it lists and forgets (applied on success).
	full      bool
	listed    []replication.FetchPartition
	forgotten []replication.TopicPartition

	scratch map[replication.TopicPartition]struct{} // build's, reused
	sc      fetchScratch                            // the rounds' reused values
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
	held := 0 // partitions of want the session holds (want lists each once)
	for _, p := range want {
		sp, ok := s.parts[p.TopicPartition]
		if ok {
			held++
		}
		if !ok || sp != p {
			s.listed = append(s.listed, p)
		}
	}
	if held == len(s.parts) {
		// Every partition of the session is asked for: nothing to
		// forget, and no set of want to build (a map insert per
		// partition per round).
		return s.listed
	}
	asked := s.scratchSet()
	for _, p := range want {
		asked[p.TopicPartition] = struct{}{}
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

// answered applies a successful response (session id sessionID,
// partition answers got) to the session and returns the answers for
// replication: got itself.
func (s *fetchSession) answered(sessionID int32, want []replication.FetchPartition, got []replication.FetchPartitionResponse) ([]replication.FetchPartitionResponse, error) {
	if s.full {
		if sessionID == 0 {
			s.reset() // the leader keeps no session: stay full
			return got, nil
		}
		s.id, s.epoch = sessionID, 1
		s.parts = make(map[replication.TopicPartition]replication.FetchPartition, len(want))
		for _, p := range want {
			s.parts[p.TopicPartition] = p
		}
	} else {
		if sessionID != s.id {
			return nil, fmt.Errorf("%w: id %d, ours %d", errSessionMismatch, sessionID, s.id)
		}
		for _, p := range s.listed {
			s.parts[p.TopicPartition] = p
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
		if len(r.Records) == 0 && r.Err == nil {
			continue
		}
		if _, ok := s.parts[r.TopicPartition]; ok {
			// Listed again next time even if the fetcher could not use
			// the answer (its offset then stays the same): the leader
			// then holds our real position, whether or not it moved its
			// own past the records it sent.
			s.parts[r.TopicPartition] = replication.FetchPartition{}
		}
	}
	return got, nil
}
