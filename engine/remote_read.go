package engine

import "github.com/ringlog/ringlog/engine/producerstate"

// LocalAbortedTxns lists the aborted transactions of the local log that
// overlap [fetchOffset, upperOffset) (marker at or after fetchOffset,
// first offset below upperOffset): the local log's part of the list a
// read_committed fetch served from the remote tier returns (the remote
// reader lists those whose marker is in the remote tier).
func (p *Partition) LocalAbortedTxns(fetchOffset, upperOffset int64) []producerstate.AbortedTxn {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ps.AbortedTxns(fetchOffset, upperOffset)
}
