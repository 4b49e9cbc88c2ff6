package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/testwait"
)

// A heartbeat of a broker epoch that asked for a controlled shutdown
// (one sent just before the request, still in flight) must not unfence
// the broker again: it would be named live, and eligible to lead, for up
// to a session after its process exited. Here the broker keeps
// heartbeating after the shutdown request, the worst case of that race.
func TestControlledShutdownStaysFenced(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	ctl := leaderOf(t, nodes)
	victim := otherThan(nodes, ctl)
	victim.mu.Lock()
	epoch := victim.epoch
	victim.mu.Unlock()
	if _, _, err := ctl.handleControlledShutdown(ctxT(t), &shutdownReq{ID: victim.cfg.NodeID, Epoch: epoch}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		if b, _ := ctl.MetadataImage().Broker(victim.cfg.NodeID); !b.Fenced {
			return errors.New("not fenced yet")
		}
		return nil
	})
	// Several heartbeat intervals of the same epoch: still fenced. Five
	// intervals are five heartbeats the victim sends meanwhile.
	if !testwait.Holds(5*victim.cfg.HeartbeatInterval, func() bool {
		b, _ := ctl.MetadataImage().Broker(victim.cfg.NodeID)
		return b.Fenced
	}) {
		t.Fatal("a heartbeat of the shut-down epoch unfenced the broker")
	}
}

// A broker that ran its own controlled shutdown keeps answering from its
// image while it drains: the image that shows its fence shows where its
// leaderships went. A broker fenced by the controller on its own (a
// missed session) must not.
func TestControlledShutdownImageStaysFresh(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	ctl := leaderOf(t, nodes)
	victim := otherThan(nodes, ctl)
	checkFor(t, 10*time.Second, victim.Fresh)
	if err := victim.ControlledShutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if b, _ := victim.MetadataImage().Broker(victim.cfg.NodeID); !b.Fenced {
		t.Fatal("ControlledShutdown returned before this node's image showed the fence")
	}
	if err := victim.Fresh(); err != nil {
		t.Fatalf("after its own controlled shutdown: %v", err)
	}

	// The third node, fenced without asking: stale.
	other := nodes[0]
	for other == ctl || other == victim {
		other = nodes[slices.Index(nodes, other)+1]
	}
	other.mu.Lock()
	epoch := other.epoch
	other.mu.Unlock()
	other.pauseHeartbeats.Store(true)
	if _, _, err := ctl.handleControlledShutdown(ctxT(t), &shutdownReq{ID: other.cfg.NodeID, Epoch: epoch}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		if err := other.Fresh(); !errors.Is(err, metadata.ErrBrokerFenced) {
			return fmt.Errorf("fenced by the controller alone, Fresh = %v", err)
		}
		return nil
	})
}
