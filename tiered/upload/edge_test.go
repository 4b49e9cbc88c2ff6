package upload

import (
	"context"
	"errors"
	"testing"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/tiered/objstore"
)

// A follower's manager hands its engine the watermark but uploads
// nothing.
func TestFollowerGetsStateOnly(t *testing.T) {
	c, eng1, p1 := setup(t, nil)
	eng2 := openEngine(t)
	p2 := host(t, eng2, c, topicConfigs(nil))
	produce(t, p1, 30, 0)
	produce(t, p2, 30, 0) // the follower's copy
	end, _ := sealedEnd(p1)
	store := objstore.NewMemory()
	m1 := New(testConfig(1), eng1, store, newMeta(c), nil)
	defer m1.Close()
	m2 := New(testConfig(2), eng2, store, newMeta(c), nil)
	defer m2.Close()
	c.run(m1)
	c.run(m2)
	waitFor(t, "the follower's watermark", func() bool {
		rs, _ := p2.RemoteState()
		return c.remoteEnd() == end && rs.Enabled && rs.UploadedNext == end && rs.LogStart == 0
	})
	if st := m2.Stats(); st.SegmentsUploaded != 0 || st.LagSegments != 0 || st.RemoteBytes != 0 {
		t.Fatalf("follower stats %+v", st)
	}
	checkContiguous(t, c, store, 0, end)
}

// Segments a previous leader expired but did not delete are finished by
// the next task: objects deleted, then the segments removed.
func TestFinishesExpiredSegments(t *testing.T) {
	c, eng, p := setup(t, nil)
	produce(t, p, 30, 0)
	end, n := sealedEnd(p)
	store := objstore.NewMemory()
	v := newMeta(c)
	m1 := New(testConfig(1), eng, store, v, nil)
	c.run(m1)
	waitFor(t, "uploads", func() bool { return c.remoteEnd() == end })
	m1.Close()

	segs := c.segments()
	if err := v.DeleteRemoteSegments(context.Background(), c.tid, 0, 0, nil, segs[1].NextOffset); err != nil {
		t.Fatal(err)
	}
	if got := c.image().ExpiredRemoteSegments(c.tid, 0); len(got) != 2 {
		t.Fatalf("%d expired segments", len(got))
	}
	m2 := New(testConfig(1), eng, store, v, nil)
	defer m2.Close()
	c.run(m2)
	// The manager counts a deletion after its metadata commit, which the
	// image shows first: wait for both.
	waitFor(t, "the expired segments to go", func() bool {
		return len(c.image().ExpiredRemoteSegments(c.tid, 0)) == 0 && m2.Stats().SegmentsDeleted == 2
	})
	for _, s := range segs[:2] {
		if _, err := store.Stat(context.Background(), rlm.ObjectKey(&s, "log")); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("expired segment's log object: %v", err)
		}
	}
	if got := len(c.segments()); got != n-2 || m2.Stats().SegmentsDeleted != 2 {
		t.Fatalf("%d segments listed of %d, %d deleted", got, n, m2.Stats().SegmentsDeleted)
	}
	checkLiveObjects(t, c, store)
}

// The local log starts above the remote end (its older data is gone):
// the gap cannot be filled, so the remote log start is raised over it
// and uploads go on from the local start.
func TestGapBelowLocalStart(t *testing.T) {
	c, eng, p := setup(t, nil)
	v := newMeta(c)
	old := rlm.Segment{ID: rlm.SegmentID{1}, TopicID: c.tid, BaseOffset: 0, NextOffset: 5, SizeBytes: 10, Epochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}}
	if err := v.CommitRemoteSegment(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	produce(t, p, 30, 0)
	end, _ := sealedEnd(p)
	store := objstore.NewMemory()
	m := New(testConfig(1), eng, store, v, nil)
	defer m.Close()
	c.run(m)
	waitFor(t, "uploads from the local start", func() bool {
		return c.remoteEnd() == end && len(c.image().ExpiredRemoteSegments(c.tid, 0)) == 0
	})
	if s := c.remoteStart(); s != 100 {
		t.Fatalf("remote log start %d, want the local start 100", s)
	}
	checkContiguous(t, c, store, 100, end)
}
