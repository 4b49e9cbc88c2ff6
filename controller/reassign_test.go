package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
)

// TestReassignThroughFollowerSurvivesFailover starts a reassignment
// through a node that is not the controller (each item's sentinel error
// comes back over the RPC), closes the controller, and finds the
// reassignment in progress under the new one, which can cancel it.
func TestReassignThroughFollowerSurvivesFailover(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	leader := leaderOf(t, nodes)
	via := otherThan(nodes, leader)
	if _, err := via.CreateTopic(ctxT(t), CreateTopicRequest{Name: "r", Assignment: [][]int32{{via.NodeID(), leader.NodeID()}, {via.NodeID(), leader.NodeID()}}}); err != nil {
		t.Fatal(err)
	}
	third := int32(6) - via.NodeID() - leader.NodeID()
	// No replication runs here, so the move stays pending.
	target := []int32{third, via.NodeID()}
	errs, err := via.AlterPartitionReassignments(ctxT(t), metadata.AlterPartitionReassignments{Items: []metadata.ReassignmentItem{
		{Topic: "r", Partition: 0, Replicas: target},
		{Topic: "r", Partition: 1, Cancel: true},
		{Topic: "nope", Partition: 0, Replicas: target},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], metadata.ErrNoReassignment) || !errors.Is(errs[2], metadata.ErrUnknownTopic) {
		t.Fatalf("item errors %v", errs)
	}
	wantReps := []int32{third, via.NodeID(), leader.NodeID()}
	pending := func(n *Node) error {
		p, _ := n.MetadataImage().Partition("r", 0)
		if !slices.Equal(p.Replicas, wantReps) || !slices.Equal(p.AddingReplicas, []int32{third}) || !slices.Equal(p.RemovingReplicas, []int32{leader.NodeID()}) {
			return fmt.Errorf("node %d: partition %+v", n.NodeID(), p)
		}
		return nil
	}
	if err := pending(via); err != nil {
		t.Fatal(err)
	}
	leader.Close()
	var rest []*Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	if nl := leaderOf(t, rest); nl == leader {
		t.Fatal("closed node still leads")
	}
	for _, n := range rest {
		if err := pending(n); err != nil {
			t.Fatalf("after failover: %v", err)
		}
	}
	errs, err = rest[0].AlterPartitionReassignments(ctxT(t), metadata.AlterPartitionReassignments{Items: []metadata.ReassignmentItem{{Topic: "r", Partition: 0, Cancel: true}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("cancel under the new controller: %v %v", err, errs)
	}
	checkFor(t, 5*time.Second, func() error {
		for _, n := range rest {
			if p, _ := n.MetadataImage().Partition("r", 0); p.Reassigning() || !slices.Equal(p.Replicas, []int32{via.NodeID(), leader.NodeID()}) {
				return fmt.Errorf("node %d after cancel: %+v", n.NodeID(), p)
			}
		}
		return nil
	})
}
