package broker

import (
	"context"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/replication"
)

// A partition this broker stops following (it leads now, or the replica
// moved away) must leave its fetcher: Follow keys it by topic id, so the
// unfollow has to name the same id, or the old fetcher keeps fetching it
// into a log it no longer owns.
func TestUnfollowLeavesFetcher(t *testing.T) {
	s, node, _ := startWire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic, err := node.CreateTopic(ctx, controller.CreateTopicRequest{Name: "uf", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reconcile(); err != nil {
		t.Fatal(err)
	}
	part, err := s.engine.Partition("uf", 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := replication.TopicPartition{Topic: "uf", TopicID: topic.ID, Partition: 0}
	sync := func(p metadata.Partition) {
		s.recMu.Lock()
		defer s.recMu.Unlock()
		s.repl.syncPartition(topic, 0, p, part, map[tpKey]bool{})
	}
	// Follow broker 2 (which does not exist: the fetcher only backs off).
	sync(metadata.Partition{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 5})
	if l, ok := s.repl.fetchers.Leader(tp); !ok || l != 2 {
		t.Fatalf("after following: fetchers have leader %d, %v; want 2", l, ok)
	}
	// Back to a single replica here: nothing to follow.
	sync(metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 6})
	if l, ok := s.repl.fetchers.Leader(tp); ok {
		t.Fatalf("after unfollow the fetcher still fetches from %d", l)
	}
	// Once more, dropped through forgetUnseen (the replica moved away).
	sync(metadata.Partition{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 7})
	s.repl.forgetUnseen(map[tpKey]bool{})
	if l, ok := s.repl.fetchers.Leader(tp); ok {
		t.Fatalf("after the replica left, the fetcher still fetches from %d", l)
	}
}
