package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// fixture is a real engine partition whose sealed segments the test
// uploads itself (the engine's actual files as objects) and commits to a
// metadata image, read back with a Reader over a real chunk cache.
type fixture struct {
	t      *testing.T
	eng    *engine.Engine
	part   *engine.Partition
	base   objstore.Store   // where the test puts objects
	store  *objstore.Faulty // base with faults: what the reader reads
	cache  *chunkcache.Cache
	img    atomic.Pointer[metadata.Image]
	tid    metadata.UUID
	reader *Reader
	segs   []rlm.Segment // uploaded, in order
	nextID byte
}

func newFixture(t *testing.T, chunkBytes int64, topicConfigs map[string]string) *fixture {
	t.Helper()
	return newFixtureOn(t, chunkBytes, topicConfigs, objstore.NewMemory())
}

// newFixtureOn is newFixture over the object store base.
func newFixtureOn(t *testing.T, chunkBytes int64, topicConfigs map[string]string, base objstore.Store) *fixture {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.RetentionCheckInterval = time.Hour
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.JournalBytes = 256 << 10
	eng, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	kv := map[string]string{"segment.bytes": "4096", "index.interval.bytes": "512", "remote.storage.enable": "true"}
	for k, v := range topicConfigs {
		kv[k] = v
	}
	if _, err := eng.CreateTopic("t", 1, kv); err != nil {
		t.Fatal(err)
	}
	part, err := eng.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := part.AssignLeaderEpoch(0); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, eng: eng, part: part, base: base, tid: metadata.NewUUID()}
	f.store = objstore.NewFaulty(base)
	f.openCache(chunkBytes)
	img := metadata.EmptyImage()
	img = f.apply(img, metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c"}})
	res := metadata.Command{RegisterBroker: &metadata.RegisterBroker{ClusterID: "c", ID: 1, Incarnation: metadata.NewUUID(),
		Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}}
	img, r := img.Apply(img.Index()+1, res)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	img = f.apply(img, metadata.Command{UnfenceBroker: &metadata.UnfenceBroker{ID: 1, Epoch: r.Broker.Epoch}})
	img = f.apply(img, metadata.Command{CreateTopic: &metadata.CreateTopic{Name: "t", ID: f.tid, Assignment: [][]int32{{1}}}})
	f.img.Store(img)
	f.reader = NewReader(f.img.Load, f.cache, f.store)
	return f
}

// openCache (re)opens the chunk cache on a fresh directory: cold.
func (f *fixture) openCache(chunkBytes int64) {
	f.t.Helper()
	if f.cache != nil {
		f.cache.Close()
	}
	cc := chunkcache.DefaultConfig(f.t.TempDir())
	cc.ChunkBytes, cc.MaxBytes = chunkBytes, 64*chunkBytes
	c, err := chunkcache.Open(cc, f.store.GetRange)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	f.cache = c
	if f.reader != nil {
		f.reader = NewReader(f.img.Load, f.cache, f.store)
	}
}

func (f *fixture) apply(img *metadata.Image, c metadata.Command) *metadata.Image {
	f.t.Helper()
	next, res := img.Apply(img.Index()+1, c)
	if res.Err != nil {
		f.t.Fatalf("apply %+v: %v", c, res.Err)
	}
	return next
}

func (f *fixture) append(b []byte) engine.AppendResult {
	f.t.Helper()
	w, err := f.part.Append(b)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := w.Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// upload copies every uploadable segment after the last uploaded one to
// the store and commits it; it returns the remote end.
func (f *fixture) upload() int64 {
	f.t.Helper()
	after := int64(-1)
	if n := len(f.segs); n > 0 {
		after = f.segs[n-1].NextOffset
	}
	infos := f.part.UploadableSegments(after)
	defer func() {
		for i := range infos {
			infos[i].Release()
		}
	}()
	ctx := context.Background()
	for i := range infos {
		si := &infos[i]
		f.nextID++
		seg := rlm.Segment{ID: rlm.SegmentID{f.nextID, 0xee}, TopicID: f.tid, Partition: 0, BaseOffset: si.BaseOffset,
			NextOffset: si.NextOffset, MaxTimestamp: si.MaxTimestamp, SizeBytes: si.Size, LeaderEpoch: 0,
			Epochs: []epochcache.Entry{{Epoch: 0, StartOffset: si.BaseOffset}}}
		log, err := io.ReadAll(si.Log())
		if err != nil {
			f.t.Fatal(err)
		}
		ib, tb, err := si.Indexes()
		if err != nil {
			f.t.Fatal(err)
		}
		snap, err := si.ProducerSnapshot()
		if err != nil {
			f.t.Fatal(err)
		}
		for kind, b := range map[string][]byte{"log": log, "index": ib, "timeindex": tb, "producers": snap, "epochs": rlm.EncodeEpochs(seg.Epochs)} {
			if err := f.base.Put(ctx, rlm.ObjectKey(&seg, kind), bytes.NewReader(b), int64(len(b))); err != nil {
				f.t.Fatal(err)
			}
		}
		f.img.Store(f.apply(f.img.Load(), metadata.Command{CommitRemoteSegment: &metadata.CommitRemoteSegment{Segment: seg}}))
		f.segs = append(f.segs, seg)
	}
	if len(f.segs) == 0 {
		f.t.Fatal("nothing uploaded")
	}
	return f.segs[len(f.segs)-1].NextOffset
}

// expire raises the remote log start to start (remote retention).
func (f *fixture) expire(start int64) {
	f.t.Helper()
	f.img.Store(f.apply(f.img.Load(), metadata.Command{DeleteRemoteSegments: &metadata.DeleteRemoteSegments{TopicID: f.tid, LeaderEpoch: 0, LogStartOffset: start}}))
}

func (f *fixture) read(offset int64, maxBytes int32, minOne bool) ([]byte, error) {
	f.t.Helper()
	res, _, err := f.reader.Read(context.Background(), f.tid, 0, offset, maxBytes, minOne, false)
	if err != nil {
		return nil, err
	}
	return rangeBytes(f.t, res.Data), nil
}

func rangeBytes(t *testing.T, r engine.FileRange) []byte {
	t.Helper()
	defer r.Release()
	b := make([]byte, r.Len())
	if _, err := r.ReadAt(b, r.Pos()); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) segOf(offset int64) rlm.Segment {
	f.t.Helper()
	s, ok := f.img.Load().SegmentFor(f.tid, 0, offset)
	if !ok {
		f.t.Fatalf("no segment for %d", offset)
	}
	return s
}

func objectKey(s *rlm.Segment, kind string) string { return rlm.ObjectKey(s, kind) }
func bytesReader(s string) io.Reader               { return bytes.NewReader([]byte(s)) }
func isStorage(err error) bool                     { return errors.Is(err, ErrStorage) }
func contains(s, sub string) bool                  { return strings.Contains(s, sub) }
