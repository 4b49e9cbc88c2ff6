package engine

// A partition goes offline when a write or fdatasync of its log fails
// (Partition.fail): the page cache no longer says what is on disk, so the
// partition refuses appends and reads with ErrStorage until the next Open
// recovers it from what the disk holds. The broker watches Offline to
// report such partitions to the controller, which moves their leadership
// to another in-sync replica (docs/disk-errors.md).

// Offline returns a channel closed at the next partition failure; call
// OfflinePartitions then (and take a new channel first, so no failure is
// missed between the two).
func (e *Engine) Offline() <-chan struct{} {
	e.offlineMu.Lock()
	defer e.offlineMu.Unlock()
	return e.offline
}

// OfflinePartitions returns every partition that failed since Open.
func (e *Engine) OfflinePartitions() []*Partition {
	var out []*Partition
	for _, p := range e.allPartitions() {
		if p.Failed() != nil {
			out = append(out, p)
		}
	}
	return out
}

// Failed returns the storage error that took the partition offline, or nil.
func (p *Partition) Failed() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.failed
}

// noteOffline wakes Offline's watchers. Called with a partition lock held:
// it only closes a channel.
func (e *Engine) noteOffline() {
	e.offlineMu.Lock()
	defer e.offlineMu.Unlock()
	close(e.offline)
	e.offline = make(chan struct{})
}
