package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
)

type unregisterReq struct{ ID int32 }

// UnregisterBroker removes broker id's registration through the active
// controller (metadata.UnregisterBroker says when it is refused). A broker
// that joined raft as a non-voter also leaves the raft configuration, so
// the controller stops replicating the log to a process that is gone; a
// controller voter keeps its vote (changing the voter set is a separate
// operation, done by restarting the voters with a new --controller-voters).
func (n *Node) UnregisterBroker(ctx context.Context, id int32) error {
	return n.write(ctx, "UnregisterBroker", unregisterReq{id}, nil)
}

func (n *Node) handleUnregisterBroker(ctx context.Context, req *unregisterReq) (any, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	_, idx, err := n.propose(ctx, metadata.Command{UnregisterBroker: &metadata.UnregisterBroker{ID: req.ID}})
	if err != nil && !errors.Is(err, metadata.ErrUnknownBroker) {
		return nil, idx, err
	}
	// Also after ErrUnknownBroker: a retry after a failed raft removal
	// finishes it.
	if !n.cfg.isVoter(req.ID) {
		if rerr := n.removeNonvoter(req.ID); rerr != nil {
			if err == nil {
				err = fmt.Errorf("broker %d unregistered, but removing it from the raft configuration failed (retry): %w", req.ID, rerr)
			}
			return nil, idx, err
		}
	}
	n.lmu.Lock()
	if n.lastSeen != nil {
		delete(n.lastSeen, req.ID)
	}
	if n.catchUp != nil {
		delete(n.catchUp, req.ID)
	}
	if n.shutdown != nil {
		delete(n.shutdown, req.ID)
	}
	n.lmu.Unlock()
	if err == nil {
		n.log.Info("unregistered broker", "broker", req.ID)
	}
	return emptyResp{}, idx, err
}

// removeNonvoter removes server id from the raft configuration when it is
// there as a non-voter.
func (n *Node) removeNonvoter(id int32) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	sid := raft.ServerID(fmt.Sprint(id))
	for _, s := range f.Configuration().Servers {
		if s.ID != sid || s.Suffrage == raft.Voter {
			continue
		}
		if err := n.raft.RemoveServer(sid, 0, n.cfg.ApplyTimeout).Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
				return fmt.Errorf("%w: %v", ErrNotController, err)
			}
			return err
		}
		n.log.Info("removed non-voter", "broker", id)
	}
	return nil
}
