package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
)

// A non-voter broker is refused while running; once stopped (fenced) it
// is unregistered and leaves the raft configuration.
func TestUnregisterNonvoter(t *testing.T) {
	mn, nodes := memCluster(t, 3, nil)
	nv := startNode(t, testConfig(t, 5, mn, nodes[0].cfg.Voters))
	waitReady(t, nv)
	if err := nodes[1].UnregisterBroker(ctxT(t), 5); !errors.Is(err, metadata.ErrBrokerRunning) {
		t.Fatalf("unregister running broker: %v", err)
	}
	if err := nodes[1].UnregisterBroker(ctxT(t), 9); !errors.Is(err, metadata.ErrUnknownBroker) {
		t.Fatalf("unregister unknown broker: %v", err)
	}
	nv.Close()
	checkFor(t, 10*time.Second, func() error {
		if b, _ := nodes[0].MetadataImage().Broker(5); !b.Fenced {
			return errors.New("broker 5 not fenced yet")
		}
		return nil
	})
	// A heartbeat the node sent just before closing may unfence it once
	// more, until its session expires: retry while it reads as running.
	checkFor(t, 10*time.Second, func() error {
		err := nodes[2].UnregisterBroker(ctxT(t), 5)
		if err != nil && !errors.Is(err, metadata.ErrBrokerRunning) {
			t.Fatal(err)
		}
		return err
	})
	checkFor(t, 5*time.Second, func() error {
		for _, n := range nodes {
			if _, ok := n.MetadataImage().Broker(5); ok {
				return fmt.Errorf("node %d still lists broker 5", n.NodeID())
			}
		}
		return nil
	})
	checkFor(t, 5*time.Second, func() error {
		members, err := leaderOf(t, nodes).Members()
		if err != nil {
			return err
		}
		if slices.ContainsFunc(members, func(s string) bool { return strings.HasPrefix(s, "5@") }) {
			return fmt.Errorf("members %v still hold 5", members)
		}
		return nil
	})
}
