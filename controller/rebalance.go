package controller

import (
	"context"
	"errors"
	"slices"

	"github.com/ringlog/ringlog/controller/metadata"
)

// Preferred-leader rebalance, Kafka's auto.leader.rebalance.enable.
// Placement balances preferred leaders (Replicas[0]) over the brokers, but
// a fence moves leaderships to other replicas and nothing moves them back
// when the broker returns, so after a failover or a rolling restart a few
// brokers lead most partitions. Every LeaderRebalanceInterval the active
// controller computes, per broker, the share of the partitions it is
// preferred leader of that another broker leads; above
// LeaderImbalancePercent it proposes a preferred election for each of them
// whose preferred replica may lead now (unfenced and in the ISR, so the
// move loses nothing). The FSM checks that again when it applies the
// election, so an image that changed meanwhile costs only a rejection.

// preferredMove is one preferred election the rebalance proposes.
type preferredMove struct {
	Topic     string
	Partition int32
	From, To  int32 // current leader (NoLeader when offline) and the preferred replica
}

// preferredMoves returns the elections a rebalance of img proposes, by
// broker id, then topic and partition order.
func preferredMoves(img *metadata.Image, percent int) []preferredMove {
	type counts struct {
		preferred int
		moves     []preferredMove // led elsewhere, preferred may lead now
		elsewhere int             // led elsewhere, eligible or not
	}
	by := map[int32]*counts{}
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			if len(p.Replicas) == 0 {
				continue
			}
			pref := p.Replicas[0]
			c := by[pref]
			if c == nil {
				c = &counts{}
				by[pref] = c
			}
			c.preferred++
			if p.Leader == pref {
				continue
			}
			c.elsewhere++
			if b, ok := img.Broker(pref); ok && !b.Fenced && slices.Contains(p.ISR, pref) && !slices.Contains(p.Offline, pref) {
				c.moves = append(c.moves, preferredMove{Topic: t.Name, Partition: int32(i), From: p.Leader, To: pref})
			}
		}
	}
	var out []preferredMove
	for _, b := range img.Brokers() {
		c := by[b.ID]
		// Kafka's test: imbalance ratio strictly above the percentage.
		if c == nil || len(c.moves) == 0 || c.elsewhere*100 <= percent*c.preferred {
			continue
		}
		out = append(out, c.moves...)
	}
	return out
}

// rebalanceLeaders runs one rebalance on the active controller.
func (n *Node) rebalanceLeaders() {
	moves := preferredMoves(n.fsm.Image(), n.cfg.LeaderImbalancePercent)
	if len(moves) > 0 {
		n.log.Info("leader imbalance above threshold: electing preferred leaders",
			"partitions", len(moves), "imbalance_percent", n.cfg.LeaderImbalancePercent)
	}
	for _, m := range moves {
		if n.ctx.Err() != nil || !n.isController() {
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		res, _, err := n.propose(ctx, metadata.Command{ElectLeader: &metadata.ElectLeader{Topic: m.Topic, Partition: m.Partition, Preferred: true}})
		cancel()
		switch {
		case errors.Is(err, ErrNotController), errors.Is(err, ErrClosed):
			return
		case errors.Is(err, metadata.ErrElectionNotNeeded), errors.Is(err, metadata.ErrPreferredNotAvailable),
			errors.Is(err, metadata.ErrUnknownTopic):
			// The image moved on since the moves were computed.
			n.log.Debug("preferred leader election skipped", "topic", m.Topic, "partition", m.Partition, "err", err)
		case err != nil:
			n.log.Warn("preferred leader election failed", "topic", m.Topic, "partition", m.Partition, "err", err)
		default:
			n.log.Info("moved leadership to the preferred replica", "topic", m.Topic, "partition", m.Partition,
				"old_leader", m.From, "new_leader", res.Partition.Leader, "leader_epoch", res.Partition.LeaderEpoch)
		}
	}
}
