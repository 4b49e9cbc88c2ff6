package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ringlog/ringlog/controller/metadata"
)

// This file is the broker's side of the node (every node is a broker):
// registration, heartbeats, freshness, and the API the rest of ringlog
// calls. Writes go to the active controller over the RPC, wherever it is.

func (n *Node) brokerLoop() {
	defer n.wg.Done()
	for {
		wait := n.cfg.HeartbeatInterval
		if !n.pauseHeartbeats.Load() {
			n.mu.Lock()
			epoch, fatal := n.epoch, n.fatal
			n.mu.Unlock()
			if fatal != nil {
				return
			}
			if epoch == 0 {
				if err := n.register(); err != nil {
					wait = n.retryBackoff()
				} else {
					wait = 0 // heartbeat right away
				}
			} else if fenced := n.heartbeat(epoch); fenced {
				wait = n.retryBackoff() // catching up: ask again soon
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (n *Node) register() error {
	n.mu.Lock()
	cid := n.clusterID
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(n.ctx, 2*n.cfg.ApplyTimeout)
	defer cancel()
	var resp registerResp
	_, err := n.client.call(ctx, "Register", registerReq{
		ClusterID: cid, ID: n.cfg.NodeID, Incarnation: n.incarnation,
		Endpoints: n.cfg.Endpoints, Rack: n.cfg.Rack, ControllerAddr: n.advertise,
	}, &resp)
	if errors.Is(err, metadata.ErrClusterIDMismatch) {
		n.setFatal(err)
		return err
	}
	if err != nil {
		n.log.Debug("register", "err", err)
		return err
	}
	if err := n.saveClusterID(resp.ClusterID); err != nil {
		n.setFatal(fmt.Errorf("controller: save cluster id: %w", err))
		return err
	}
	n.mu.Lock()
	n.epoch = resp.Broker.Epoch
	n.mu.Unlock()
	n.log.Info("registered", "epoch", resp.Broker.Epoch, "cluster_id", resp.ClusterID)
	return nil
}

// heartbeat reports liveness and progress; it returns whether the broker is
// still fenced.
func (n *Node) heartbeat(epoch uint64) (fenced bool) {
	// Bounded well inside the session: a heartbeat stuck on a controller
	// that was cut off must give up in time for the next one to reach the
	// newly elected controller (the RPC client then targets raft's current
	// leader), or the new controller fences every broker whose session it
	// started at its election and collapses ISRs onto the cut-off one.
	ctx, cancel := context.WithTimeout(n.ctx, min(n.cfg.HeartbeatInterval+n.cfg.ApplyTimeout, n.cfg.BrokerSessionTimeout/3))
	defer cancel()
	var resp heartbeatResp
	// The lease runs from the send time: the controller's session clock
	// for this heartbeat starts later, when it receives it, so this
	// broker's lease always ends before the controller may fence it.
	sent := time.Now()
	// raft's applied index, not the image's: configuration and no-op
	// entries never reach the FSM, yet count in the controller's commit
	// index.
	_, err := n.client.call(ctx, "Heartbeat", heartbeatReq{
		ID: n.cfg.NodeID, Epoch: epoch, AppliedIndex: n.raft.AppliedIndex(),
	}, &resp)
	switch {
	case errors.Is(err, metadata.ErrStaleBrokerEpoch), errors.Is(err, metadata.ErrUnknownBroker):
		n.log.Warn("registration lost, registering again", "err", err)
		n.mu.Lock()
		n.epoch, n.hbFenced = 0, true
		n.mu.Unlock()
		return true
	case err != nil:
		n.log.Debug("heartbeat", "err", err)
		return true
	}
	n.mu.Lock()
	n.lastHB, n.hbFenced = sent, resp.Fenced
	n.lag.ack(sent, resp.CommitIndex, n.raft.AppliedIndex())
	n.mu.Unlock()
	if !resp.Fenced {
		select {
		case <-n.ready:
		default:
			close(n.ready)
		}
	}
	return resp.Fenced
}

func (n *Node) setFatal(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fatal == nil {
		n.fatal = err
		close(n.failed)
		n.log.Error("node refused by the cluster", "err", err)
	}
}

// WaitReady waits until this broker is registered and unfenced. It returns
// the reason when the cluster refused the node (metadata.ErrClusterIDMismatch).
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-n.failed:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.fatal
	case <-n.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("controller: waiting to join: %w", ctx.Err())
	}
}

// MetadataImage returns the latest applied metadata. It never blocks and
// never fails; check Fresh before answering clients from it.
func (n *Node) MetadataImage() *metadata.Image { return n.fsm.Image() }

// Changed returns a channel closed at the next metadata change (every
// applied entry, and snapshot restores). Call Changed, then MetadataImage,
// react, and repeat: no change is missed.
func (n *Node) Changed() <-chan struct{} { return n.fsm.Changed() }

// Fresh returns nil when this node's image may be served to clients, and
// otherwise why not:
//   - the last heartbeat the controller acknowledged was sent more than
//     BrokerSessionTimeout ago, or its answer said "fenced" (the lease:
//     the controller cannot have fenced this broker, and so moved its
//     leaderships, while the lease holds);
//   - the node was refused by the cluster (ErrClusterIDMismatch);
//   - this broker is not registered with this process's incarnation, or is
//     fenced (metadata.ErrBrokerFenced): its leaderships may have moved.
//     Not after its own controlled shutdown: the image that shows the
//     fence shows where the leaderships went, and while the broker drains
//     its clients must learn that from it (a fenced broker leads nothing
//     and is left out of the broker list) rather than see every topic
//     LEADER_NOT_AVAILABLE and give up their retries;
//   - it is not the raft leader and has not heard from one for
//     MaxStaleness (ErrStale). The leader itself steps down within raft's
//     LeaderLeaseTimeout (half of Config.ElectionTimeout: 250ms) of
//     losing its quorum, so it is fresh while it leads.
//
// So a node answers from an image at most MaxStaleness (default
// BrokerSessionTimeout, 9s) older than the leader's, plus the time its
// apply loop takes to catch up with entries it has received.
func (n *Node) Fresh() error {
	applied := n.raft.AppliedIndex()
	n.mu.Lock()
	fatal, lastHB, hbFenced := n.fatal, n.lastHB, n.hbFenced
	n.lag.advance(applied)
	caughtUp, behind := n.lag.caughtUp, n.lag.behind(applied)
	n.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	b, ok := n.fsm.Image().Broker(n.cfg.NodeID)
	switch {
	case !ok || b.Incarnation != n.incarnation:
		return fmt.Errorf("%w: broker %d not registered yet", ErrStale, n.cfg.NodeID)
	case b.Fenced && !n.shutDown.Load():
		return fmt.Errorf("%w: broker %d", metadata.ErrBrokerFenced, n.cfg.NodeID)
	}
	// The heartbeat lease: a broker that was paused or cut off (and may
	// have been fenced meanwhile, its leaderships moved) must not act on
	// its image until the controller has heard from it again and, if it
	// was fenced, it has caught up and been unfenced. Its image alone
	// cannot tell: the fence may not have reached it yet.
	if hbFenced && !n.shutDown.Load() {
		return fmt.Errorf("%w: broker %d (controller says so)", metadata.ErrBrokerFenced, n.cfg.NodeID)
	}
	if since := time.Since(lastHB); since > n.cfg.BrokerSessionTimeout {
		return fmt.Errorf("%w: no heartbeat acknowledged for %v", ErrStale, since.Round(time.Millisecond))
	}
	if n.raft.State() == raft.Leader {
		return nil
	}
	if last := n.raft.LastContact(); time.Since(last) > n.cfg.MaxStaleness {
		return fmt.Errorf("%w: no contact with the controller since %v", ErrStale, last.Format(time.RFC3339Nano))
	}
	// In contact, but applying the log too slowly: the image is as old as
	// the last heartbeat whose commit index it has reached.
	if age := time.Since(caughtUp); age > n.cfg.MaxStaleness {
		return fmt.Errorf("%w: metadata applied up to %v ago, %d entries behind the controller", ErrStale, age.Round(time.Millisecond), behind)
	}
	return nil
}

// BrokerState describes this broker for health checks:
//   - "refused": the cluster refused it (cluster id mismatch);
//   - "starting": not yet registered with this process's incarnation;
//   - "fenced": registered but fenced (catching up, or heartbeats lapsed);
//   - "stale": unfenced, but out of contact with the controller (Fresh
//     fails);
//   - "active": Fresh holds.
func (n *Node) BrokerState() string {
	n.mu.Lock()
	fatal := n.fatal
	n.mu.Unlock()
	if fatal != nil {
		return "refused"
	}
	b, ok := n.fsm.Image().Broker(n.cfg.NodeID)
	switch {
	case !ok || b.Incarnation != n.incarnation:
		return "starting"
	case b.Fenced:
		return "fenced"
	case n.Fresh() != nil:
		return "stale"
	}
	return "active"
}

// Controller returns the active controller's node id, or -1 when none is
// known (election in progress).
func (n *Node) Controller() int32 {
	id, _ := n.controller()
	return id
}

// NodeID returns this node's id.
func (n *Node) NodeID() int32 { return n.cfg.NodeID }

// BrokerEpoch returns this broker's epoch (0 until registered).
func (n *Node) BrokerEpoch() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.epoch
}

// waitApplied waits until the local image includes index, so a caller sees
// its own write in MetadataImage when the call returns.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		ch := n.fsm.Changed()
		if n.fsm.Image().Index() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("controller: waiting for index %d: %w", index, ctx.Err())
		case <-n.ctx.Done():
			return ErrClosed
		}
	}
}

// write runs method on the active controller and waits for the local
// replica to apply the result.
func (n *Node) write(ctx context.Context, method string, in, out any) error {
	idx, err := n.client.call(ctx, method, in, out)
	if err != nil {
		return err
	}
	return n.waitApplied(ctx, idx)
}

// Sync is a read barrier: it waits until this node's image includes every
// entry the active controller had applied when asked. A broker calls it
// before saying a topic does not exist, since the topic may have been
// created through another broker a moment ago.
func (n *Node) Sync(ctx context.Context) error {
	return n.write(ctx, "ReadIndex", emptyResp{}, nil)
}

// CreateTopicRequest describes a topic to create. Names and configs are
// stored as given: validate them (engine.ValidateTopicName,
// engine.ParseTopicConfig) before calling.
type CreateTopicRequest struct {
	Name       string
	Partitions int32 // > 0 unless Assignment is set
	// ReplicationFactor <= 0 means min(3, unfenced brokers).
	ReplicationFactor int16
	// Assignment, when set, is the replica list per partition (Kafka's
	// manual assignment) and overrides Partitions and ReplicationFactor.
	Assignment [][]int32
	Configs    map[string]string
	// ID, when set, is the topic id to use (a single node adopting topics
	// created before it ran a controller keeps their ids); zero draws one.
	ID metadata.UUID
}

// CreateTopic creates a topic through the active controller, placing
// replicas over the unfenced brokers. Callable on any node; when it returns,
// MetadataImage on this node includes the topic.
func (n *Node) CreateTopic(ctx context.Context, req CreateTopicRequest) (metadata.Topic, error) {
	var out topicResp
	err := n.write(ctx, "CreateTopic", req, &out)
	return out.Topic, err
}

// DeleteTopic deletes a topic through the active controller.
func (n *Node) DeleteTopic(ctx context.Context, name string) error {
	return n.write(ctx, "DeleteTopic", deleteReq{Name: name}, nil)
}

// CreatePartitions grows a topic to total partitions. assignment, when
// set, is the replica list of each new partition (Kafka's manual
// assignment); nil places them over the unfenced brokers.
func (n *Node) CreatePartitions(ctx context.Context, name string, total int32, assignment [][]int32) (metadata.Topic, error) {
	var out topicResp
	err := n.write(ctx, "CreatePartitions", partsReq{Name: name, Total: total, Assignment: assignment}, &out)
	return out.Topic, err
}

// ElectionType is Kafka's ElectLeaders election_type.
type ElectionType int8

const (
	// PreferredElection elects the preferred replica (Replicas[0]) when it
	// is unfenced and in the ISR (else metadata.ErrPreferredNotAvailable).
	PreferredElection ElectionType = 0
	// UncleanElection elects only for a partition without a live leader:
	// the first live ISR member, else any live replica, whose log then
	// decides (records only the old ISR held are lost).
	UncleanElection ElectionType = 1
)

// ElectLeader runs a leader election of the given type through the active
// controller and returns the partition as elected. A partition that needs
// none is metadata.ErrElectionNotNeeded.
func (n *Node) ElectLeader(ctx context.Context, topic string, partition int32, typ ElectionType) (metadata.Partition, error) {
	cmd := metadata.ElectLeader{Topic: topic, Partition: partition}
	switch typ {
	case PreferredElection:
		cmd.Preferred = true
	case UncleanElection:
		cmd.Unclean = true
	default:
		return metadata.Partition{}, fmt.Errorf("%w: election type %d", ErrInvalidRequest, typ)
	}
	var out partitionResp
	err := n.write(ctx, "ElectLeader", electReq{cmd}, &out)
	return out.Partition, err
}

// AlterPartition asks the controller to set a partition's ISR; this broker
// must lead it at leaderEpoch, and partitionEpoch must be the current one
// (else metadata.ErrFencedLeaderEpoch / ErrInvalidUpdateVersion).
func (n *Node) AlterPartition(ctx context.Context, topicID metadata.UUID, partition, leaderEpoch, partitionEpoch int32, newISR []int32) (metadata.Partition, error) {
	var out partitionResp
	err := n.write(ctx, "AlterPartition", alterReq{metadata.AlterPartition{
		BrokerID: n.cfg.NodeID, BrokerEpoch: n.BrokerEpoch(), TopicID: topicID, Partition: partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, NewISR: newISR,
	}}, &out)
	return out.Partition, err
}

// ReportOfflineReplicas tells the controller that this broker's replicas
// of the given partitions of topicID failed on disk: they leave the ISR,
// their leaderships move to other in-sync replicas, and they stay out
// until this broker registers again (a restart, which recovers the logs).
func (n *Node) ReportOfflineReplicas(ctx context.Context, topicID metadata.UUID, partitions []int32) error {
	return n.write(ctx, "ReplicaOffline", offlineReq{metadata.ReplicaOffline{
		BrokerID: n.cfg.NodeID, BrokerEpoch: n.BrokerEpoch(), TopicID: topicID, Partitions: partitions,
	}}, nil)
}

// AllocateProducerIDs reserves metadata.ProducerIDBlockSize producer ids
// for this broker and returns the first.
func (n *Node) AllocateProducerIDs(ctx context.Context) (int64, error) {
	var out pidResp
	err := n.write(ctx, "AllocateProducerIDs", pidReq{metadata.AllocateProducerIDs{BrokerID: n.cfg.NodeID, BrokerEpoch: n.BrokerEpoch()}}, &out)
	return out.Start, err
}
