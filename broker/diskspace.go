package broker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
)

// Full disk (docs/disk-full.md). Below the engine's free-space threshold
// produce is refused (KAFKA_STORAGE_ERROR, "disk space below threshold: N
// bytes free, need M"), and so is creating topics or partitions here:
// a topic the controller registered whose logs this broker then cannot
// create would sit in Metadata with LEADER_NOT_AVAILABLE for good. Fetch,
// DeleteTopics, retention, group commits and metadata changes that free
// space keep working.
//
// Creation can still fail after the controller registered the topic (the
// disk filled up since the check, or another process filled it): then
// RollbackCreate deletes the topic again through the controller and the
// client gets KAFKA_STORAGE_ERROR with the cause, so nothing is left
// half-registered.

// RollbackCreate checks that this broker holds every partition of t that
// the image assigns to it; if one is missing (reconcile could not create
// it) the topic is deleted again through the controller and an error
// wrapping engine.ErrStorage is returned. recErr is reconcile's error.
// The CreateTopics handler and auto-creation call it (netpath.Cluster).
func (s *wireServer) RollbackCreate(t metadata.Topic, recErr error) error {
	if recErr == nil {
		return nil
	}
	missing := -1
	for i, p := range t.Partitions {
		if !slices.Contains(p.Replicas, s.nodeID) {
			continue
		}
		if _, err := s.engine.Partition(t.Name, int32(i)); err != nil {
			missing = i
			break
		}
	}
	if missing < 0 {
		return nil
	}
	cause := fmt.Errorf("%w: creating the log of %s-%d: %v", engine.ErrStorage, t.Name, missing, recErr)
	ctx, cancel := s.adminContext()
	defer cancel()
	if err := s.node.DeleteTopic(ctx, t.Name); err != nil && !errors.Is(err, metadata.ErrUnknownTopic) {
		s.log.Error("rolling back a topic whose logs could not be created", "topic", t.Name, "err", err, "cause", recErr)
		return fmt.Errorf("%w (rolling the topic back failed too: %v)", cause, err)
	}
	if err := s.reconcile(); err != nil {
		s.log.Warn("reconcile after rolling back a topic", "topic", t.Name, "err", err)
	}
	s.log.Warn("rolled back a topic whose logs could not be created", "topic", t.Name, "err", recErr)
	return cause
}
