package controller

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
)

// uncleanKey is the topic config (Kafka's name) that overrides
// Config.UncleanLeaderElection.
const uncleanKey = "unclean.leader.election.enable"

// electUnclean runs on the active controller's tick: every partition left
// without a leader (no live ISR member) whose topic allows unclean
// election gets any live replica as leader and an ISR of just it. What
// only the old ISR held is lost, so each election is logged at error level.
func (n *Node) electUnclean() {
	img := n.fsm.Image()
	// The dynamic broker config (IncrementalAlterConfigs), the cluster-wide
	// default then this controller's own, overrides the flag.
	def := n.cfg.UncleanLeaderElection
	for _, res := range []string{"", strconv.Itoa(int(n.cfg.NodeID))} {
		if b, err := strconv.ParseBool(img.BrokerConfigs(res)[uncleanKey]); err == nil {
			def = b
		}
	}
	for _, t := range img.Topics() {
		unclean := def
		if v, ok := t.Configs[uncleanKey]; ok {
			// Parsed as the engine validated it ("True", "1" are true too).
			if b, err := strconv.ParseBool(v); err == nil {
				unclean = b
			}
		}
		if !unclean {
			continue
		}
		for i, p := range t.Partitions {
			if p.Leader != metadata.NoLeader {
				continue
			}
			live := false
			for _, r := range p.Replicas {
				if b, ok := img.Broker(r); ok && !b.Fenced && !slices.Contains(p.Offline, r) {
					live = true
				}
			}
			if !live {
				continue
			}
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
			res, _, err := n.propose(ctx, metadata.Command{ElectLeader: &metadata.ElectLeader{Topic: t.Name, Partition: int32(i), Unclean: true}})
			cancel()
			if err != nil {
				n.log.Warn("unclean leader election failed", "topic", t.Name, "partition", i, "leader_epoch", p.LeaderEpoch, "err", err)
				continue
			}
			n.log.Error("UNCLEAN LEADER ELECTION: no in-sync replica alive, elected an out-of-sync replica; records acknowledged by the old ISR may be lost",
				"topic", t.Name, "partition", i, "leader", res.Partition.Leader, "leader_epoch", res.Partition.LeaderEpoch, "old_isr", p.ISR)
		}
	}
}

// ControlledShutdown asks the active controller to move this broker's
// partition leaderships to other in-sync replicas and take it out of
// every ISR (the controller fences it, as after a missed session), and
// waits until this node's image shows the result. Heartbeats stop first,
// so the broker is not unfenced again before it exits. Call it on SIGTERM
// before closing the listeners.
func (n *Node) ControlledShutdown(ctx context.Context) error {
	n.pauseHeartbeats.Store(true)
	n.mu.Lock()
	epoch := n.epoch
	n.mu.Unlock()
	if epoch == 0 {
		return errors.New("controller: controlled shutdown: not registered")
	}
	// The active controller hands raft leadership over first and then
	// asks the new controller for the fence like any other broker. The
	// other way round (fence, then hand over) the followers learn that the
	// fence is committed only from the next leader's first commit, which
	// can come after this process has exited: the survivors would show the
	// moved leaderships only after an election timeout.
	if n.raft.State() == raft.Leader {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("controlled shutdown: controller leadership transfer failed; fencing through this node", "err", err)
		}
	}
	if err := n.write(ctx, "ControlledShutdown", shutdownReq{ID: n.cfg.NodeID, Epoch: epoch}, nil); err != nil {
		return err
	}
	n.shutDown.Store(true)
	return nil
}

func (n *Node) handleControlledShutdown(ctx context.Context, req *shutdownReq) (any, uint64, error) {
	// Marked before the fence is proposed: a heartbeat racing the
	// proposal must not unfence the broker right after it.
	n.lmu.Lock()
	if n.shutdown != nil {
		n.shutdown[req.ID] = req.Epoch
	}
	n.lmu.Unlock()
	_, idx, err := n.propose(ctx, metadata.Command{FenceBroker: &metadata.FenceBroker{ID: req.ID, Epoch: req.Epoch}})
	if errors.Is(err, metadata.ErrAlreadyFenced) {
		return emptyResp{}, idx, nil
	}
	if err != nil {
		return nil, idx, err
	}
	n.log.Info("controlled shutdown: moved leaderships off broker", "broker", req.ID)
	return emptyResp{}, idx, nil
}
