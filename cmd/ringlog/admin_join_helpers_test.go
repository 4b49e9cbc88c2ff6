package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Growing a running cluster in tests: addBroker starts one more broker
// that joins c's quorum as a raft non-voter (what an operator does with
// `ringlog serve --controller-voters <quorum> --controller-listen ...`),
// waitLiveBrokers checks every running node's view of the live brokers.
// The scale-out scenario (add a broker under load, rebalance, decommission
// another) builds on these with failoverLoad and checkNoLoss.

// addBroker starts broker id, the next node id of c (len(c.nodes)+1), on
// fresh loopback ports over a fresh data directory, as a broker that is
// not a controller voter. extra flags go after the common ones. It returns
// once the broker is ready and every running node of c lists it as a live
// (registered, unfenced) broker in Metadata and DescribeCluster.
func addBroker(t *testing.T, c *testCluster, id int32, extra ...string) *brokerProc {
	t.Helper()
	if want := int32(len(c.nodes) + 1); id != want {
		t.Fatalf("addBroker: node id %d, the cluster's next is %d (nodes[i] is node i+1)", id, want)
	}
	b := c.newNode(id, freshNodeSpecs(t, 1)[0], extra)
	c.nodes = append(c.nodes, b)
	b.launch()
	t.Cleanup(func() { b.stop() })
	b.waitReady(60 * time.Second)
	var want []int32
	for i, n := range c.nodes {
		if n.running() {
			want = append(want, int32(i+1))
		}
	}
	waitLiveBrokers(t, c, want, 30*time.Second)
	return b
}

// running reports whether the process was launched and has not exited.
func (b *brokerProc) running() bool {
	if b.exited == nil {
		return false
	}
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// liveBrokers asks node b itself (not any broker a client picks) which
// brokers are live: the brokers of its Metadata answer and of its
// DescribeCluster answer, each sorted.
func liveBrokers(ctx context.Context, b *brokerProc) (meta, described []int32, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	seed := cl.SeedBrokers()[0]
	mr, err := seed.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, nil, err
	}
	for _, br := range mr.(*kmsg.MetadataResponse).Brokers {
		meta = append(meta, br.NodeID)
	}
	dr, err := seed.Request(ctx, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		return nil, nil, err
	}
	dc := dr.(*kmsg.DescribeClusterResponse)
	if dc.ErrorCode != 0 {
		return nil, nil, fmt.Errorf("DescribeCluster error %d", dc.ErrorCode)
	}
	for _, br := range dc.Brokers {
		described = append(described, br.NodeID)
	}
	slices.Sort(meta)
	slices.Sort(described)
	return meta, described, nil
}

// waitLiveBrokers waits until every running node of c lists exactly want
// (sorted) as its live brokers, in Metadata and in DescribeCluster.
func waitLiveBrokers(t *testing.T, c *testCluster, want []int32, limit time.Duration) {
	t.Helper()
	eventually(t, limit, fmt.Sprintf("every running node lists brokers %v", want), func() (bool, string) {
		for i, b := range c.nodes {
			if !b.running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			meta, described, err := liveBrokers(ctx, b)
			cancel()
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i+1, err)
			}
			if !slices.Equal(meta, want) || !slices.Equal(described, want) {
				return false, fmt.Sprintf("node %d: Metadata %v, DescribeCluster %v", i+1, meta, described)
			}
		}
		return true, ""
	})
}
