package netpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ringlog/ringlog/coordinator"
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/ratelog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file connects the wire server to the cluster metadata: the engine
// is reconciled with the controller's image, and handlers ask the image
// (not the engine) which topics exist, who leads what, and which brokers
// there are.
//
// Staleness: before answering from the image a handler calls Node.Fresh.
// A broker whose image may be stale (fenced, not yet registered, or out of
// contact with the controller for longer than the session timeout) answers
//   - Metadata: every requested topic with LEADER_NOT_AVAILABLE and no
//     partitions (and controller id -1), so clients retry, and with the
//     brokers it knows, so they can retry elsewhere;
//   - Produce, Fetch, ListOffsets: NOT_LEADER_OR_FOLLOWER per partition;
//   - DescribeCluster: top-level LEADER_NOT_AVAILABLE.
//
// Partitions with more than one replica are replicated (replicas.go):
// reconcile makes this broker their leader or follower per the image.

// Endpoint listener names registered for each of our listener kinds.
const (
	endpointPlaintext = "PLAINTEXT"
	endpointTLS       = "SSL"
)

func endpointName(l *listener) string {
	if l.tls != nil {
		return endpointTLS
	}
	return endpointPlaintext
}

// Endpoints returns the advertised endpoint of every bound listener, for
// the broker's registration with the controller.
func (s *Server) Endpoints() []metadata.Endpoint {
	s.mu.Lock()
	ls := slices.Clone(s.listeners)
	s.mu.Unlock()
	var out []metadata.Endpoint
	for _, l := range ls {
		host, port := s.advertised(l)
		out = append(out, metadata.Endpoint{Listener: endpointName(l), Host: host, Port: port})
	}
	return out
}

// reconcileLoop reconciles after every applied metadata entry. Changed is
// taken before the image is read, so no change is missed.
func (s *Server) reconcileLoop() {
	// The loop runs after every metadata change, broker heartbeats
	// included: a lasting cause such as a full disk is logged once a
	// minute, not every time.
	errLog := ratelog.New(s.log, slog.LevelError, "reconciling local logs with cluster metadata", time.Minute)
	for {
		ch := s.node.Changed()
		if err := s.reconcile(); s.ctx.Err() == nil {
			errLog.Report(err)
		}
		select {
		case <-ch:
		case <-s.ctx.Done():
			return
		}
	}
}

// reconcile makes the engine hold exactly the partitions the image assigns
// to this broker, with the image's topic ids and configs, and stamps each
// hosted partition with its leader epoch. It is idempotent and cheap when
// nothing changed. Only call it once the node is ready: an image that is
// behind (before the node caught up after a restart) would delete logs of
// topics it does not know yet.
func (s *Server) reconcile() error {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	img := s.node.MetadataImage()
	me := s.cfg.NodeID
	keep := map[string]bool{}
	seen := map[tpKey]bool{}
	var errs []error
	for _, t := range img.Topics() {
		var hosted []int32
		for i, p := range t.Partitions {
			if slices.Contains(p.Replicas, me) {
				hosted = append(hosted, int32(i))
			}
		}
		if len(hosted) == 0 {
			continue
		}
		keep[t.Name] = true
		err := s.engine.SyncTopic(engine.TopicSpec{
			Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Hosted: hosted, Configs: t.Configs,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, i := range hosted {
			part, err := s.engine.Partition(t.Name, i)
			if err != nil {
				continue
			}
			if s.repl != nil {
				s.repl.syncPartition(t, i, t.Partitions[i], part, seen)
			} else if e := t.Partitions[i].LeaderEpoch; part.LeaderEpoch() != e {
				part.SetLeaderEpoch(e)
			}
		}
	}
	if s.repl != nil {
		s.repl.forgetUnseen(seen)
	}
	for _, ti := range s.engine.Topics() {
		if keep[ti.Name] {
			continue
		}
		s.log.Info("deleting local logs no longer assigned here", "topic", ti.Name)
		if err := s.engine.DeleteTopic(ti.Name); err != nil && !errors.Is(err, engine.ErrUnknownTopic) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// adminContext bounds a controller write by the request's timeout, or
// AdminTimeout when it has none.
func (s *Server) adminContext(timeoutMs int32) (context.Context, context.CancelFunc) {
	d := s.cfg.AdminTimeout
	if timeoutMs > 0 {
		d = min(time.Duration(timeoutMs)*time.Millisecond, d)
	}
	return context.WithTimeout(s.ctx, d)
}

// liveBrokers returns the unfenced brokers of img that have an endpoint for
// listener l (Kafka's Metadata lists only live brokers).
type brokerEndpoint struct {
	id   int32
	host string
	port int32
	rack *string
}

func (s *Server) liveBrokers(img *metadata.Image, l *listener) []brokerEndpoint {
	name := endpointName(l)
	var out []brokerEndpoint
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		for _, ep := range b.Endpoints {
			if ep.Listener != name {
				continue
			}
			be := brokerEndpoint{id: b.ID, host: ep.Host, port: ep.Port}
			if b.Rack != "" {
				rack := b.Rack
				be.rack = &rack
			}
			if b.ID == s.cfg.NodeID {
				// Our own listener knows its advertised address best.
				be.host, be.port = s.advertised(l)
			}
			out = append(out, be)
			break
		}
	}
	return out
}

// leaderCheck is the result of checking that this broker leads a
// partition: the local log, the image's view, and a Kafka error code.
type leaderCheck struct {
	part *engine.Partition
	info metadata.Partition
	code int16
}

// leaderPartition checks that this broker may serve topic/idx as its
// leader right now at the client's current leader epoch (-1: unchecked),
// and returns the local log. fresh is Node.Fresh's result for the request.
func (s *Server) leaderPartition(img *metadata.Image, fresh error, topic string, idx int32, clientEpoch int32) leaderCheck {
	p, ok := img.Partition(topic, idx)
	if !ok {
		return leaderCheck{code: kerr.UnknownTopicOrPartition.Code}
	}
	c := leaderCheck{info: p}
	if fresh != nil || p.Leader != s.cfg.NodeID {
		s.stats.notLeader.Add(1)
		c.code = kerr.NotLeaderForPartition.Code
		return c
	}
	switch {
	case clientEpoch == -1 || clientEpoch == p.LeaderEpoch:
	case clientEpoch > p.LeaderEpoch:
		c.code = kerrUnknownLeaderEpoch
		return c
	default:
		c.code = kerrFencedLeaderEpoch
		return c
	}
	part, err := s.engine.Partition(topic, idx)
	if err != nil {
		// The image is ahead of the reconcile loop (a topic created a
		// moment ago): catch up now rather than fail the request.
		if rerr := s.reconcile(); rerr != nil {
			s.log.Warn("reconcile", "err", rerr)
		}
		if part, err = s.engine.Partition(topic, idx); err != nil {
			s.stats.notLeader.Add(1)
			c.code = kerr.NotLeaderForPartition.Code
			return c
		}
	}
	c.part = part
	return c
}

// lookupTopic finds topic in img, and when it is missing there asks the
// controller for a read barrier (bounded) and looks again in the newer
// image, which it returns: a topic created through another broker a moment
// ago is then found rather than reported unknown.
func (s *Server) lookupTopic(img *metadata.Image, name string) (metadata.Topic, *metadata.Image, bool) {
	if t, ok := img.Topic(name); ok {
		return t, img, true
	}
	ctx, cancel := context.WithTimeout(s.ctx, min(2*time.Second, s.cfg.AdminTimeout))
	defer cancel()
	if err := s.node.Sync(ctx); err != nil {
		return metadata.Topic{}, img, false
	}
	img = s.node.MetadataImage()
	t, ok := img.Topic(name)
	return t, img, ok
}

// topicByID finds a topic of the image by its id.
func (s *Server) topicByID(id [16]byte) (metadata.Topic, bool) {
	return s.node.MetadataImage().TopicByID(metadata.UUID(id))
}

// autoCreate creates topic with the broker defaults through the controller,
// tolerating a concurrent creation of the same topic, and returns the
// image that has it.
func (s *Server) autoCreate(topic string) (*metadata.Image, error) {
	if !s.cfg.AutoCreateTopics || isInternalTopic(topic) {
		return nil, engine.ErrUnknownTopic
	}
	if err := engine.ValidateTopicName(topic); err != nil {
		return nil, err
	}
	if err := s.engine.DiskFull(); err != nil {
		return nil, fmt.Errorf("not creating topic %s: %w", topic, err)
	}
	ctx, cancel := s.adminContext(0)
	defer cancel()
	t, err := s.node.CreateTopic(ctx, coordinator.CreateTopicRequest{
		Name: topic, Partitions: s.cfg.DefaultPartitions, ReplicationFactor: s.autoCreateRF(),
	})
	switch {
	case err == nil:
		s.log.Info("auto-created topic", "topic", topic, "partitions", s.cfg.DefaultPartitions)
	case errors.Is(err, metadata.ErrTopicExists):
		// Created elsewhere; make sure this image has it.
		ctx, cancel := s.adminContext(0)
		defer cancel()
		if err := s.node.Sync(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	if rerr := s.reconcile(); rerr != nil {
		s.log.Warn("reconcile after auto-create", "err", rerr)
		if err == nil {
			if err := s.createRollback(t, rerr); err != nil {
				return nil, err
			}
		}
	}
	return s.node.MetadataImage(), nil
}

// autoCreateRF is the default replication factor, capped at the live
// brokers so auto-creation still works while some are down.
func (s *Server) autoCreateRF() int16 {
	live := 0
	for _, b := range s.node.MetadataImage().Brokers() {
		if !b.Fenced {
			live++
		}
	}
	return int16(max(1, min(int(s.cfg.DefaultReplicationFactor), live)))
}
