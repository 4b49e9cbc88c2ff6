package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/tiered/objstore"
)

func readObject(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	rc, err := s.GetRange(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sealed segments go up in order with their five objects; the engine
// deletes local segments only once their commit reached it.
func TestUploadInOrderGatesLocalDeletion(t *testing.T) {
	c, eng, p := setup(t, map[string]string{"local.retention.bytes": "600"})
	produce(t, p, 40, 0)
	end, n := sealedEnd(p)
	if n < 4 {
		t.Fatalf("only %d sealed segments", n)
	}
	store := objstore.NewMemory()
	m := New(testConfig(1), eng, store, newMeta(c), nil)
	defer m.Close()

	// Reconciled, not started: the watermark is known and says nothing
	// is uploaded, so local retention keeps everything.
	c.follow(m)
	if rs, known := p.RemoteState(); !known || !rs.Enabled || rs.UploadedNext != -1 || rs.LogStart != -1 {
		t.Fatalf("remote state before uploads: %+v known=%v", rs, known)
	}
	eng.RunRetention()
	if ls := p.LocalLogStartOffset(); ls != 0 || p.UploadHeldBackBytes() <= 0 {
		t.Fatalf("before uploads: local start %d, held back %d", ls, p.UploadHeldBackBytes())
	}

	m.Start()
	waitFor(t, "the sealed segments to be committed", func() bool { return c.remoteEnd() == end })
	checkContiguous(t, c, store, 0, end)
	var sum int64
	for _, seg := range c.segments() {
		sum += seg.SizeBytes
		if seg.LeaderEpoch != 0 || len(seg.Epochs) == 0 || seg.Epochs[0].StartOffset != seg.BaseOffset {
			t.Fatalf("segment [%d, %d): epoch %d, epochs %v", seg.BaseOffset, seg.NextOffset, seg.LeaderEpoch, seg.Epochs)
		}
		eps, err := rlm.DecodeEpochs(readObject(t, store, rlm.ObjectKey(&seg, "epochs")))
		if err != nil || len(eps) != 1 || eps[0] != (epochcache.Entry{Epoch: 0, StartOffset: 0}) {
			t.Fatalf("epochs object of [%d, %d): %v (%v), want the whole history [0@0]", seg.BaseOffset, seg.NextOffset, eps, err)
		}
		if len(readObject(t, store, rlm.ObjectKey(&seg, "producers"))) == 0 {
			t.Fatalf("empty producers object")
		}
	}
	st := m.Stats()
	if st.SegmentsUploaded != int64(n) || st.BytesUploaded != sum || st.RemoteBytes != sum || st.UploadErrors != 0 || st.Stalled != 0 || st.LagSegments != 0 || st.LagBytes != 0 {
		t.Fatalf("stats %+v, want %d segments of %d bytes uploaded, no lag", st, n, sum)
	}

	waitFor(t, "the engine to learn the watermark", func() bool { rs, _ := p.RemoteState(); return rs.UploadedNext == end })
	eng.RunRetention()
	if ls := p.LocalLogStartOffset(); ls == 0 || ls > end {
		t.Fatalf("local log start %d after retention, uploaded up to %d", ls, end)
	}
	if p.LogStartOffset() != 0 {
		t.Fatalf("whole log start %d, want 0 (remote)", p.LogStartOffset())
	}

	// New segments follow, contiguous with the first ones.
	produce(t, p, 20, 0)
	end2, _ := sealedEnd(p)
	m.Wake()
	waitFor(t, "the new segments", func() bool { return c.remoteEnd() == end2 })
	checkContiguous(t, c, store, 0, end2)
}

// An unreachable store: attempts fail and are counted, the partition is
// stalled, nothing is committed and nothing local deleted; after it comes
// back every segment is uploaded exactly once.
func TestStoreOutageThenRecovery(t *testing.T) {
	c, eng, p := setup(t, map[string]string{"local.retention.bytes": "600"})
	produce(t, p, 30, 0)
	end, n := sealedEnd(p)
	mem := objstore.NewMemory()
	store := objstore.NewFaulty(mem)
	store.SetOutage(true)
	m := New(testConfig(1), eng, store, newMeta(c), nil)
	defer m.Close()
	c.run(m)

	waitFor(t, "failed attempts", func() bool { st := m.Stats(); return st.UploadErrors >= 3 && st.Stalled == 1 })
	if st := m.Stats(); c.remoteEnd() != -1 || st.SegmentsUploaded != 0 || st.LagSegments != int64(n) || st.LagBytes <= 0 {
		t.Fatalf("during the outage: remote end %d, stats %+v (want lag of %d segments)", c.remoteEnd(), st, n)
	}
	eng.RunRetention()
	if p.LocalLogStartOffset() != 0 || p.UploadHeldBackBytes() <= 0 {
		t.Fatalf("local start %d, held back %d during the outage", p.LocalLogStartOffset(), p.UploadHeldBackBytes())
	}
	// Produce is not affected.
	produce(t, p, 10, 0)
	end, n = sealedEnd(p)

	store.SetOutage(false)
	waitFor(t, "recovery", func() bool { return c.remoteEnd() == end })
	checkContiguous(t, c, mem, 0, end)
	if st := m.Stats(); st.SegmentsUploaded != int64(n) || st.Stalled != 0 {
		t.Fatalf("after recovery: %+v, want %d uploads", st, n)
	}
}

// A controller that cannot be reached: the objects of attempts whose
// commit failed may yet be committed, so they stay; the sweep of the next
// task deletes those that were not, and never a committed segment's.
func TestCommitFailuresAndOrphanSweep(t *testing.T) {
	c, eng, p := setup(t, nil)
	produce(t, p, 30, 0)
	end, n := sealedEnd(p)
	store := objstore.NewMemory()
	v := newMeta(c)
	v.failCommits.Store(true)
	m := New(testConfig(1), eng, store, v, nil)
	c.run(m)
	waitFor(t, "failed commits", func() bool { return m.Stats().UploadErrors >= 2 })
	v.failCommits.Store(false)
	waitFor(t, "the uploads", func() bool { return c.remoteEnd() == end })
	m.Close()
	orphans := len(keys(t, store, "")) - len(objectKinds)*n
	if orphans < len(objectKinds) {
		t.Fatalf("%d objects for %d segments: the failed commits' objects should still be there", len(keys(t, store, "")), n)
	}
	// Objects no sweep may touch: not a segment key, and an upload at
	// or above the remote end (it could still be committed).
	prefix := strings.SplitN(keys(t, store, "")[0], "/", 3)
	dir := prefix[0] + "/" + prefix[1] + "/"
	future := rlm.Segment{ID: rlm.SegmentID{9}, TopicID: c.tid, BaseOffset: end}
	foreign := []string{dir + "notes.txt", rlm.ObjectKey(&future, "log")}
	for _, k := range foreign {
		if err := store.Put(context.Background(), k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}

	var dropped atomic.Int64
	m2 := New(testConfig(1), eng, store, v, func(string) { dropped.Add(1) })
	defer m2.Close()
	c.run(m2)
	waitFor(t, "the sweep", func() bool { return dropped.Load() == int64(orphans) })
	// A few more rounds (50 ms is two and a half upload intervals):
	// nothing else goes.
	gone := "no foreign object gone"
	if !testwait.Holds(50*time.Millisecond, func() bool {
		for _, k := range foreign {
			if _, err := store.Stat(context.Background(), k); err != nil {
				gone = fmt.Sprintf("%s: %v", k, err)
				return false
			}
		}
		return dropped.Load() == int64(orphans)
	}) {
		t.Fatalf("%s; %d objects dropped for %d orphans: the sweep must leave all but the orphans", gone, dropped.Load(), orphans)
	}
	for _, k := range foreign {
		store.Delete(context.Background(), k)
	}
	checkContiguous(t, c, store, 0, end)
}

// A new leader resumes from the remote end without uploading a range
// twice; the deposed leader's late commit is refused and its objects
// deleted: fenced when it arrives before the new leader covered its
// range, "already committed" after.
func TestLeaderChangeResumesAndFencesOldLeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		early   bool // the late commit arrives before the new leader starts
		refusal error
	}{
		{"fenced", true, metadata.ErrFencedLeaderEpoch},
		{"covered", false, metadata.ErrRemoteSegmentCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, eng, p := setup(t, nil) // one log stands for both replicas: they hold the same data
			produce(t, p, 40, 0)
			end, _ := sealedEnd(p)

			store := objstore.NewMemory()
			v1 := newMeta(c)
			m1 := New(testConfig(1), eng, store, v1, nil)
			defer m1.Close()
			v1.holdAt.Store(3)
			c.run(m1)
			var late rlm.Segment
			select {
			case late = <-v1.held:
			case <-time.After(10 * time.Second):
				t.Fatal("no held commit")
			}
			for _, kind := range objectKinds {
				if _, err := store.Stat(context.Background(), rlm.ObjectKey(&late, kind)); err != nil {
					t.Fatalf("held upload's %s: %v", kind, err)
				}
			}
			resumeAt := c.remoteEnd()
			if len(c.segments()) != 2 || resumeAt != late.BaseOffset {
				t.Fatalf("held commit of [%d, %d), committed %s", late.BaseOffset, late.NextOffset, ranges(c.segments()))
			}

			c.fence(1) // broker 2 leads at epoch 1
			release := func() {
				close(v1.release) // the old leader's commit arrives late
				if err := <-v1.heldErr; !errors.Is(err, tc.refusal) {
					t.Fatalf("late commit: %v, want %v", err, tc.refusal)
				}
				waitFor(t, "the refused upload's objects to go", func() bool {
					for _, kind := range objectKinds {
						if _, err := store.Stat(context.Background(), rlm.ObjectKey(&late, kind)); !errors.Is(err, objstore.ErrNotFound) {
							return false
						}
					}
					return true
				})
			}
			if tc.early {
				release()
			}
			m2 := New(testConfig(2), eng, store, newMeta(c), nil)
			defer m2.Close()
			c.run(m2)
			waitFor(t, "the new leader's uploads", func() bool { return c.remoteEnd() == end })
			for _, seg := range c.segments() {
				if seg.BaseOffset >= resumeAt && seg.LeaderEpoch != 1 {
					t.Fatalf("segment [%d, %d) at epoch %d after the leader change at %d", seg.BaseOffset, seg.NextOffset, seg.LeaderEpoch, resumeAt)
				}
			}
			if !tc.early {
				release()
			}
			if c.image().HasRemoteSegment(c.tid, 0, late.ID) {
				t.Fatal("the deposed leader's segment was committed")
			}
			checkContiguous(t, c, store, 0, end)
			if st := m2.Stats(); st.Stalled != 0 || st.UploadErrors != 0 {
				t.Fatalf("new leader stats %+v", st)
			}
		})
	}
}

// A truncation while the log object streams: the attempt is dropped (its
// objects deleted) and the segment listed again.
func TestSegmentChangedDuringUpload(t *testing.T) {
	c, eng, p := setup(t, nil)
	produce(t, p, 40, 0)
	infos := p.UploadableSegments(-1)
	hw := infos[2].NextOffset
	truncateAt := infos[3].BaseOffset + 1
	for i := range infos {
		infos[i].Release()
	}
	// Replication owns the HW: only the first three segments are below
	// it, and a follower-style truncation above it is allowed.
	p.SetReplicated(true)
	p.SetHighWatermark(hw)

	mem := objstore.NewMemory()
	var fired atomic.Bool
	store := &hookStore{Store: mem, onPut: func(key string) {
		if strings.HasSuffix(key, ".log") && fired.CompareAndSwap(false, true) {
			if err := p.TruncateTo(truncateAt); err != nil {
				t.Errorf("TruncateTo: %v", err)
			}
		}
	}}
	m := New(testConfig(1), eng, store, newMeta(c), nil)
	defer m.Close()
	c.run(m)
	waitFor(t, "the uploads", func() bool { return c.remoteEnd() == hw })
	if !fired.Load() {
		t.Fatal("the truncation never ran")
	}
	checkContiguous(t, c, mem, 0, hw)
	if st := m.Stats(); st.SegmentsUploaded != 3 || st.UploadErrors != 0 {
		t.Fatalf("stats %+v, want 3 uploads and no errors", st)
	}
}

// checkDeleteOrder checks that every removed segment was expired, then
// had its objects deleted, then was removed, and that its objects are
// gone.
func checkDeleteOrder(t *testing.T, ops *opLog, removed []rlm.Segment, store objstore.Store) {
	t.Helper()
	list := ops.list()
	for _, s := range removed {
		expireAt := -1
		for i, op := range list {
			if v, ok := strings.CutPrefix(op, "expire@"); ok {
				if start, err := strconv.ParseInt(v, 10, 64); err == nil && start >= s.NextOffset {
					expireAt = i
					break
				}
			}
		}
		rm := ops.index("remove:" + s.ID.String())
		if expireAt < 0 || rm < 0 || rm < expireAt {
			t.Fatalf("segment [%d, %d): expired at op %d, removed at op %d: %v", s.BaseOffset, s.NextOffset, expireAt, rm, list)
		}
		for _, kind := range objectKinds {
			d := ops.index("delete:" + rlm.ObjectKey(&s, kind))
			if d < expireAt || d > rm {
				t.Fatalf("segment [%d, %d) %s deleted at op %d, expired at %d, removed at %d", s.BaseOffset, s.NextOffset, kind, d, expireAt, rm)
			}
			if _, err := store.Stat(context.Background(), rlm.ObjectKey(&s, kind)); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("segment [%d, %d) %s: %v after removal", s.BaseOffset, s.NextOffset, kind, err)
			}
		}
	}
}

// retention.bytes counts the remote segments and the local-only bytes;
// retention.ms the segments' newest timestamps.
func TestRemoteRetention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]string
		oldRecs int // records written an hour ago, before the others
	}{
		{"bytes", map[string]string{"retention.bytes": "2000", "local.retention.bytes": "600"}, 0},
		{"ms", map[string]string{"retention.ms": "600000", "local.retention.ms": "600000"}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, eng, p := setup(t, tc.configs)
			if tc.oldRecs > 0 {
				produce(t, p, tc.oldRecs, time.Now().Add(-time.Hour).UnixMilli())
			}
			produce(t, p, 40, 0)
			end, _ := sealedEnd(p)
			ops := &opLog{}
			mem := objstore.NewMemory()
			v := newMeta(c)
			v.ops = ops
			var dropped atomic.Int64
			m := New(testConfig(1), eng, &hookStore{Store: mem, ops: ops}, v, func(string) { dropped.Add(1) })
			defer m.Close()
			c.run(m)
			waitFor(t, "uploads and retention", func() bool {
				return c.remoteEnd() == end && c.remoteStart() > 0 && len(c.image().ExpiredRemoteSegments(c.tid, 0)) == 0 && m.Stats().SegmentsDeleted > 0
			})
			// The last upload may have started one more retention round:
			// wait until retention has done all it will (the oldest live
			// segment is one the log needs) and each removal is counted.
			waitFor(t, "retention to settle", func() bool {
				live := c.image().RemoteSegments(c.tid, 0)
				removes := int64(0)
				for _, op := range ops.list() {
					if strings.HasPrefix(op, "remove:") {
						removes++
					}
				}
				if len(live) == 0 || removes != m.Stats().SegmentsDeleted || dropped.Load() != removes*int64(len(objectKinds)) {
					return false
				}
				if tc.name == "bytes" {
					return remoteBytes(live)+p.LocalBytesFrom(end)-live[0].SizeBytes < 2000
				}
				return live[0].MaxTimestamp >= time.Now().Add(-10*time.Minute).UnixMilli()
			})
			img := c.image()
			start := img.RemoteLogStart(c.tid, 0)
			live := img.RemoteSegments(c.tid, 0)
			if len(live) == 0 || live[0].BaseOffset != start {
				t.Fatalf("remote start %d, segments %s", start, ranges(live))
			}
			var removed []rlm.Segment
			for _, op := range ops.list() {
				if id, ok := strings.CutPrefix(op, "remove:"); ok {
					removed = append(removed, v.committedSegment(t, id))
				}
			}
			if int64(len(removed)) != m.Stats().SegmentsDeleted || dropped.Load() != int64(len(removed)*len(objectKinds)) {
				t.Fatalf("%d removed, stats %d deleted, %d keys dropped", len(removed), m.Stats().SegmentsDeleted, dropped.Load())
			}
			checkDeleteOrder(t, ops, removed, mem)
			for _, s := range removed {
				if s.NextOffset > start {
					t.Fatalf("removed segment [%d, %d) above the remote start %d", s.BaseOffset, s.NextOffset, start)
				}
			}
			switch tc.name {
			case "bytes":
				// The whole log stays at or above retention.bytes, and
				// would drop below it without the oldest live segment.
				total := remoteBytes(live) + p.LocalBytesFrom(end)
				if total < 2000 || total-live[0].SizeBytes >= 2000 {
					t.Fatalf("remote + local-only = %d bytes (oldest live %d), retention.bytes 2000", total, live[0].SizeBytes)
				}
			case "ms":
				cut := time.Now().Add(-10 * time.Minute).UnixMilli()
				for _, s := range removed {
					if s.MaxTimestamp > cut {
						t.Fatalf("removed segment [%d, %d) holds new records", s.BaseOffset, s.NextOffset)
					}
				}
				if live[0].MaxTimestamp < cut {
					t.Fatalf("live segment [%d, %d) is past retention.ms", live[0].BaseOffset, live[0].NextOffset)
				}
			}
			checkLiveObjects(t, c, mem)
		})
	}
}

// checkLiveObjects checks every listed segment still has its objects and
// nothing else is stored.
func checkLiveObjects(t *testing.T, c *cluster, s objstore.Store) {
	t.Helper()
	segs := c.segments()
	for _, seg := range segs {
		for _, kind := range objectKinds {
			if _, err := s.Stat(context.Background(), rlm.ObjectKey(&seg, kind)); err != nil {
				t.Fatalf("live segment [%d, %d) %s: %v", seg.BaseOffset, seg.NextOffset, kind, err)
			}
		}
	}
	if n := len(keys(t, s, "")); n != len(segs)*len(objectKinds) {
		t.Fatalf("%d objects for %d live segments", n, len(segs))
	}
}

// Deleting a topic: the controller's broker deletes its objects and
// reports it purged; another broker does nothing.
func TestPurgeDeletedTopic(t *testing.T) {
	c, eng, p := setup(t, nil)
	produce(t, p, 30, 0)
	end, n := sealedEnd(p)
	store := objstore.NewMemory()
	// An object of another topic stays.
	if err := store.Put(context.Background(), "ffff/0/other.log", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	v1, v2 := newMeta(c), newMeta(c)
	v1.controller.Store(2)
	v2.controller.Store(2)
	m1 := New(testConfig(1), eng, store, v1, nil)
	defer m1.Close()
	c.run(m1)
	waitFor(t, "uploads", func() bool { return c.remoteEnd() == end })

	var dropped atomic.Int64
	m2 := New(testConfig(2), openEngine(t), store, v2, func(string) { dropped.Add(1) })
	defer m2.Close()
	v2.controller.Store(-1) // no controller known yet: nobody purges
	c.run(m2)
	c.must(metadata.Command{DeleteTopic: &metadata.DeleteTopic{Name: topic, ID: c.tid}})
	if got := c.image().PendingRemotePurge(); len(got) != 1 || got[0] != c.tid {
		t.Fatalf("pending purge %v", got)
	}
	// 100 ms is five upload intervals: a purge this broker would run, it
	// ran.
	if !testwait.Holds(100*time.Millisecond, func() bool {
		return len(keys(t, store, "")) == n*len(objectKinds)+1 && len(c.image().PendingRemotePurge()) == 1
	}) {
		t.Fatal("purged without being the controller's broker")
	}
	v2.controller.Store(2)
	m2.Wake()
	waitFor(t, "the purge", func() bool { return len(c.image().PendingRemotePurge()) == 0 })
	if got := keys(t, store, ""); len(got) != 1 || got[0] != "ffff/0/other.log" {
		t.Fatalf("after the purge the store holds %v", got)
	}
	if dropped.Load() != int64(n*len(objectKinds)) || m2.Stats().SegmentsDeleted != int64(n) {
		t.Fatalf("dropped %d keys, %d segments deleted; want %d segments", dropped.Load(), m2.Stats().SegmentsDeleted, n)
	}
}

// Close returns promptly while a store call hangs.
func TestCloseWithHungStore(t *testing.T) {
	c, eng, p := setup(t, nil)
	produce(t, p, 20, 0)
	store := objstore.NewFaulty(objstore.NewMemory())
	in := store.Inject(objstore.Fault{Ops: objstore.OpPut | objstore.OpList, Latency: time.Hour})
	cfg := testConfig(1)
	cfg.OpTimeout = time.Hour
	m := New(cfg, eng, store, newMeta(c), nil)
	c.run(m)
	waitFor(t, "a hung call", func() bool { return in.Fired() > 0 })
	done := make(chan struct{})
	go func() { m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs behind a hung store call")
	}
	if c.remoteEnd() != -1 {
		t.Fatal("committed through a hung store")
	}
}

// remoteBytes sums the segments' sizes.
func remoteBytes(segs []rlm.Segment) int64 {
	var n int64
	for _, s := range segs {
		n += s.SizeBytes
	}
	return n
}
