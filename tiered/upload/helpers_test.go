package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/tiered/objstore"
)

const topic = "t"

// cluster is the controller's state machine without raft: the REAL
// metadata image, every command encoded and decoded as in the log and
// validated by Image.Apply as in production. Hooks run after each
// command with the new image (the broker's Reconcile).
type cluster struct {
	t     *testing.T
	mu    sync.Mutex
	img   *metadata.Image
	tid   metadata.UUID
	epoch map[int32]uint64 // broker epochs
	hooks []func(*metadata.Image)
}

// newCluster registers brokers 1 and 2 and creates topic "t" with one
// partition on replicas 1, 2 (broker 1 leads at epoch 0).
func newCluster(t *testing.T, configs map[string]string) *cluster {
	c := &cluster{t: t, img: metadata.EmptyImage(), epoch: map[int32]uint64{}}
	c.must(metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c1"}})
	for _, id := range []int32{1, 2} {
		res := c.must(metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c1", ID: id, Incarnation: metadata.NewUUID(),
			Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092 + id}}}})
		c.epoch[id] = res.Broker.Epoch
		c.must(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: id, Epoch: res.Broker.Epoch}})
	}
	c.tid = metadata.NewUUID()
	c.must(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: topic, ID: c.tid, Configs: configs, Assignment: [][]int32{{1, 2}}}})
	return c
}

func (c *cluster) apply(cmd metadata.Command) metadata.Result {
	b, err := cmd.Encode()
	if err != nil {
		return metadata.Result{Err: err}
	}
	dc, err := metadata.DecodeCommand(b)
	if err != nil {
		return metadata.Result{Err: err}
	}
	c.mu.Lock()
	next, res := c.img.Apply(c.img.Index()+1, dc)
	c.img = next
	hooks := slices.Clone(c.hooks)
	c.mu.Unlock()
	for _, h := range hooks {
		h(next)
	}
	return res
}

func (c *cluster) must(cmd metadata.Command) metadata.Result {
	c.t.Helper()
	res := c.apply(cmd)
	if res.Err != nil {
		c.t.Fatalf("command refused: %v", res.Err)
	}
	return res
}

func (c *cluster) image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img
}

// follow has m reconcile every new image, as the broker does.
func (c *cluster) follow(m *Manager) {
	c.mu.Lock()
	c.hooks = append(c.hooks, m.Reconcile)
	img := c.img
	c.mu.Unlock()
	m.Reconcile(img)
}

// run has m follow the cluster and starts it.
func (c *cluster) run(m *Manager) {
	c.follow(m)
	m.Start()
}

// fence fences broker id, moving its leaderships (a new leader epoch).
func (c *cluster) fence(id int32) {
	c.t.Helper()
	c.must(metadata.Command{FenceBroker: &metadata.FenceBroker{ID: id, Epoch: c.epoch[id]}})
}

func (c *cluster) segments() []rlm.Segment { return c.image().RemoteSegments(c.tid, 0) }
func (c *cluster) remoteEnd() int64        { return c.image().RemoteEnd(c.tid, 0) }
func (c *cluster) remoteStart() int64      { return c.image().RemoteLogStart(c.tid, 0) }

// meta is one broker's view of the cluster (Meta), with switchable
// faults on its commits.
type meta struct {
	c          *cluster
	controller atomic.Int32
	// failCommits: the controller is unreachable.
	failCommits atomic.Bool
	// holdAt holds the commit call of that number (1-based; 0: none)
	// until release is closed, ignoring ctx: the request is already on
	// its way to the controller, as a deposed leader's late commit is.
	holdAt  atomic.Int64
	commits atomic.Int64
	held    chan rlm.Segment
	release chan struct{}
	heldErr chan error // the held commit's outcome
	// ops records the metadata calls ("expire@<start>", "remove:<id>").
	ops *opLog

	mu        sync.Mutex
	committed map[string]rlm.Segment // by id, every segment this view committed
}

// committedSegment returns a segment this view committed, by id.
func (v *meta) committedSegment(t *testing.T, id string) rlm.Segment {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.committed[id]
	if !ok {
		t.Fatalf("segment %s was never committed", id)
	}
	return s
}

func newMeta(c *cluster) *meta {
	return &meta{c: c, held: make(chan rlm.Segment, 1), release: make(chan struct{}), heldErr: make(chan error, 1), committed: map[string]rlm.Segment{}}
}

func (v *meta) MetadataImage() *metadata.Image { return v.c.image() }
func (v *meta) Controller() int32              { return v.controller.Load() }

func (v *meta) CommitRemoteSegment(ctx context.Context, seg rlm.Segment) error {
	if v.failCommits.Load() {
		return errors.New("controller unavailable (injected)")
	}
	hold := v.commits.Add(1) == v.holdAt.Load()
	if hold {
		v.held <- seg
		<-v.release
	}
	err := v.c.apply(metadata.Command{CommitRemoteSegment: &metadata.CommitRemoteSegment{Segment: seg}}).Err
	if hold {
		v.heldErr <- err
	}
	if err == nil {
		v.mu.Lock()
		v.committed[seg.ID.String()] = seg
		v.mu.Unlock()
	}
	return err
}

func (v *meta) DeleteRemoteSegments(ctx context.Context, topicID metadata.UUID, partition, leaderEpoch int32, ids []rlm.SegmentID, logStart int64) error {
	err := v.c.apply(metadata.Command{DeleteRemoteSegments: &metadata.DeleteRemoteSegments{
		TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch, IDs: ids, LogStartOffset: logStart}}).Err
	if v.ops != nil && err == nil {
		if len(ids) == 0 {
			v.ops.add(fmt.Sprintf("expire@%d", logStart))
		}
		for _, id := range ids {
			v.ops.add("remove:" + id.String())
		}
	}
	return err
}

func (v *meta) RemoteTopicPurged(ctx context.Context, id metadata.UUID) error {
	return v.c.apply(metadata.Command{RemoteTopicPurged: &metadata.RemoteTopicPurged{TopicID: id}}).Err
}

// opLog is an ordered record of calls from several goroutines.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) add(s string) {
	l.mu.Lock()
	l.ops = append(l.ops, s)
	l.mu.Unlock()
}

func (l *opLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

func (l *opLog) index(s string) int { return slices.Index(l.list(), s) }

// hookStore calls onPut before each Put and records deletions.
type hookStore struct {
	objstore.Store
	onPut func(key string)
	ops   *opLog
}

func (h *hookStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if h.onPut != nil {
		h.onPut(key)
	}
	return h.Store.Put(ctx, key, r, size)
}

func (h *hookStore) Delete(ctx context.Context, key string) error {
	err := h.Store.Delete(ctx, key)
	if err == nil && h.ops != nil {
		h.ops.add("delete:" + key)
	}
	return err
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.IOMode = "sync"
	cfg.RetentionCheckInterval = time.Hour // tests call RunRetention
	cfg.Logger = quiet()
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// topicConfigs are remote-storage configs with 500-byte segments.
func topicConfigs(extra map[string]string) map[string]string {
	kv := map[string]string{"remote.storage.enable": "true", "segment.bytes": "500"}
	for k, v := range extra {
		kv[k] = v
	}
	return kv
}

// host creates the cluster's topic in eng as the broker's reconcile does
// and returns its partition.
func host(t *testing.T, eng *engine.Engine, c *cluster, configs map[string]string) *engine.Partition {
	t.Helper()
	if err := eng.SyncTopic(engine.TopicSpec{Name: topic, ID: c.tid, Partitions: 1, Hosted: []int32{0}, Configs: configs}); err != nil {
		t.Fatal(err)
	}
	p, err := eng.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setup creates topic "t" with topicConfigs(extra) in a new cluster and
// hosts it in a new engine.
func setup(t *testing.T, extra map[string]string) (*cluster, *engine.Engine, *engine.Partition) {
	t.Helper()
	cfgs := topicConfigs(extra)
	c := newCluster(t, cfgs)
	eng := openEngine(t)
	return c, eng, host(t, eng, c, cfgs)
}

// produce appends n one-record batches with timestamp ts (0: now).
func produce(t *testing.T, p *engine.Partition, n int, ts int64) {
	t.Helper()
	for i := range n {
		if ts == 0 {
			ts = time.Now().UnixMilli()
		}
		b := batchtest.Encode(batchtest.Options{}, batchtest.Record{Value: fmt.Appendf(nil, "value-%06d-%s", i, strings.Repeat("x", 40)), Timestamp: ts})
		w, err := p.Append(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
	}
}

// sealedEnd is the NextOffset of the last uploadable segment (-1: none).
func sealedEnd(p *engine.Partition) (end int64, n int) {
	infos := p.UploadableSegments(-1)
	defer func() {
		for i := range infos {
			infos[i].Release()
		}
	}()
	if len(infos) == 0 {
		return -1, 0
	}
	return infos[len(infos)-1].NextOffset, len(infos)
}

func testConfig(id int32) Config {
	return Config{BrokerID: id, Interval: 20 * time.Millisecond, Concurrency: 2, MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, OpTimeout: 5 * time.Second, Logger: quiet()}
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

// keys lists the store's keys under prefix.
func keys(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	objs, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// checkContiguous checks the committed segments tile [from, to) exactly
// once and each has its five objects, the log object the segment's size.
func checkContiguous(t *testing.T, c *cluster, s objstore.Store, from, to int64) {
	t.Helper()
	segs := c.segments()
	next := from
	for _, seg := range segs {
		if seg.BaseOffset != next {
			t.Fatalf("segment [%d, %d) where %d was expected; segments %v", seg.BaseOffset, seg.NextOffset, next, ranges(segs))
		}
		next = seg.NextOffset
		for _, kind := range objectKinds {
			info, err := s.Stat(context.Background(), rlm.ObjectKey(&seg, kind))
			if err != nil {
				t.Fatalf("segment [%d, %d) %s: %v", seg.BaseOffset, seg.NextOffset, kind, err)
			}
			if kind == "log" && info.Size != seg.SizeBytes {
				t.Fatalf("segment [%d, %d) log object %d bytes, segment %d", seg.BaseOffset, seg.NextOffset, info.Size, seg.SizeBytes)
			}
		}
	}
	if next != to {
		t.Fatalf("segments end at %d, want %d: %v", next, to, ranges(segs))
	}
	if n := len(keys(t, s, "")); n != len(objectKinds)*len(segs) {
		t.Fatalf("store holds %d objects for %d segments: %v", n, len(segs), keys(t, s, ""))
	}
}

func ranges(segs []rlm.Segment) string {
	var b strings.Builder
	for _, s := range segs {
		fmt.Fprintf(&b, "[%d,%d)@%d ", s.BaseOffset, s.NextOffset, s.LeaderEpoch)
	}
	return b.String()
}
