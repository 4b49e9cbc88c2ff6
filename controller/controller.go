package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
)

// This file is the active controller's side: leadership changes, the
// session timer that fences silent brokers, and the RPC handlers. Every
// handler first checks that this node leads; the FSM re-validates each
// command, so a handler racing a leadership change cannot corrupt state.

func (n *Node) controllerLoop() {
	defer n.wg.Done()
	// The fence tick runs only while this node leads (the leadership
	// notification starts and stops it): elsewhere there are no sessions
	// to check, and it woke every idle follower twice a second for
	// nothing. Until the notification the session state is not this
	// leadership's (expiredSessions), so no tick is lost by waiting for it.
	every := fenceTick(n.cfg.HeartbeatInterval, n.cfg.BrokerSessionTimeout)
	tick := time.NewTicker(every)
	tick.Stop()
	defer tick.Stop()
	var rebalance <-chan time.Time // nil: disabled
	if n.cfg.LeaderRebalanceInterval > 0 {
		rt := time.NewTicker(n.cfg.LeaderRebalanceInterval)
		defer rt.Stop()
		rebalance = rt.C
	}
	for {
		select {
		case <-n.ctx.Done():
			return
		case leading := <-n.notifyCh:
			var brokers []metadata.Broker
			if leading {
				brokers = n.fsm.Image().Brokers()
			}
			n.startSessions(brokers, time.Now())
			if leading {
				tick.Reset(every)
				n.log.Info("became active controller")
				n.wg.Add(1)
				go n.initCluster()
			} else {
				tick.Stop()
			}
		case <-tick.C:
			if n.isController() {
				n.fenceExpired()
				n.electUnclean()
			}
		case <-rebalance:
			// Off this loop: many elections must not delay fencing.
			if n.isController() && n.rebalancing.CompareAndSwap(false, true) {
				n.wg.Add(1)
				go func() {
					defer n.wg.Done()
					defer n.rebalancing.Store(false)
					n.rebalanceLeaders()
				}()
			}
		}
	}
}

// initCluster fixes the cluster id the first time a controller leads.
func (n *Node) initCluster() {
	defer n.wg.Done()
	// Barrier: the image must reflect the whole log before we read it.
	if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		return
	}
	if n.fsm.Image().ClusterID() != "" {
		return
	}
	n.mu.Lock()
	id := n.clusterID
	n.mu.Unlock()
	if id == "" {
		id = newClusterID()
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
	defer cancel()
	if _, _, err := n.propose(ctx, metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: id}}); err != nil {
		n.log.Warn("init cluster id", "err", err)
		return
	}
	n.log.Info("cluster id fixed", "cluster_id", id)
}

// fenceExpired fences unfenced brokers whose last heartbeat is older than
// BrokerSessionTimeout.
func (n *Node) fenceExpired() {
	expired := n.expiredSessions(n.fsm.Image().Brokers(), time.Now())
	for _, b := range expired {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		_, _, err := n.propose(ctx, metadata.Command{FenceBroker: &metadata.FenceBroker{ID: b.ID, Epoch: b.Epoch}})
		cancel()
		n.log.Info("fenced broker after missed heartbeats", "broker", b.ID, "err", err)
	}
}

// fenceTick is how often the active controller looks for ended sessions:
// at a twentieth of the session, a silent broker is fenced within 5% of
// its session's end (at half the heartbeat interval, a sixth of a 3 s
// session could pass first).
func fenceTick(heartbeat, session time.Duration) time.Duration {
	return max(min(heartbeat/2, session/20), 10*time.Millisecond)
}

// startSessions resets the session state on a leadership change. A new
// controller knows nothing of past heartbeats, so every broker in
// brokers (the image's, when this node now leads; none when it stopped)
// gets a full session from now. Started at the election, not at the next
// tick, so a broker cut off with the old controller is fenced a session
// after the election, not up to a tick or two later; a broker the image
// does not show yet starts its session at the first check that sees it.
func (n *Node) startSessions(brokers []metadata.Broker, now time.Time) {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	n.lastSeen, n.catchUp, n.shutdown = map[int32]time.Time{}, map[int32]uint64{}, map[int32]uint64{}
	for _, b := range brokers {
		n.lastSeen[b.ID] = now
	}
}

// expiredSessions returns the unfenced brokers of brokers whose last
// heartbeat (or session start) is more than a session before now.
func (n *Node) expiredSessions(brokers []metadata.Broker, now time.Time) []metadata.Broker {
	var expired []metadata.Broker
	n.lmu.Lock()
	defer n.lmu.Unlock()
	if n.lastSeen == nil {
		// Leading, but the leadership notification is not handled yet.
		return nil
	}
	for _, b := range brokers {
		if b.Fenced {
			continue
		}
		seen, ok := n.lastSeen[b.ID]
		if !ok {
			n.lastSeen[b.ID] = now
			continue
		}
		if now.Sub(seen) > n.cfg.BrokerSessionTimeout {
			expired = append(expired, b)
		}
	}
	return expired
}

func (n *Node) touch(id int32) {
	n.lmu.Lock()
	if n.lastSeen != nil {
		n.lastSeen[id] = time.Now()
	}
	n.lmu.Unlock()
}

func (n *Node) handleRegister(ctx context.Context, req *registerReq) (any, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	img := n.fsm.Image()
	cid := req.ClusterID
	if cid == "" {
		// A node on its first start adopts the cluster's id.
		if cid = img.ClusterID(); cid == "" {
			return nil, 0, metadata.ErrClusterNotInitialized
		}
	}
	res, idx, err := n.propose(ctx, metadata.Command{RegisterBroker: &metadata.RegisterBroker{
		ClusterID: cid, ID: req.ID, Incarnation: req.Incarnation, Endpoints: req.Endpoints, Rack: req.Rack,
	}})
	if err != nil {
		return nil, idx, err
	}
	if !n.cfg.isVoter(req.ID) {
		// Only now, with the cluster id checked, may it join raft.
		if err := n.ensureNonvoter(req.ID, req.ControllerAddr); err != nil {
			return nil, idx, err
		}
	}
	n.touch(req.ID)
	return registerResp{ClusterID: cid, Broker: *res.Broker}, idx, nil
}

func (n *Node) ensureNonvoter(id int32, addr string) error {
	if addr == "" {
		return fmt.Errorf("%w: broker %d sent no controller address", ErrInvalidRequest, id)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	sid := raft.ServerID(fmt.Sprint(id))
	for _, s := range f.Configuration().Servers {
		if s.ID == sid && string(s.Address) == addr {
			return nil
		}
	}
	if err := n.raft.AddNonvoter(sid, raft.ServerAddress(addr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return fmt.Errorf("%w: %v", ErrNotController, err)
		}
		return err
	}
	n.log.Info("added non-voter", "broker", id, "addr", addr)
	return nil
}

func (n *Node) handleHeartbeat(ctx context.Context, req *heartbeatReq) (any, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	img := n.fsm.Image()
	b, ok := img.Broker(req.ID)
	switch {
	case !ok:
		return nil, 0, fmt.Errorf("%w: broker %d", metadata.ErrUnknownBroker, req.ID)
	case b.Epoch != req.Epoch:
		return nil, 0, fmt.Errorf("%w: broker %d epoch %d, heartbeat has %d", metadata.ErrStaleBrokerEpoch, req.ID, b.Epoch, req.Epoch)
	}
	n.touch(req.ID)
	// The image's index, not raft's commit index: that one usually ends
	// in the barrier entry propose appends (or the no-op a new leader
	// does), which carry no metadata and whose commit followers learn of
	// only at raft's next AppendEntries, CommitTimeout (node.go) later.
	commit := img.Index()
	if !b.Fenced {
		return heartbeatResp{CommitIndex: commit}, 0, nil
	}
	// A fenced broker is unfenced once it has applied the log up to the
	// metadata this controller had applied at its first heartbeat while
	// fenced. Fixing the target then keeps it from chasing a moving index.
	n.lmu.Lock()
	if e, ok := n.shutdown[req.ID]; ok && e == req.Epoch {
		n.lmu.Unlock()
		return heartbeatResp{Fenced: true, CommitIndex: commit}, 0, nil
	}
	target, ok := n.catchUp[req.ID]
	if !ok && n.catchUp != nil {
		target = max(commit, b.Epoch)
		n.catchUp[req.ID] = target
	}
	n.lmu.Unlock()
	if !ok || req.AppliedIndex < target {
		return heartbeatResp{Fenced: true, CommitIndex: commit}, 0, nil
	}
	_, idx, err := n.propose(ctx, metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: req.ID, Epoch: req.Epoch}})
	if err != nil {
		return nil, idx, err
	}
	n.lmu.Lock()
	delete(n.catchUp, req.ID)
	n.lmu.Unlock()
	n.log.Info("unfenced broker", "broker", req.ID)
	return heartbeatResp{CommitIndex: commit}, idx, nil
}

func (n *Node) handleAlterPartition(ctx context.Context, req *alterReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{AlterPartition: &req.AlterPartition})
	if err != nil {
		return nil, idx, err
	}
	return partitionResp{*res.Partition}, idx, nil
}

func (n *Node) handleElectLeader(ctx context.Context, req *electReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{ElectLeader: &req.ElectLeader})
	if err != nil {
		return nil, idx, err
	}
	return partitionResp{*res.Partition}, idx, nil
}

func (n *Node) handleReplicaOffline(ctx context.Context, req *offlineReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{ReplicaOffline: &req.ReplicaOffline})
	if err != nil {
		return nil, idx, err
	}
	n.log.Warn("replicas offline after a disk error on their broker", "broker", req.BrokerID, "topic", res.Topic.Name, "partitions", req.Partitions)
	return emptyResp{}, idx, nil
}

func (n *Node) handleAllocateProducerIDs(ctx context.Context, req *pidReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{AllocateProducerIDs: &req.AllocateProducerIDs})
	if err != nil {
		return nil, idx, err
	}
	return pidResp{res.ProducerIDStart}, idx, nil
}

// handleReadIndex returns the index of the last entry applied to the
// controller's image (not raft's applied index: no-op and configuration
// entries never reach the image, so a caller could wait for them forever).
func (n *Node) handleReadIndex(_ context.Context, _ *emptyResp) (any, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	return emptyResp{}, n.fsm.Image().Index(), nil
}

func (n *Node) handleDeleteTopic(ctx context.Context, req *deleteReq) (any, uint64, error) {
	_, idx, err := n.propose(ctx, metadata.Command{DeleteTopic: &metadata.DeleteTopic{Name: req.Name}})
	return emptyResp{}, idx, err
}

// placement computes replica lists for count new partitions over the
// unfenced brokers, balancing against what they already hold.
func (n *Node) placement(img *metadata.Image, count int, rf int) ([][]int32, error) {
	var live []metadata.PlacementBroker
	for _, b := range img.Brokers() {
		if !b.Fenced {
			live = append(live, metadata.PlacementBroker{ID: b.ID, Rack: b.Rack})
		}
	}
	if rf <= 0 {
		rf = min(3, len(live))
	}
	return metadata.Place(metadata.PlacementRequest{
		Brokers: live, Partitions: count, ReplicationFactor: rf,
		LeaderCounts: img.LeaderCounts(), ReplicaCounts: img.ReplicaCounts(),
	})
}

func (n *Node) handleCreateTopic(ctx context.Context, req *CreateTopicRequest) (any, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	img := n.fsm.Image()
	if _, ok := img.Topic(req.Name); ok {
		return nil, 0, fmt.Errorf("%w: %q", metadata.ErrTopicExists, req.Name)
	}
	assign := req.Assignment
	if len(assign) == 0 {
		var err error
		if assign, err = n.placement(img, int(req.Partitions), int(req.ReplicationFactor)); err != nil {
			return nil, 0, err
		}
	}
	id := req.ID
	if id.IsZero() {
		id = metadata.NewUUID()
	}
	res, idx, err := n.propose(ctx, metadata.Command{CreateTopic: &metadata.CreateTopic{
		Name: req.Name, ID: id, Configs: maps.Clone(req.Configs), Assignment: assign,
	}})
	if err != nil {
		return nil, idx, err
	}
	return topicResp{*res.Topic}, idx, nil
}

func (n *Node) handleCreatePartitions(ctx context.Context, req *partsReq) (any, uint64, error) {
	if !n.isController() {
		return nil, 0, ErrNotController
	}
	img := n.fsm.Image()
	t, ok := img.Topic(req.Name)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, req.Name)
	}
	add := int(req.Total) - len(t.Partitions)
	if add <= 0 {
		return nil, 0, fmt.Errorf("%w: topic %q has %d partitions, asked for %d", metadata.ErrInvalidPartitions, req.Name, len(t.Partitions), req.Total)
	}
	assign := req.Assignment
	if len(assign) == 0 {
		var err error
		if assign, err = n.placement(img, add, len(t.Partitions[0].TargetReplicas())); err != nil {
			return nil, 0, err
		}
	}
	res, idx, err := n.propose(ctx, metadata.Command{CreatePartitions: &metadata.CreatePartitions{
		Name: req.Name, Total: req.Total, Assignment: assign,
	}})
	if err != nil {
		return nil, idx, err
	}
	return topicResp{*res.Topic}, idx, nil
}

// Members returns the raft configuration as "id@addr (voter|nonvoter)",
// sorted, for diagnostics.
func (n *Node) Members() ([]string, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range f.Configuration().Servers {
		kind := "voter"
		if s.Suffrage != raft.Voter {
			kind = "nonvoter"
		}
		out = append(out, fmt.Sprintf("%s@%s (%s)", s.ID, s.Address, kind))
	}
	slices.Sort(out)
	return out, nil
}
