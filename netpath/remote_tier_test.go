package netpath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/remote"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tierRange is a FileRange over bytes in memory that records its release (Fd -1: the copy path).
type tierRange struct {
	b        []byte
	released bool
}

func (m *tierRange) Fd() int    { return -1 }
func (m *tierRange) Pos() int64 { return 0 }
func (m *tierRange) Len() int32 { return int32(len(m.b)) }
func (m *tierRange) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	return copy(p, m.b[off:]), nil
}
func (m *tierRange) Release() { m.released = true }

type remoteCall struct {
	topicID           [16]byte
	partition         int32
	offset            int64
	maxBytes          int32
	minOne, committed bool
	hasDeadline       bool
}

// fakeRemote is a RemoteTier answering from fields.
type fakeRemote struct {
	mu      sync.Mutex
	calls   []remoteCall
	data    []byte
	aborted []producerstate.AbortedTxn
	err     error
	block   bool // wait for ctx
	ranges  []*tierRange

	tsOffset, tsAt int64
	tsFound        bool
	tsErr          error
}

func (f *fakeRemote) Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int32, minOne, committed bool) (engine.ReadResult, []producerstate.AbortedTxn, error) {
	f.mu.Lock()
	_, dl := ctx.Deadline()
	f.calls = append(f.calls, remoteCall{topicID, partition, offset, maxBytes, minOne, committed, dl})
	block, err := f.block, f.err
	f.mu.Unlock()
	res := engine.ReadResult{Data: &tierRange{}, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
	if block {
		<-ctx.Done()
		return res, nil, fmt.Errorf("%w: %w", remote.ErrStorage, ctx.Err())
	}
	if err != nil {
		return res, nil, err
	}
	r := &tierRange{b: f.data}
	f.mu.Lock()
	f.ranges = append(f.ranges, r)
	f.mu.Unlock()
	res.Data = r
	return res, f.aborted, nil
}

func (f *fakeRemote) OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (int64, int64, bool, error) {
	return f.tsOffset, f.tsAt, f.tsFound, f.tsErr
}

// tieredServer is a one-node server with topic "tt" (remote storage on,
// small segments) whose sealed segments are committed to the remote-log
// metadata and deleted locally: the local log starts above 0, the whole
// log at 0. It returns the first segment's bytes; the segments' objects
// are in tieredStore(srv).
func tieredServer(t *testing.T) (*Server, *engine.Partition, *controller.Node, []byte) {
	t.Helper()
	srv, eng := clusterServer(t, nil, 1, "plain")
	node := srv.node.(*controller.Node)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := node.CreateTopic(ctx, controller.CreateTopicRequest{Name: "tt", Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.bytes": "1", "retention.bytes": "-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.cluster.Reconcile(); err != nil {
		t.Fatal(err)
	}
	part, err := eng.Partition("tt", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		w, err := part.Append(batchtest.Values(fmt.Sprintf("value-%03d-%s", i, string(make([]byte, 50)))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Result(); err != nil {
			t.Fatal(err)
		}
	}
	img := node.MetadataImage()
	tp, _ := img.Topic("tt")
	pinfo, _ := img.Partition("tt", 0)
	infos := part.UploadableSegments(-1)
	if len(infos) < 3 {
		t.Fatalf("%d uploadable segments", len(infos))
	}
	first := make([]byte, infos[0].Size)
	if _, err := infos[0].Log().ReadAt(first, 0); err != nil {
		t.Fatal(err)
	}
	store := objstore.NewMemory()
	tieredStores.Store(srv, store)
	for i, si := range infos {
		seg := rlm.Segment{ID: rlm.SegmentID{byte(i + 1)}, TopicID: tp.ID, Partition: 0, BaseOffset: si.BaseOffset, NextOffset: si.NextOffset,
			MaxTimestamp: si.MaxTimestamp, SizeBytes: si.Size, LeaderEpoch: pinfo.LeaderEpoch,
			Epochs: []epochcache.Entry{{Epoch: pinfo.LeaderEpoch, StartOffset: si.BaseOffset}}}
		if err := uploadObjects(ctx, store, &seg, &si); err != nil {
			t.Fatal(err)
		}
		if err := node.CommitRemoteSegment(ctx, seg); err != nil {
			t.Fatal(err)
		}
		si.Release()
	}
	if err := node.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	img = node.MetadataImage()
	if err := part.SetRemoteState(engine.RemoteState{Enabled: true, LogStart: img.RemoteLogStart(tp.ID, 0), UploadedNext: img.RemoteEnd(tp.ID, 0)}); err != nil {
		t.Fatal(err)
	}
	eng.RunRetention()
	if part.LocalLogStartOffset() == 0 || part.Info().LogStartOffset != 0 {
		t.Fatalf("local start %d, log start %d: want the local log to start above the whole log", part.LocalLogStartOffset(), part.Info().LogStartOffset)
	}
	return srv, part, node, first
}

var tieredStores sync.Map // *Server -> *objstore.Memory

// uploadObjects stores a segment's objects as the uploader does.
func uploadObjects(ctx context.Context, store objstore.Store, seg *rlm.Segment, si *engine.SegmentInfo) error {
	log, err := io.ReadAll(si.Log())
	if err != nil {
		return err
	}
	ib, tb, err := si.Indexes()
	if err != nil {
		return err
	}
	snap, err := si.ProducerSnapshot()
	if err != nil {
		return err
	}
	for kind, b := range map[string][]byte{"log": log, "index": ib, "timeindex": tb, "producers": snap} {
		if err := store.Put(ctx, rlm.ObjectKey(seg, kind), bytes.NewReader(b), int64(len(b))); err != nil {
			return err
		}
	}
	return nil
}

// useRemoteReader gives srv a real remote reader over tieredServer's
// store, through a chunk cache of 700-byte chunks (batches straddle
// them).
func useRemoteReader(t *testing.T, srv *Server, node *controller.Node) *chunkcache.Cache {
	t.Helper()
	v, _ := tieredStores.Load(srv)
	store := v.(*objstore.Memory)
	cc := chunkcache.DefaultConfig(t.TempDir())
	cc.ChunkBytes = 700
	cache, err := chunkcache.Open(cc, store.GetRange)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	srv.remote = remote.NewReader(node.MetadataImage, cache, store)
	return cache
}

// The real reader behind the fetch path: every offset below the local
// start reads back through the chunk cache exactly what the engine
// wrote, batch after batch, with read_committed too.
func TestFetchFromRemoteTier(t *testing.T) {
	t.Parallel()
	srv, part, node, _ := tieredServer(t)
	cache := useRemoteReader(t, srv, node)
	local := part.LocalLogStartOffset()
	for _, committed := range []bool{false, true} {
		var got []string
		for off := int64(0); off < local; {
			kr, _ := doFetch(t, srv, remoteFetch(off, committed, -1))
			p := onlyPartition(t, kr)
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				t.Fatalf("fetch at %d: code %d, %d bytes", off, p.ErrorCode, len(p.RecordBatches))
			}
			batches, err := batchtest.Decode(p.RecordBatches)
			if err != nil {
				t.Fatalf("fetch at %d: %v", off, err)
			}
			for _, b := range batches {
				for i, r := range b.Records {
					if o := b.BaseOffset + int64(i); o >= off {
						got = append(got, string(r.Value))
					}
				}
				off = b.BaseOffset + int64(len(b.Records))
			}
		}
		for i, v := range got {
			if want := fmt.Sprintf("value-%03d-%s", i, string(make([]byte, 50))); v != want {
				t.Fatalf("record %d: %q, want %q", i, v, want)
			}
		}
		if int64(len(got)) != local {
			t.Fatalf("read %d records below the local start %d", len(got), local)
		}
	}
	if cache.Stats().SpanCopies == 0 {
		t.Fatal("no batch crossed a chunk boundary")
	}
}

// A real client consumes the topic from the start over the plaintext
// listener: the remote tier's chunk ranges go out with sendfile, and the
// client sees every record in order across the tiers.
func TestConsumeAcrossTiers(t *testing.T) {
	t.Parallel()
	srv, part, node, _ := tieredServer(t)
	cache := useRemoteReader(t, srv, node)
	hw := part.Info().HighWatermark
	addr := srv.listeners[0].ln.Addr().String()
	for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("tt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(iso), kgo.FetchMaxPartitionBytes(2000))
		if err != nil {
			t.Fatal(err)
		}
		var next int64
		for next < hw && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			for _, fe := range fs.Errors() {
				if !errors.Is(fe.Err, context.DeadlineExceeded) {
					t.Fatalf("fetch error: %v", fe.Err)
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next || string(r.Value) != fmt.Sprintf("value-%03d-%s", next, string(make([]byte, 50))) {
					t.Fatalf("record at %d: offset %d value %q", next, r.Offset, r.Value)
				}
				next++
			})
		}
		cons.Close()
		cancel()
		if next != hw {
			t.Fatalf("consumed %d of %d records", next, hw)
		}
	}
	if st := cache.Stats(); st.Misses == 0 || st.SpanCopies == 0 {
		t.Fatalf("the remote tier was not read through the cache: %+v", st)
	}
}

func remoteFetch(offset int64, committed bool, replica int32) *kmsg.FetchRequest {
	req := sessionFetch("tt", 0, -1, map[int32]int64{0: offset})
	req.MaxWaitMillis = 100
	req.ReplicaID = replica
	if committed {
		req.IsolationLevel = 1
	}
	return req
}

func onlyPartition(t *testing.T, kr *kmsg.FetchResponse) kmsg.FetchResponseTopicPartition {
	t.Helper()
	if len(kr.Topics) != 1 || len(kr.Topics[0].Partitions) != 1 {
		t.Fatalf("response: %+v", kr)
	}
	return kr.Topics[0].Partitions[0]
}

// Fetches below the local log start: served by the remote tier for
// consumers (with the partition's offsets, aborted transactions of both
// tiers, errors mapped), KAFKA_STORAGE_ERROR without one, and
// OFFSET_MOVED_TO_TIERED_STORAGE for followers.
func TestFetchBelowLocalStart(t *testing.T) {
	t.Parallel()
	srv, part, node, first := tieredServer(t)
	tp, _ := node.MetadataImage().Topic("tt")
	info := part.Info()

	// No object store on this broker.
	kr, _ := doFetch(t, srv, remoteFetch(0, false, -1))
	if p := onlyPartition(t, kr); p.ErrorCode != kerr.KafkaStorageError.Code || p.HighWatermark != info.HighWatermark {
		t.Fatalf("without a remote tier: code %d hw %d", p.ErrorCode, p.HighWatermark)
	}

	fr := &fakeRemote{data: first}
	srv.remote = fr
	kr, _ = doFetch(t, srv, remoteFetch(3, false, -1))
	p := onlyPartition(t, kr)
	if p.ErrorCode != 0 || string(p.RecordBatches) != string(first) || p.HighWatermark != info.HighWatermark ||
		p.LastStableOffset != info.HighWatermark || p.LogStartOffset != 0 {
		t.Fatalf("remote fetch: code %d, %d bytes (want %d), hw %d lso %d start %d", p.ErrorCode, len(p.RecordBatches), len(first), p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
	}
	c := fr.calls[0]
	if c.topicID != tp.ID || c.partition != 0 || c.offset != 3 || !c.minOne || c.committed || c.maxBytes != 1<<20 || !c.hasDeadline {
		t.Fatalf("remote read call %+v", c)
	}
	if !fr.ranges[0].released {
		t.Fatal("remote range not released after the response")
	}

	// read_committed: the remote tier's aborted transactions go out
	// with the local log's, LSO from the partition.
	fr.aborted = []producerstate.AbortedTxn{{ProducerID: 7, FirstOffset: 1, LastOffset: 4}}
	kr, _ = doFetch(t, srv, remoteFetch(0, true, -1))
	p = onlyPartition(t, kr)
	if p.ErrorCode != 0 || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 1 ||
		p.LastStableOffset != part.LastStableOffset() || !fr.calls[len(fr.calls)-1].committed {
		t.Fatalf("read_committed remote fetch: %+v", p)
	}

	for _, tc := range []struct {
		err  error
		code int16
	}{
		{fmt.Errorf("%w: deleted", remote.ErrOffsetGone), kerr.OffsetOutOfRange.Code},
		{fmt.Errorf("%w: object x corrupt", remote.ErrStorage), kerr.KafkaStorageError.Code},
		{fmt.Errorf("%w: %w", remote.ErrStorage, context.DeadlineExceeded), kerr.KafkaStorageError.Code},
	} {
		fr.err = tc.err
		kr, _ = doFetch(t, srv, remoteFetch(0, false, -1))
		if p := onlyPartition(t, kr); p.ErrorCode != tc.code || p.LogStartOffset != 0 {
			t.Fatalf("%v: code %d start %d, want %d", tc.err, p.ErrorCode, p.LogStartOffset, tc.code)
		}
	}
	fr.err = nil

	// A remote read that runs out of time answers no records, no error.
	fr.block = true
	t0 := time.Now()
	kr, _ = doFetch(t, srv, remoteFetch(0, false, -1))
	if p := onlyPartition(t, kr); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || time.Since(t0) > remoteReadMinWait+5*time.Second {
		t.Fatalf("timed-out remote read: code %d, %d bytes after %v", p.ErrorCode, len(p.RecordBatches), time.Since(t0))
	}
	fr.block = false

	// Local reads are not routed to the remote tier.
	n := len(fr.calls)
	kr, _ = doFetch(t, srv, remoteFetch(part.LocalLogStartOffset(), false, -1))
	if p := onlyPartition(t, kr); p.ErrorCode != 0 || len(p.RecordBatches) == 0 || len(fr.calls) != n {
		t.Fatalf("local fetch: code %d, %d bytes, remote calls %d -> %d", p.ErrorCode, len(p.RecordBatches), n, len(fr.calls))
	}

	// A follower below the local start is told to restart from the
	// remote tier, not served from it.
	srv.mu.Lock()
	srv.repl = acceptReplicas{}
	srv.mu.Unlock()
	part.SetReplicated(true)
	kr, _ = doFetch(t, srv, remoteFetch(0, false, 2))
	if p := onlyPartition(t, kr); p.ErrorCode != kerr.OffsetMovedToTieredStorage.Code || p.LogStartOffset != 0 || len(fr.calls) != n {
		t.Fatalf("replica fetch below the local start: code %d start %d", p.ErrorCode, p.LogStartOffset)
	}
}

func listOffsets(version int16, topic string, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = version, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ListOffsets sees the whole log: -2 the remote start, -4 the local start
// (v8+), -5 the remote end (v9+), timestamps in the remote tier first.
func TestListOffsetsTiered(t *testing.T) {
	t.Parallel()
	srv, part, node, _ := tieredServer(t)
	img := node.MetadataImage()
	tp, _ := img.Topic("tt")
	remoteEnd := img.RemoteEnd(tp.ID, 0)
	pinfo, _ := img.Partition("tt", 0)
	ask := func(version int16, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		resp := roundTrip(t, srv, listOffsets(version, topic, ts)).(*kmsg.ListOffsetsResponse)
		return resp.Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		version int16
		topic   string
		ts      int64
		code    int16
		offset  int64
	}{
		{9, "tt", -2, 0, 0},
		{9, "tt", -4, 0, part.LocalLogStartOffset()},
		{8, "tt", -4, 0, part.LocalLogStartOffset()},
		{7, "tt", -4, kerr.UnsupportedVersion.Code, -1},
		{9, "tt", -5, 0, remoteEnd - 1},
		{8, "tt", -5, kerr.UnsupportedVersion.Code, -1},
		{9, "plain", -5, 0, -1},
		{9, "tt", -1, 0, part.Info().HighWatermark},
	} {
		p := ask(tc.version, tc.topic, tc.ts)
		if p.ErrorCode != tc.code || p.Offset != tc.offset {
			t.Fatalf("v%d %s ts %d: code %d offset %d, want %d %d", tc.version, tc.topic, tc.ts, p.ErrorCode, p.Offset, tc.code, tc.offset)
		}
		if tc.ts == -5 && tc.offset >= 0 && p.LeaderEpoch != pinfo.LeaderEpoch {
			t.Fatalf("-5: leader epoch %d, want %d", p.LeaderEpoch, pinfo.LeaderEpoch)
		}
	}

	// By timestamp: the remote tier's answer when it has one, the local
	// log's otherwise, its errors mapped.
	now := time.Now().UnixMilli()
	local := ask(9, "tt", now-time.Hour.Milliseconds())
	if local.ErrorCode != 0 || local.Offset != part.LocalLogStartOffset() {
		t.Fatalf("without a remote tier: %+v, want the first local offset %d", local, part.LocalLogStartOffset())
	}
	fr := &fakeRemote{tsOffset: 2, tsAt: 1234, tsFound: true}
	srv.remote = fr
	if p := ask(9, "tt", 1000); p.ErrorCode != 0 || p.Offset != 2 || p.Timestamp != 1234 {
		t.Fatalf("remote hit: %+v", p)
	}
	fr.tsFound = false
	if p := ask(9, "tt", now+time.Hour.Milliseconds()); p.ErrorCode != 0 || p.Offset != -1 {
		t.Fatalf("nothing anywhere: %+v", p)
	}
	if p := ask(9, "tt", now-time.Hour.Milliseconds()); p.ErrorCode != 0 || p.Offset != part.LocalLogStartOffset() {
		t.Fatalf("remote miss, local hit: %+v", p)
	}
	fr.tsErr = fmt.Errorf("%w: store down", remote.ErrStorage)
	if p := ask(9, "tt", 1000); p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("remote error: %+v", p)
	}
	// A topic without remote data never asks the remote tier.
	if p := ask(9, "plain", 1000); p.ErrorCode != 0 {
		t.Fatalf("plain topic: %+v", p)
	}
}

// The error mapping of the remote tier.
func TestRemoteErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{fmt.Errorf("x: %w", remote.ErrOffsetGone), kerr.OffsetOutOfRange.Code},
		{fmt.Errorf("x: %w", remote.ErrStorage), kerr.KafkaStorageError.Code},
		{fmt.Errorf("%w: %w", remote.ErrStorage, context.DeadlineExceeded), kerr.KafkaStorageError.Code},
		{&engine.OffsetRemoteError{Topic: "t", Offset: 1, LocalLogStart: 5}, kerr.KafkaStorageError.Code},
		{errors.New("other"), kerr.UnknownServerError.Code},
	} {
		if got := errorCode(tc.err); got != tc.code {
			t.Errorf("%v: %d, want %d", tc.err, got, tc.code)
		}
	}
}

// remoteEpochEnd answers from the remote segments' epochs when the epoch
// ended at or below the local log start.
func TestRemoteEpochEnd(t *testing.T) {
	img := testImage(t, false) // broker 1
	apply := func(c metadata.Command) metadata.Result { t.Helper(); return applyCmd(t, &img, c) }
	b1, _ := img.Broker(1)
	epochs := []uint64{b1.Epoch}
	for id := int32(2); id <= 3; id++ {
		reg := apply(metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c1", ID: id, Incarnation: metadata.UUID{byte(id)},
			Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092 + id}}}})
		apply(metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: id, Epoch: reg.Broker.Epoch}})
		epochs = append(epochs, reg.Broker.Epoch)
	}
	tid := metadata.UUID{0xe1}
	apply(metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "e", ID: tid, Assignment: [][]int32{{1, 2, 3}}}})
	commit := func(n byte, base, next int64, le int32, es ...epochcache.Entry) {
		apply(metadata.Command{CommitRemoteSegment: &metadata.CommitRemoteSegment{Segment: rlm.Segment{ID: rlm.SegmentID{n}, TopicID: tid,
			BaseOffset: base, NextOffset: next, SizeBytes: 1, LeaderEpoch: le, Epochs: es}}})
	}
	commit(1, 0, 100, 0, epochcache.Entry{Epoch: 0, StartOffset: 0})
	apply(metadata.Command{FenceBroker: &metadata.FenceBroker{ID: 1, Epoch: epochs[0]}}) // epoch 1
	commit(2, 100, 200, 1, epochcache.Entry{Epoch: 0, StartOffset: 100}, epochcache.Entry{Epoch: 1, StartOffset: 150})
	p, _ := img.Partition("e", 0)
	apply(metadata.Command{FenceBroker: &metadata.FenceBroker{ID: p.Leader, Epoch: epochs[p.Leader-1]}}) // epoch 2
	p, _ = img.Partition("e", 0)
	commit(3, 200, 300, p.LeaderEpoch, epochcache.Entry{Epoch: 1, StartOffset: 200}, epochcache.Entry{Epoch: p.LeaderEpoch, StartOffset: 250})

	for _, tc := range []struct {
		epoch      int32
		localStart int64
		ok         bool
		wantEpoch  int32
		wantEnd    int64
	}{
		{0, 300, true, 0, 150},
		{1, 300, true, 1, 250},
		{1, 260, true, 1, 250},
		{1, 240, false, 0, 0}, // ends above the local start: the local cache knows it
		{2, 300, false, 0, 0}, // the latest: no later epoch remotely
		{0, 100, false, 0, 0},
	} {
		e, end, ok := remoteEpochEnd(img, "e", 0, tc.epoch, tc.localStart)
		if ok != tc.ok || ok && (e != tc.wantEpoch || end != tc.wantEnd) {
			t.Errorf("epoch %d local start %d: %d %d %v, want %d %d %v", tc.epoch, tc.localStart, e, end, ok, tc.wantEpoch, tc.wantEnd, tc.ok)
		}
	}
	// Retention past the first segment: epoch 0 is still in force at the
	// new start.
	apply(metadata.Command{DeleteRemoteSegments: &metadata.DeleteRemoteSegments{TopicID: tid, LeaderEpoch: p.LeaderEpoch, LogStartOffset: 120}})
	if e, end, ok := remoteEpochEnd(img, "e", 0, 0, 300); !ok || e != 0 || end != 150 {
		t.Errorf("after remote retention: %d %d %v", e, end, ok)
	}
	if _, _, ok := remoteEpochEnd(img, "missing", 0, 0, 300); ok {
		t.Error("unknown topic answered")
	}
}

// applyCmd applies c to *img, which it replaces; a refusal fails t.
func applyCmd(t testing.TB, img **metadata.Image, c metadata.Command) metadata.Result {
	t.Helper()
	next, res := (*img).Apply((*img).Index()+1, c)
	if res.Err != nil {
		t.Fatalf("apply: %v", res.Err)
	}
	*img = next
	return res
}

// One pass's remote reads end at the fetch's deadline, within
// [remoteReadMinWait, remoteReadMaxWait] from the first.
func TestRemoteBudget(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct{ deadline, want time.Duration }{
		{10 * time.Second, 10 * time.Second},
		{-time.Second, remoteReadMinWait},
		{0, remoteReadMinWait},
		{time.Hour, remoteReadMaxWait},
	} {
		if got := remoteBudget(now, now.Add(tc.deadline)).Sub(now); got != tc.want {
			t.Errorf("deadline in %v: budget %v, want %v", tc.deadline, got, tc.want)
		}
	}
}

// The tiers' aborted lists merge in marker order, a transaction both
// list once.
func TestMergeAborted(t *testing.T) {
	a := []producerstate.AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 5}, {ProducerID: 2, FirstOffset: 3, LastOffset: 9}}
	b := []producerstate.AbortedTxn{{ProducerID: 2, FirstOffset: 3, LastOffset: 9}, {ProducerID: 3, FirstOffset: 8, LastOffset: 7}, {ProducerID: 1, FirstOffset: 10, LastOffset: 12}}
	got := mergeAborted(a, b)
	want := []producerstate.AbortedTxn{a[0], b[1], a[1], b[2]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
	if fmt.Sprint(a) != fmt.Sprint([]producerstate.AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 5}, {ProducerID: 2, FirstOffset: 3, LastOffset: 9}}) {
		t.Fatalf("the remote list was changed: %v", a)
	}
	if got := mergeAborted(a, nil); len(got) != 2 {
		t.Fatalf("nothing local: %v", got)
	}
}
