package remote

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/metadata/metadatatest"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// testImage is an image with topic "t" (one partition) and segs
// committed to it.
func testImage(t *testing.T, segs ...rlm.Segment) (*metadata.Image, metadata.UUID) {
	b := metadatatest.New(t)
	tid := b.Topic("t", 1, map[string]string{"remote.storage.enable": "true"})
	for _, s := range segs {
		s.TopicID = tid
		b.CommitRemote(s)
	}
	return b.Image, tid
}

func seg(id byte, base, next int64) rlm.Segment {
	return rlm.Segment{ID: rlm.SegmentID{id}, BaseOffset: base, NextOffset: next, SizeBytes: next - base}
}

// snapshotAt returns a producer snapshot whose map end is offset.
func snapshotAt(t *testing.T, offset int64) []byte {
	t.Helper()
	st, err := producerstate.New(producerstate.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	st.ApplyBatch(producerstate.BatchHeader{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, BaseOffset: offset - 1, MaxTimestamp: 1})
	if st.MapEndOffset() != offset {
		t.Fatalf("snapshot map end %d, want %d", st.MapEndOffset(), offset)
	}
	return st.Snapshot()
}

func put(t *testing.T, st objstore.Store, key string, b []byte) {
	t.Helper()
	if err := st.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

func TestRestartPoint(t *testing.T) {
	ctx := context.Background()
	// The last committed segment is [150, 300) even though [100, 200)
	// sorts after [0, 100): the greatest NextOffset wins.
	s1, s2, s3 := seg(1, 0, 100), seg(2, 100, 200), seg(3, 150, 300)
	im, tid := testImage(t, s1, s2, s3)
	if im.RemoteEnd(tid, 0) != 300 {
		t.Fatalf("remote end %d", im.RemoteEnd(tid, 0))
	}
	s3.TopicID = tid
	store := objstore.NewMemory()
	r := NewReader(func() *metadata.Image { return im }, nil, store)

	// Nothing stored yet: a storage error naming the object.
	if _, _, _, err := r.RestartPoint(ctx, tid, 0); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "producers") {
		t.Fatalf("missing objects: %v", err)
	}
	snap := snapshotAt(t, 300)
	history := []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 120}}
	put(t, store, rlm.ObjectKey(&s3, "producers"), snap)
	if _, _, _, err := r.RestartPoint(ctx, tid, 0); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "epochs") {
		t.Fatalf("missing epochs object: %v", err)
	}
	put(t, store, rlm.ObjectKey(&s3, "epochs"), rlm.EncodeEpochs(history))
	off, gotSnap, gotEpochs, err := r.RestartPoint(ctx, tid, 0)
	if err != nil || off != 300 || !bytes.Equal(gotSnap, snap) || !slices.Equal(gotEpochs, history) {
		t.Fatalf("restart point %d %v %v: %v", off, len(gotSnap), gotEpochs, err)
	}

	// Damaged objects are storage errors, not panics or wrong answers.
	for _, c := range []struct {
		name, kind string
		b          []byte
	}{
		{"garbage snapshot", "producers", []byte("garbage")},
		{"snapshot of another offset", "producers", snapshotAt(t, 299)},
		{"bad epochs", "epochs", []byte("rlm-epochs 1\n2\n0 0\n")},
	} {
		put(t, store, rlm.ObjectKey(&s3, c.kind), c.b)
		if _, _, _, err := r.RestartPoint(ctx, tid, 0); !errors.Is(err, ErrStorage) {
			t.Fatalf("%s: %v", c.name, err)
		}
		put(t, store, rlm.ObjectKey(&s3, "producers"), snap)
		put(t, store, rlm.ObjectKey(&s3, "epochs"), rlm.EncodeEpochs(history))
	}

	// Nothing tiered: another partition, or no image yet.
	if _, _, _, err := r.RestartPoint(ctx, tid, 1); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "nothing tiered") {
		t.Fatalf("no segments: %v", err)
	}
	nilR := NewReader(func() *metadata.Image { return nil }, nil, store)
	if _, _, _, err := nilR.RestartPoint(ctx, tid, 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("no image: %v", err)
	}
	// An unreachable store.
	faulty := objstore.NewFaulty(store)
	faulty.SetOutage(true)
	fr := NewReader(func() *metadata.Image { return im }, nil, faulty)
	if _, _, _, err := fr.RestartPoint(ctx, tid, 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("outage: %v", err)
	}
}

// An absurdly large object is refused after reading at most the bound.
func TestRestartPointBoundsObjects(t *testing.T) {
	defer func(n int) { maxRestartObject = n }(maxRestartObject)
	maxRestartObject = 4 << 10
	s := seg(1, 0, 100)
	im, tid := testImage(t, s)
	s.TopicID = tid
	store := objstore.NewMemory()
	put(t, store, rlm.ObjectKey(&s, "producers"), make([]byte, maxRestartObject+1))
	r := NewReader(func() *metadata.Image { return im }, nil, store)
	if _, _, _, err := r.RestartPoint(context.Background(), tid, 0); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "over") {
		t.Fatalf("oversized object: %v", err)
	}
}
