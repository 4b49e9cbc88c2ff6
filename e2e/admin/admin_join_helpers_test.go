package admin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addBroker starts broker id, the next node id of c (len(c.nodes)+1), on
// fresh loopback ports over a fresh data directory, as a broker that is
// not a controller voter. extra flags go after the common ones. It returns
// once the broker is ready and every running node of c lists it as a live
// (registered, unfenced) broker in Metadata and DescribeCluster.
func addBroker(t *testing.T, c *harness.Cluster, id int32, extra ...string) *harness.BrokerProc {
	t.Helper()
	if want := int32(len(c.Nodes) + 1); id != want {
		t.Fatalf("addBroker: node id %d, the cluster's next is %d (nodes[i] is node i+1)", id, want)
	}
	b := c.NewNode(id, harness.FreshNodeSpecs(t, 1)[0], extra)
	c.Nodes = append(c.Nodes, b)
	b.Launch()
	t.Cleanup(func() { b.Stop() })
	b.WaitReady(60 * time.Second)
	var want []int32
	for i, n := range c.Nodes {
		if n.Running() {
			want = append(want, int32(i+1))
		}
	}
	waitLiveBrokers(t, c, want, 30*time.Second)
	return b
}

// liveBrokers asks node b itself (not any broker a client picks) which
// brokers are live: the brokers of its Metadata answer and of its
// DescribeCluster answer, each sorted.
func liveBrokers(ctx context.Context, b *harness.BrokerProc) (meta, described []int32, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
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
func waitLiveBrokers(t *testing.T, c *harness.Cluster, want []int32, limit time.Duration) {
	t.Helper()
	harness.Eventually(t, limit, fmt.Sprintf("every running node lists brokers %v", want), func() (bool, string) {
		for i, b := range c.Nodes {
			if !b.Running() {
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
