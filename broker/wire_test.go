package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/brokertest"
	"github.com/ringlog/ringlog/netpath/peer"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startWire runs a one-broker cluster in process: engine (sync write
// path), controller node on its own raft, and the wire server with
// replication enabled, listening on loopback.
func startWire(t *testing.T) (*wireServer, *controller.Node, string) {
	t.Helper()
	logger := brokertest.Logger()
	eng := brokertest.Engine(t, logger)
	wcfg := DefaultWireConfig()
	wcfg.Wire.NodeID = 1
	wcfg.Wire.Logger = logger
	s, err := newWireServer(wcfg, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.EnableReplication(replication.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := brokertest.Node(t, s.Endpoints(), logger)
	if err := s.Start(node); err != nil {
		t.Fatal(err)
	}
	return s, node, addr.String()
}

// The peer client against a real wire server: a replica fetch returns the
// produced records, a missing partition comes back as replication's
// error, and WriteTxnMarkers outcomes come back as the engine's producer
// state errors, which the marker writer tells apart without Kafka codes.
func TestPeerClientAgainstWireServer(t *testing.T) {
	s, node, addr := startWire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic, err := node.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	fetch := func(part int32) replication.FetchPartitionResponse {
		t.Helper()
		resp, err := s.peers.Fetch(ctx, 1, &replication.FetchRequest{
			ReplicaID: 2, MaxWait: 10 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20,
			Partitions: []replication.FetchPartition{{
				TopicPartition:     replication.TopicPartition{Topic: "t", TopicID: topic.ID, Partition: part},
				CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, MaxBytes: 1 << 20,
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Partitions) != 1 {
			t.Fatalf("fetch of partition %d: %d partitions back", part, len(resp.Partitions))
		}
		return resp.Partitions[0]
	}
	p := fetch(0)
	if p.Err != nil || p.HighWatermark != 3 || len(p.Records) == 0 {
		t.Fatalf("replica fetch: err %v, HW %d, %d record bytes; want nil, 3, some", p.Err, p.HighWatermark, len(p.Records))
	}
	if p := fetch(7); !errors.Is(p.Err, replication.ErrUnknownTopicOrPartition) {
		t.Fatalf("fetch of a missing partition: %v, want ErrUnknownTopicOrPartition", p.Err)
	}

	tp := peer.TopicPartition{Topic: "t", Partition: 0}
	mark := func(epoch int16, coordEpoch int32, tps ...peer.TopicPartition) map[peer.TopicPartition]error {
		t.Helper()
		mk := producerstate.Marker{ProducerID: 7, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: coordEpoch}
		errs, err := s.peers.WriteMarkers(ctx, 1, mk, tps)
		if err != nil {
			t.Fatal(err)
		}
		return errs
	}
	if err := mark(1, 5, tp)[tp]; err != nil {
		t.Fatalf("first marker: %v", err)
	}
	if err := mark(0, 5, tp)[tp]; !errors.Is(err, producerstate.ErrProducerFenced) {
		t.Fatalf("marker of an older producer epoch: %v, want ErrProducerFenced", err)
	}
	if err := mark(1, 3, tp)[tp]; !errors.Is(err, producerstate.ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: %v, want ErrTransactionCoordinatorFenced", err)
	}
	missing := peer.TopicPartition{Topic: "t", Partition: 9}
	if err := mark(1, 5, missing)[missing]; err == nil || errors.Is(err, producerstate.ErrProducerFenced) {
		t.Fatalf("marker for a missing partition: %v, want a retriable error", err)
	}
	// After Close (shutdown) a request still gets a fresh connection,
	// closed afterwards instead of pooled.
	s.peers.Close()
	if _, err := s.peers.WriteMarkers(ctx, 1, producerstate.Marker{ProducerID: 7, ProducerEpoch: 1, CoordinatorEpoch: 5}, []peer.TopicPartition{tp}); err != nil {
		t.Fatalf("after Close a request still dials: %v", err)
	}
}
