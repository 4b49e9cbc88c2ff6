package broker

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/coordinator/statelog"
)

// This file wires the share groups' partition-leader side
// (coordinator/share): the Manager's lock-expiry ticks, its view of the
// groups' dynamic configs (the metadata image's GROUP resources), the
// group coordinator's news of members that left (their records are
// released at once rather than when their locks expire), and the durable
// state.
//
// Durable state is Kafka's design: the __share_group_state topic
// (compacted, replicated, on the coordLog mechanism __consumer_offsets
// uses; as many partitions as __consumer_offsets) holds one record per
// share-partition write, the whole snapshot (share/store.go has the
// format). The leader of the __share_group_state partition of a key
// (group:topicId:partition) is its owner: it loads the partition when it
// takes it over and answers Read/WriteShareGroupState (share.Store). A
// data partition's leader reaches the owner through sharePersister:
// directly when it is this broker, else over the peer client. Every
// state change a client is told about (an acquisition's delivery count,
// an acknowledgement, a release, a lock expiry, an admin reset) is
// durable on the ISR of that partition before the answer. When this
// broker stops leading a data partition, or leads it at a new epoch, its
// share-partitions are forgotten (syncShareLeadership) and read from the
// owner on their next use.

// shareTickInterval is how often expired acquisition locks are released;
// lock durations are seconds.
const shareTickInterval = 100 * time.Millisecond

// shareStateTimeout bounds one read or write of share state, retries
// included (the owner failing over: a new leader of its
// __share_group_state partition elected and loaded).
const shareStateTimeout = 15 * time.Second

// shareStateBridge is the owner side of __share_group_state on this
// broker, and the Persister the Manager writes through.
type shareStateBridge struct {
	s     *wireServer
	log   *coordLog
	store *share.Store
}

func newShares(s *wireServer) (*share.Manager, error) {
	b := &shareStateBridge{s: s}
	n := s.cfg.Groups.OffsetsTopicPartitions
	b.store = share.NewStore(n, func(p int32, kvs []statelog.KV) statelog.Waiter {
		return b.log.append(p, encodeBatch(kvs, time.Now().UnixMilli()))
	})
	b.log = &coordLog{
		s: s, topic: share.StateTopic, what: "share-group state",
		partitions: n, rf: s.cfg.OffsetsReplicationFactor, segmentBytes: s.cfg.OffsetsTopicSegmentBytes,
		notCoord: share.ErrNotCoordinator, commitTimeout: offsetCommitTimeout,
		begin:  b.store.BeginLoad,
		unload: b.store.Unload,
		load: func(p, _ int32, recs iter.Seq2[statelog.KV, error]) (int, error) {
			snaps, err := share.Load(recs)
			if err != nil {
				return 0, err
			}
			b.store.FinishLoad(p, snaps)
			return len(snaps), nil
		},
	}
	s.shareState = b
	return share.NewManager(s.cfg.Shares, b)
}

// do runs f against k's owner until it succeeds, fails for good
// (ErrFencedStateEpoch, ErrFencedLeaderEpoch) or shareStateTimeout
// passes.
func (b *shareStateBridge) do(k share.Key, f func(ctx context.Context, owner int32) error) error {
	deadline := time.Now().Add(shareStateTimeout)
	backoff := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithDeadline(b.s.ctx, deadline)
		owner, err := b.log.coordinator(ctx, share.StateKey(k), statelog.PartitionFor)
		if err == nil {
			err = f(ctx, owner)
		}
		cancel()
		if err == nil || errors.Is(err, share.ErrFencedStateEpoch) || errors.Is(err, share.ErrFencedLeaderEpoch) || b.s.ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-b.s.ctx.Done():
			return b.s.ctx.Err()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// Write implements share.Persister.
func (b *shareStateBridge) Write(k share.Key, s share.Snapshot) error {
	return b.do(k, func(ctx context.Context, owner int32) error {
		if owner == b.s.nodeID {
			return b.store.Write(k, s)
		}
		return b.s.peers.WriteShareState(ctx, owner, k, s)
	})
}

// Read implements share.Persister.
func (b *shareStateBridge) Read(k share.Key, leaderEpoch int32) (snap share.Snapshot, ok bool, err error) {
	err = b.do(k, func(ctx context.Context, owner int32) error {
		var err error
		if owner == b.s.nodeID {
			snap, ok, err = b.store.Read(k, leaderEpoch)
		} else {
			snap, ok, err = b.s.peers.ReadShareState(ctx, owner, k, leaderEpoch)
		}
		return err
	})
	return snap, ok, err
}

// startShares runs the Manager's ticks, the __share_group_state
// ownership loop and the data-leadership watch until the server closes;
// the node is attached by now (Start).
func (s *wireServer) startShares() {
	s.shares.SetGroupConfigs(func(group string) map[string]string {
		if s.node == nil {
			return nil
		}
		return s.node.MetadataImage().GroupConfigs(group)
	})
	s.groups.SetShareMemberGone(s.shares.CloseMember)
	s.shareState.log.start()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.shares.Run(s.ctx, shareTickInterval)
	}()
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			ch := s.node.Changed()
			s.syncShareLeadership()
			select {
			case <-ch:
			case <-tick.C:
			case <-s.ctx.Done():
				return
			}
		}
	}()
}

// syncShareLeadership tells the share Manager, for each data partition
// it holds share state of, whether this broker still leads it and at
// which epoch: a lost leadership forgets the state, a new epoch drops
// what was read at an older one (Manager.Lead), as another leader may
// have changed it since.
func (s *wireServer) syncShareLeadership() {
	img := s.node.MetadataImage()
	for _, tp := range s.shares.Held() {
		leader, epoch := int32(-1), int32(-1)
		if t, ok := img.TopicByID(metadata.UUID(tp.TopicID)); ok && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			leader, epoch = t.Partitions[tp.Partition].Leader, t.Partitions[tp.Partition].LeaderEpoch
		}
		if leader != s.nodeID {
			s.shares.Forget(tp)
			continue
		}
		s.shares.Lead(tp, epoch)
	}
}
