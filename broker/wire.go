package broker

// TEMPORARY (issue 16, LIFE branch): this file stands in for GLUE's
// broker/wire.go, which replaces it at merge. It keeps the contract's
// shape (WireConfig, newWireServer, the wireServer methods) over today's
// netpath.Server, which still builds its own groups, transactions and
// producer ids.

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/coordinator"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/metadata"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/netpath"
	"github.com/ringlog/ringlog/replication"
)

// WireConfig is the part of broker.Config the Kafka server and its
// collaborators use.
type WireConfig struct {
	// Wire configures framing, listeners, limits and authentication.
	Wire netpath.Config
	// Groups configures the consumer group coordinator.
	Groups group.Config
	// Transactions configures the transaction coordinator; its
	// OffsetsTopicPartitions is taken from Groups.
	Transactions txn.Config
	// OffsetsReplicationFactor is the replication factor of
	// __consumer_offsets when it is created; <= 0 means min(3, live
	// brokers) (offsets.topic.replication.factor).
	OffsetsReplicationFactor int16
	// OffsetsTopicSegmentBytes is segment.bytes of __consumer_offsets
	// when it is created (offsets.topic.segment.bytes, 100 MiB).
	OffsetsTopicSegmentBytes int64
	// TransactionStateReplicationFactor is the replication factor of
	// __transaction_state when it is created; <= 0 means min(3, live
	// brokers) (transaction.state.log.replication.factor).
	TransactionStateReplicationFactor int16
	// TransactionStateSegmentBytes is segment.bytes of
	// __transaction_state when it is created
	// (transaction.state.log.segment.bytes, 100 MiB).
	TransactionStateSegmentBytes int64
}

// wireServer is the Kafka server as the broker drives it.
type wireServer struct {
	s *netpath.Server
}

func newWireServer(cfg WireConfig, eng *engine.Engine) (*wireServer, error) {
	n := cfg.Wire
	n.Groups = cfg.Groups
	n.Transactions = cfg.Transactions
	n.OffsetsReplicationFactor = cfg.OffsetsReplicationFactor
	n.OffsetsTopicSegmentBytes = cfg.OffsetsTopicSegmentBytes
	n.TransactionStateReplicationFactor = cfg.TransactionStateReplicationFactor
	n.TransactionStateSegmentBytes = cfg.TransactionStateSegmentBytes
	s, err := netpath.New(n, eng)
	if err != nil {
		return nil, err
	}
	return &wireServer{s: s}, nil
}

func (w *wireServer) Listen(addr string) (net.Addr, error) { return w.s.Listen(addr) }
func (w *wireServer) ListenTLS(addr string, c *tls.Config) (net.Addr, error) {
	return w.s.ListenTLS(addr, c)
}
func (w *wireServer) EnableReplication(c replication.Config) error { return w.s.EnableReplication(c) }
func (w *wireServer) Endpoints() []metadata.Endpoint               { return w.s.Endpoints() }
func (w *wireServer) Start(node *coordinator.Node) error           { return w.s.Start(node) }
func (w *wireServer) Drain(ctx context.Context, quiet time.Duration) {
	w.s.Drain(ctx, quiet)
}
func (w *wireServer) Close() error                    { return w.s.Close() }
func (w *wireServer) FetchPaths() map[string]string   { return w.s.FetchPaths() }
func (w *wireServer) Stats() netpath.Stats            { return w.s.Stats() }
func (w *wireServer) Collector() prometheus.Collector { return w.s.Collector() }
