package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/replication"
)

// replicationController adapts the controller node to
// replication.Controller (the broker wires the two, so neither imports the
// other): it sends
// AlterPartition to the active controller, copies the answer into a
// replication.PartitionState and wraps the metadata errors into
// replication's, so LeaderState can tell "rejected" from "maybe applied".
type replicationController struct{ node *controller.Node }

var _ replication.Controller = replicationController{}

// AlterPartition implements replication.Controller.
func (c replicationController) AlterPartition(ctx context.Context, tp replication.TopicPartition, leaderEpoch, partitionEpoch int32, newISR []int32) (replication.PartitionState, error) {
	p, err := c.node.AlterPartition(ctx, metadata.UUID(tp.TopicID), tp.Partition, leaderEpoch, partitionEpoch, newISR)
	if err != nil {
		return replication.PartitionState{}, wrapReplicationError(err)
	}
	return partitionState(p), nil
}

// partitionState copies a metadata partition into replication's type.
func partitionState(p metadata.Partition) replication.PartitionState {
	return replication.PartitionState{
		Replicas: append([]int32(nil), p.Replicas...), ISR: append([]int32(nil), p.ISR...),
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
	}
}

// wrapReplicationError maps controller errors onto replication's (keeping
// the original in the chain); others (network, no controller) pass through
// as "outcome unknown".
func wrapReplicationError(err error) error {
	pairs := []struct{ from, to error }{
		{metadata.ErrInvalidUpdateVersion, replication.ErrInvalidUpdateVersion},
		{metadata.ErrFencedLeaderEpoch, replication.ErrFencedLeaderEpoch},
		{metadata.ErrNotLeader, replication.ErrNotLeaderOrFollower},
		{metadata.ErrIneligibleReplica, replication.ErrIneligibleReplica},
		{metadata.ErrUnknownTopic, replication.ErrUnknownTopicOrPartition},
	}
	for _, p := range pairs {
		if errors.Is(err, p.from) {
			return fmt.Errorf("%w: %w", p.to, err)
		}
	}
	return err
}
