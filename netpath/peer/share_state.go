package peer

import (
	"context"
	"fmt"

	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var shareStateFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID(proto.ShareStateClientID))

// maxShareStateResponse bounds a Read/WriteShareGroupState response.
const maxShareStateResponse = 16 << 20

// ReadShareState reads k's share-partition state from broker owner, the
// leader of its __share_group_state partition (ReadShareGroupState v0).
// ok is false when there is no state (the snapshot still carries the
// stored epoch). leaderEpoch (-1: none) is the reading data partition
// leader's: a newer one takes the state over, an older one is fenced.
// The owner's errors come back as share's: ErrNotCoordinator,
// ErrLoadInProgress, ErrFencedLeaderEpoch; others as kerr errors.
func (c *Client) ReadShareState(ctx context.Context, owner int32, k share.Key, leaderEpoch int32) (share.Snapshot, bool, error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	body, err := c.roundTrip(ctx, owner, shareStateFormatter, req, maxShareStateResponse, nil)
	if err != nil {
		return share.Snapshot{}, false, fmt.Errorf("ReadShareGroupState to broker %d: %w", owner, err)
	}
	resp := kmsg.NewPtrReadShareGroupStateResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		return share.Snapshot{}, false, fmt.Errorf("decoding ReadShareGroupState response from broker %d: %w", owner, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return share.Snapshot{}, false, fmt.Errorf("ReadShareGroupState from broker %d: %d topics in the answer", owner, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := shareStateCodeErr(p.ErrorCode); err != nil {
		return share.Snapshot{}, false, fmt.Errorf("broker %d: %w", owner, err)
	}
	s := share.Snapshot{Epoch: p.StateEpoch, StartOffset: p.StartOffset}
	for _, b := range p.StateBatches {
		s.Batches = append(s.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: share.RecordState(b.DeliveryState), DeliveryCount: b.DeliveryCount})
	}
	return s, !s.Deleted(), nil
}

// WriteShareState stores s as k's state on broker owner
// (WriteShareGroupState v0); nil once durable there. Errors as
// ReadShareState's, and share.ErrFencedStateEpoch.
func (c *Client) WriteShareState(ctx context.Context, owner int32, k share.Key, s share.Snapshot) error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, s.Epoch, s.LeaderEpoch, s.StartOffset
	for _, b := range s.Batches {
		kb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		kb.FirstOffset, kb.LastOffset, kb.DeliveryState, kb.DeliveryCount = b.First, b.Last, int8(b.State), b.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, kb)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	body, err := c.roundTrip(ctx, owner, shareStateFormatter, req, maxShareStateResponse, nil)
	if err != nil {
		return fmt.Errorf("WriteShareGroupState to broker %d: %w", owner, err)
	}
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decoding WriteShareGroupState response from broker %d: %w", owner, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("WriteShareGroupState from broker %d: %d topics in the answer", owner, len(resp.Topics))
	}
	if err := shareStateCodeErr(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("broker %d: %w", owner, err)
	}
	return nil
}

func shareStateCodeErr(code int16) error {
	kErr := kerr.ErrorForCode(code)
	switch code {
	case 0:
		return nil
	case kerr.NotCoordinator.Code:
		return fmt.Errorf("%w: %w", share.ErrNotCoordinator, kErr)
	case kerr.CoordinatorLoadInProgress.Code:
		return fmt.Errorf("%w: %w", share.ErrLoadInProgress, kErr)
	case kerr.FencedStateEpoch.Code:
		return fmt.Errorf("%w: %w", share.ErrFencedStateEpoch, kErr)
	case kerr.FencedLeaderEpoch.Code:
		return fmt.Errorf("%w: %w", share.ErrFencedLeaderEpoch, kErr)
	}
	return kErr
}
