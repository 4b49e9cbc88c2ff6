package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
)

// unclean.leader.election.enable set as a dynamic cluster-wide broker
// config makes the controller elect an out-of-sync replica by itself,
// though the flag (Config.UncleanLeaderElection) is off.
func TestDynamicUncleanElection(t *testing.T) {
	_, nodes := memCluster(t, 2, nil)
	top, err := nodes[0].CreateTopic(ctxT(t), CreateTopicRequest{Name: "u", Assignment: [][]int32{{2, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	p := top.Partitions[0]
	if _, err := nodes[1].AlterPartition(ctxT(t), top.ID, 0, p.LeaderEpoch, p.PartitionEpoch, []int32{2}); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].AlterConfigs(ctxT(t), metadata.AlterConfigs{Kind: metadata.ConfigBroker, Set: map[string]string{uncleanKey: "true"}}); err != nil {
		t.Fatal(err)
	}
	if got := nodes[1].MetadataImage().BrokerConfigs("")[uncleanKey]; got != "true" {
		t.Fatalf("cluster default %q after AlterConfigs", got)
	}
	nodes[1].pauseHeartbeats.Store(true)
	checkFor(t, nodes[1].cfg.BrokerSessionTimeout+10*time.Second, func() error {
		if p, _ := nodes[0].MetadataImage().Partition("u", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
			return fmt.Errorf("%+v", p)
		}
		return nil
	})
}
