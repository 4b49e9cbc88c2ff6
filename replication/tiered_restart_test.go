package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/metadata/metadatatest"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/replication"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/remote"
)

// engineLog adapts an engine partition to replication.Log as the broker
// does (broker/replicas.go).
type engineLog struct{ *engine.Partition }

func (l engineLog) EndOffsetForEpoch(epoch int32) replication.EpochEndOffset {
	e, o := l.Partition.EndOffsetForEpoch(epoch)
	return replication.EpochEndOffset{Epoch: e, EndOffset: o}
}

func (l engineLog) Position() replication.LogPosition {
	end, durable, start := l.Partition.Ends()
	return replication.LogPosition{LogEnd: end, DurableEnd: durable, LogStart: start}
}

func (l engineLog) AppendReplicated(b []byte) (replication.Pending, error) {
	return l.Partition.AppendReplicated(b)
}

func fileBytes(t *testing.T, r engine.FileRange) []byte {
	t.Helper()
	defer r.Release()
	b := make([]byte, r.Len())
	if _, err := r.ReadAt(b, r.Pos()); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// leaderClient serves replica fetches from a leader partition whose local
// log starts at localStart (retention deleted what the remote tier
// holds): below it OFFSET_MOVED_TO_TIERED_STORAGE, as netpath answers.
type leaderClient struct {
	t          *testing.T
	lead       *engine.Partition
	localStart int64
}

func (c *leaderClient) Fetch(ctx context.Context, _ int32, req *replication.FetchRequest) (*replication.FetchResponse, error) {
	out := &replication.FetchResponse{}
	data := false
	for _, p := range req.Partitions {
		r := replication.FetchPartitionResponse{TopicPartition: p.TopicPartition, HighWatermark: c.lead.HighWatermark(), LogStartOffset: 0}
		if p.FetchOffset < c.localStart {
			r.Err = replication.ErrOffsetMovedToTieredStorage
		} else {
			res, err := c.lead.ReadReplica(p.FetchOffset, p.MaxBytes)
			if err != nil {
				return nil, err
			}
			r.Records = fileBytes(c.t, res.Data)
			data = data || len(r.Records) > 0
		}
		out.Partitions = append(out.Partitions, r)
	}
	if !data {
		// A long poll with nothing new: bounded, like MaxWait.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return out, nil
}

// TestFetcherRestartsEngineLogFromRemoteTier runs the whole follower path
// on real parts: a leader engine partition whose sealed segments the
// remote tier holds (objects as the uploader writes them, metadata
// committed in an image), a fresh follower partition, a Fetcher whose
// RemoteRestart is remote.Reader.RestartPoint. The follower restarts at
// the remote end, copies the rest, and ends with the leader's bytes,
// producer state and epochs from the restart point on.
func TestFetcherRestartsEngineLogFromRemoteTier(t *testing.T) {
	ecfg := engine.DefaultConfig()
	ecfg.Dir = t.TempDir()
	ecfg.IOMode = "sync"
	ecfg.JournalBytes = 256 << 10
	ecfg.RetentionCheckInterval = time.Hour
	ecfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.Open(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, n := range []string{"lead", "foll"} {
		if _, err := e.CreateTopic(n, 1, map[string]string{"segment.bytes": "1024"}); err != nil {
			t.Fatal(err)
		}
	}
	lead, _ := e.Partition("lead", 0)
	foll, _ := e.Partition("foll", 0)
	foll.SetReplicated(true)
	seq := map[int64]int32{}
	produce := func(epoch int32, n int) {
		if err := lead.AssignLeaderEpoch(epoch); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			pid := int64(7 + i%2)
			b := batchtest.Encode(batchtest.Options{Idempotent: true, ProducerID: pid, BaseSequence: seq[pid]},
				batchtest.Record{Value: fmt.Appendf(nil, "e%d-%d", epoch, i), Timestamp: int64(1000 + i)}, batchtest.Record{Value: []byte("x"), Timestamp: int64(1000 + i)})
			seq[pid] += 2
			w, err := lead.Append(b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Result(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(1, 20)
	produce(3, 20)

	// What the uploader stores for the last sealed segment.
	segs := lead.UploadableSegments(-1)
	if len(segs) < 2 {
		t.Fatalf("%d sealed segments", len(segs))
	}
	last := segs[len(segs)-1]
	restartAt := last.NextOffset
	snap, err := last.ProducerSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i := range segs {
		segs[i].Release()
	}
	var history []epochcache.Entry
	for _, en := range lead.EpochEntries() {
		if en.StartOffset < restartAt {
			history = append(history, epochcache.Entry{Epoch: en.Epoch, StartOffset: en.StartOffset})
		}
	}
	produce(3, 2) // the leader moves on past the remote end

	mb := metadatatest.New(t)
	tid := mb.Topic("foll", 1, nil)
	mb.CommitRemote(rlm.Segment{ID: rlm.SegmentID{1}, TopicID: tid, BaseOffset: 0, NextOffset: restartAt, SizeBytes: 1})
	im := mb.Image
	store := objstore.NewMemory()
	rs := rlm.Segment{ID: rlm.SegmentID{1}, TopicID: tid, BaseOffset: 0, NextOffset: restartAt}
	for kind, b := range map[string][]byte{"producers": snap, "epochs": rlm.EncodeEpochs(history)} {
		if err := store.Put(context.Background(), rlm.ObjectKey(&rs, kind), bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	reader := remote.NewReader(func() *metadata.Image { return im }, nil, store)

	cfg := replication.DefaultConfig()
	cfg.RemoteRestart = func(ctx context.Context, topic string, partition int32) (int64, []byte, []epochcache.Entry, error) {
		tp, ok := im.Topic(topic)
		if !ok {
			return 0, nil, nil, fmt.Errorf("no topic %s", topic)
		}
		return reader.RestartPoint(ctx, tp.ID, partition)
	}
	x := replication.NewFetcher(cfg, 2, 1, &leaderClient{t: t, lead: lead, localStart: restartAt}, replication.RealClock{})
	x.AddPartition(replication.TopicPartition{Topic: "foll", TopicID: tid}, 3, engineLog{foll})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { x.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	if !testwait.Until(30*time.Second, func() bool {
		return foll.LogEndOffset() == lead.LogEndOffset() && foll.HighWatermark() == lead.HighWatermark()
	}) {
		t.Fatalf("follower [%d, %d) hw %d, leader end %d hw %d; stats %+v", foll.LocalLogStartOffset(), foll.LogEndOffset(), foll.HighWatermark(), lead.LogEndOffset(), lead.HighWatermark(), x.Stats())
	}
	if st := x.Stats(); st.RemoteRestarts != 1 || st.RemoteRestartErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
	if foll.LocalLogStartOffset() != restartAt {
		t.Fatalf("follower local start %d, want %d", foll.LocalLogStartOffset(), restartAt)
	}
	lr, err := lead.ReadReplica(restartAt, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := foll.ReadReplica(restartAt, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if lb, fb := fileBytes(t, lr.Data), fileBytes(t, fr.Data); !bytes.Equal(lb, fb) || len(lb) == 0 {
		t.Fatalf("follower bytes from %d differ from the leader's (%d vs %d bytes)", restartAt, len(fb), len(lb))
	}
	// The leader's append path stamps producer state with its clock, a
	// follower with the batches' timestamps: compare the rest.
	if lp, fp := untimed(lead.Producers()), untimed(foll.Producers()); !reflect.DeepEqual(lp, fp) {
		t.Fatalf("producers: follower %+v, leader %+v", fp, lp)
	}
	want := []epochcache.Entry{{Epoch: 3, StartOffset: restartAt}}
	if got := foll.EpochEntries(); !slices.Equal(got, want) {
		t.Fatalf("follower epochs %v, want %v", got, want)
	}
}

func untimed(ps []producerstate.ProducerInfo) []producerstate.ProducerInfo {
	for i := range ps {
		ps[i].LastTimestamp = 0
		for j := range ps[i].Batches {
			ps[i].Batches[j].Timestamp = 0
		}
	}
	return ps
}
