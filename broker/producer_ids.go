package broker

import (
	"context"
	"errors"
	"sync"

	"github.com/ringlog/ringlog/controller/metadata"
)

// producerIDs hands out producer ids from blocks the controller allocates
// (metadata.ProducerIDBlockSize at a time, KIP-730), so ids are unique
// across the cluster without a controller round trip per producer. The
// next block is fetched in the background once the current one is 90%
// used.
type producerIDs struct {
	s *wireServer

	mu   sync.Mutex
	next int64
	end  int64 // exclusive; next == end: no id at hand
	// pending is the start of a block fetched ahead, -1 if none.
	pending  int64
	fetching bool
	fetched  chan struct{} // closed when the running fetch ends
	lastErr  error
}

var errNoProducerID = errors.New("no producer id block at hand; retry")

func newProducerIDs(s *wireServer) *producerIDs {
	return &producerIDs{s: s, pending: -1}
}

// NextProducerID returns an id without waiting; with none at hand it
// starts a fetch and returns errNoProducerID (the transaction coordinator
// must not block on the network).
func (a *producerIDs) NextProducerID() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end && a.pending >= 0 {
		a.next, a.end, a.pending = a.pending, a.pending+metadata.ProducerIDBlockSize, -1
	}
	if a.next < a.end {
		id := a.next
		a.next++
		if a.end-a.next < metadata.ProducerIDBlockSize/10 && a.pending < 0 {
			a.fetchLocked()
		}
		return id, nil
	}
	a.fetchLocked()
	if a.lastErr != nil {
		return -1, errors.Join(errNoProducerID, a.lastErr)
	}
	return -1, errNoProducerID
}

// Wait returns an id, waiting for a block fetch when none is at hand.
func (a *producerIDs) Wait(ctx context.Context) (int64, error) {
	for {
		id, err := a.NextProducerID()
		if err == nil {
			return id, nil
		}
		a.mu.Lock()
		ch := a.fetched
		a.mu.Unlock()
		if ch == nil {
			return -1, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, errors.Join(err, ctx.Err())
		}
	}
}

// fetchLocked starts one background block fetch. a.mu must be held.
func (a *producerIDs) fetchLocked() {
	if a.fetching {
		return
	}
	a.fetching = true
	a.fetched = make(chan struct{})
	done := a.fetched
	go func() {
		ctx, cancel := a.s.adminContext()
		start, err := a.s.node.AllocateProducerIDs(ctx)
		cancel()
		a.mu.Lock()
		a.fetching = false
		a.lastErr = err
		if err == nil {
			if a.next >= a.end {
				a.next, a.end = start, start+metadata.ProducerIDBlockSize
			} else {
				// Ids left in the current block: the new one waits
				// until they are used (blocks need not be contiguous).
				a.pending = start
			}
		} else {
			a.s.log.Warn("allocating producer ids", "err", err)
		}
		a.mu.Unlock()
		close(done)
	}()
}
