package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/replication"
)

// Offline partitions (docs/disk-errors.md). When a write or fdatasync of a
// partition's log fails the engine takes the partition offline: appends and
// reads fail with engine.ErrStorage (KAFKA_STORAGE_ERROR). watchOffline then
//
//   - fails the partition's acks=all waiters with KAFKA_STORAGE_ERROR
//     (their records may not be durable here, so none is acknowledged);
//   - reports the replica to the controller (ReplicaOffline), retrying
//     until it is applied: the controller takes it out of the ISR and
//     moves its leadership to another in-sync replica. The next reconcile
//     drops local leadership and does not follow (syncPartition).
//
// The replica stays out until this broker restarts: Open recovers the log
// and the new registration clears the offline mark.

// offlineRetry is how long a failed report waits before it is sent again.
const offlineRetry = time.Second

func (s *wireServer) watchOffline() {
	done := map[*engine.Partition]bool{} // reported and applied
	for {
		ch := s.engine.Offline()
		retry := false
		byTopic := map[string][]*engine.Partition{}
		for _, p := range s.engine.OfflinePartitions() {
			if !done[p] {
				byTopic[p.Topic()] = append(byTopic[p.Topic()], p)
			}
		}
		for topic, parts := range byTopic {
			if err := s.reportOffline(topic, parts); err != nil {
				s.log.Warn("reporting offline replicas to the controller", "topic", topic, "partitions", len(parts), "err", err)
				retry = true
				continue
			}
			for _, p := range parts {
				done[p] = true
			}
		}
		var again <-chan time.Time
		if retry {
			again = time.After(offlineRetry)
		}
		select {
		case <-ch:
		case <-again:
		case <-s.ctx.Done():
			return
		}
	}
}

// reportOffline fails the waiters of topic's offline partitions and
// reports the replicated ones to the controller (with RF=1 no other
// replica can take over: the partition answers KAFKA_STORAGE_ERROR until
// a restart).
func (s *wireServer) reportOffline(topic string, parts []*engine.Partition) error {
	t, known := s.node.MetadataImage().Topic(topic)
	var idxs []int32
	for _, p := range parts {
		n := 0
		if s.repl != nil {
			if lp := s.repl.leader(topic, p.Index()); lp != nil {
				n = s.repl.purg.FailPartition(lp.tp, lp.st.LeaderEpoch(), fmt.Errorf("%w: %v", replication.ErrStorage, p.Failed()))
			}
		}
		s.log.Error("partition offline after a disk error", "topic", topic, "partition", p.Index(), "failed_waiters", n, "err", p.Failed())
		if known && int(p.Index()) < len(t.Partitions) && len(t.Partitions[p.Index()].Replicas) > 1 {
			idxs = append(idxs, p.Index())
		}
	}
	if len(idxs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	err := s.node.ReportOfflineReplicas(ctx, t.ID, idxs)
	if errors.Is(err, metadata.ErrUnknownTopic) {
		return nil // deleted meanwhile: nothing to move
	}
	return err
}
