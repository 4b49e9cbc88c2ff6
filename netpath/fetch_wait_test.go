package netpath

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/brokertest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testCluster is a one-broker netpath.Cluster: the engine hosts every
// partition of every topic in the image (the broker package's reconcile,
// without replication or deletes).
type testCluster struct {
	eng  *engine.Engine
	node *controller.Node
}

func (c *testCluster) Reconcile() error {
	for _, t := range c.node.MetadataImage().Topics() {
		hosted := make([]int32, len(t.Partitions))
		for i := range hosted {
			hosted[i] = int32(i)
		}
		if err := c.eng.SyncTopic(engine.TopicSpec{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Hosted: hosted, Configs: t.Configs}); err != nil {
			return err
		}
	}
	return nil
}

func (c *testCluster) RollbackCreate(metadata.Topic, error) error { return nil }

func (c *testCluster) LookupTopic(img *metadata.Image, name string) (metadata.Topic, *metadata.Image, bool) {
	t, ok := img.Topic(name)
	return t, img, ok
}

// singleNodeServer starts a one-node cluster in process: engine (sync
// write path, no fsync), controller node on its in-memory raft, and the
// wire server over a one-broker Cluster, with topic created (one partition, RF=1).
// partitionsOf returns topic's first n partitions.
func partitionsOf(t *testing.T, eng *engine.Engine, topic string, n int) []*engine.Partition {
	t.Helper()
	ps := make([]*engine.Partition, n)
	for i := range ps {
		p, err := eng.Partition(topic, int32(i))
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	return ps
}

// appendOne appends one batch to p and waits for it.
func appendOne(t *testing.T, p *engine.Partition) {
	t.Helper()
	w, err := p.Append(batchtest.Values("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
}

func singleNodeServer(t *testing.T, topic string) (*Server, *engine.Partition) {
	t.Helper()
	srv, eng := clusterServer(t, nil, 1, topic)
	part, err := eng.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return srv, part
}

// clusterServer is singleNodeServer with topics of partitions partitions
// and the wire config adjusted by configure (when set); it returns the
// engine.
func clusterServer(t testing.TB, configure func(*Config), partitions int32, topics ...string) (*Server, *engine.Engine) {
	t.Helper()
	logger := brokertest.Logger()
	eng := brokertest.Engine(t, logger)
	ncfg := DefaultConfig()
	ncfg.NodeID = 1
	ncfg.Logger = logger
	if configure != nil {
		configure(&ncfg)
	}
	cl := &testCluster{eng: eng}
	srv, err := New(ncfg, Deps{Engine: eng, Cluster: cl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	node := brokertest.Node(t, srv.Endpoints(), logger)
	cl.node = node
	if err := srv.Start(node, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range topics {
		if _, err := node.CreateTopic(ctx, controller.CreateTopicRequest{Name: topic, Partitions: partitions, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Reconcile(); err != nil {
		t.Fatal(err)
	}
	return srv, eng
}

// A long-poll fetch at the log end must wake for an append that lands
// while it is being read (the change channel was taken after
// the read, so an advance in between was slept through until
// max_wait_ms). Each round starts a consumer fetch (min_bytes 1,
// max_wait_ms 1000) through the real fetch path and appends one batch at
// a random moment of its read; one round in 50 appends exactly after the
// partition was read (the afterFetchRead hook), the window a free-running
// race hits only rarely. A fetch that returns only at max_wait_ms waited
// past an append. None may. RINGLOG_FETCH_RACE_ROUNDS overrides the round
// count.
func TestFetchWakesForRacingAppend(t *testing.T) {
	rounds := 100_000
	switch {
	case testing.Short():
		rounds = 5_000
	case raceEnabled:
		rounds = 10_000
	}
	if v := os.Getenv("RINGLOG_FETCH_RACE_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RINGLOG_FETCH_RACE_ROUNDS=%q", v)
		}
		rounds = n
	}
	const maxWait = time.Second
	srv, part := singleNodeServer(t, "race")
	batch := batchtest.Values("v")
	rng := rand.New(rand.NewPCG(15, 15))
	done := make(chan struct{})
	type result struct {
		took  time.Duration
		bytes int64
	}
	results := make(chan result, 1)
	var inRead atomic.Bool
	appendNow, appended := make(chan struct{}), make(chan struct{})
	afterFetchRead = func() {
		if inRead.CompareAndSwap(true, false) {
			appendNow <- struct{}{}
			<-appended
		}
	}
	t.Cleanup(func() { afterFetchRead = nil })
	missed, empty := 0, 0
	start := time.Now()
	for i := range rounds {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes = 11, -1, 1, 1<<20
		req.MaxWaitMillis = int32(maxWait / time.Millisecond)
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "race"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, int64(i), -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		mid := rng.IntN(50) == 0
		inRead.Store(mid)
		go func() {
			t0 := time.Now()
			resp := srv.fetch(req, t0.Add(maxWait), done, nil, new(time.Duration))
			var n int64
			for _, p := range resp.parts {
				if p.file != nil {
					n += int64(p.file.Len())
				}
			}
			resp.releaseAll()
			results <- result{time.Since(t0), n}
		}()
		// Spread the append over the fetch's read: sometimes before it
		// starts, sometimes in the middle, sometimes once it waits.
		if mid {
			<-appendNow
		} else {
			for range rng.IntN(3000) {
				_ = rng.Uint64()
			}
		}
		w, err := part.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
		if mid {
			appended <- struct{}{}
		}
		r := <-results
		if r.took >= maxWait*9/10 {
			missed++
		}
		if r.bytes == 0 {
			empty++
		}
		if missed >= 3 {
			break // each costs max_wait_ms; three make the point
		}
	}
	t.Logf("%d racing fetches in %v: %d waited past an append, %d answered empty", rounds, time.Since(start).Round(time.Millisecond), missed, empty)
	if missed > 0 || empty > 0 {
		t.Fatalf("%d of %d long polls slept through an append (%d answered without it)", missed, rounds, empty)
	}
}

// Every parked request has a deadline from its arrival: timeout_ms <= 0
// means the default (produce) or no wait (fetch), absurd values are capped.
func TestRequestDeadline(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		ms     int32
		ifZero time.Duration
		want   time.Duration
	}{
		{10_000, defaultProduceWait, 10 * time.Second},
		{0, defaultProduceWait, defaultProduceWait},
		{-5, defaultProduceWait, defaultProduceWait},
		{0, 0, 0},
		{1<<31 - 1, 0, maxRequestWait},
		{1<<31 - 1, defaultProduceWait, maxRequestWait},
	} {
		if got := requestDeadline(now, c.ms, c.ifZero).Sub(now); got != c.want {
			t.Errorf("requestDeadline(%d ms, %v) waits %v, want %v", c.ms, c.ifZero, got, c.want)
		}
	}
}
