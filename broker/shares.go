package broker

import (
	"time"

	"github.com/ringlog/ringlog/coordinator/share"
)

// This file wires the partition-leader side of share groups
// (coordinator/share): the Manager's lock-expiry ticks, its view of the
// groups' dynamic configs (the metadata image's GROUP resources), and the
// group coordinator's news of members that left (their records are
// released at once rather than when their locks expire).
//
// The state is kept in memory (share.MemoryPersister): a restart or a
// leader move starts every share-partition afresh, as
// share.auto.offset.reset says. The durable Persister (Kafka's
// __share_group_state) is the next step; see docs/GROUPS.md.

// shareTickInterval is how often expired acquisition locks are released;
// lock durations are seconds.
const shareTickInterval = 100 * time.Millisecond

func newShares(s *wireServer) (*share.Manager, error) {
	return share.NewManager(s.cfg.Shares, share.NewMemoryPersister())
}

// startShares runs the Manager's ticks until the server closes; the node
// is attached by now (Start).
func (s *wireServer) startShares() {
	s.shares.SetGroupConfigs(func(group string) map[string]string {
		if s.node == nil {
			return nil
		}
		return s.node.MetadataImage().GroupConfigs(group)
	})
	s.groups.SetShareMemberGone(s.shares.CloseMember)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.shares.Run(s.ctx, shareTickInterval)
	}()
}
