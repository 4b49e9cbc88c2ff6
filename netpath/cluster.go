package netpath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file connects the handlers to the cluster metadata: they ask the
// image (not the engine) which topics exist, who leads what, and which
// brokers there are.
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
// The broker package keeps the engine reconciled with the image (Cluster)
// and drives replication; handlers reconcile after an admin write and
// when the image is ahead of the broker's loop.

// Endpoint listener names registered for each of our listener kinds.
const (
	endpointPlaintext = proto.EndpointPlaintext
	endpointTLS       = proto.EndpointTLS
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
		if rerr := s.cluster.Reconcile(); rerr != nil {
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
	t, err := s.node.CreateTopic(ctx, controller.CreateTopicRequest{
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
	if rerr := s.cluster.Reconcile(); rerr != nil {
		s.log.Warn("reconcile after auto-create", "err", rerr)
		if err == nil {
			if err := s.cluster.RollbackCreate(t, rerr); err != nil {
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
