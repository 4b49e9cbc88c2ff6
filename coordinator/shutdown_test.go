package coordinator

import (
	"errors"
	"testing"
	"time"
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
	// Several heartbeat intervals of the same epoch: still fenced.
	deadline := time.Now().Add(5 * victim.cfg.HeartbeatInterval)
	for time.Now().Before(deadline) {
		if b, _ := ctl.MetadataImage().Broker(victim.cfg.NodeID); !b.Fenced {
			t.Fatal("a heartbeat of the shut-down epoch unfenced the broker")
		}
		time.Sleep(victim.cfg.HeartbeatInterval / 4)
	}
}
