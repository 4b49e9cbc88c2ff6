package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
)

func remoteSeg(tid metadata.UUID, n byte, base, next int64, le int32) rlm.Segment {
	return rlm.Segment{ID: rlm.SegmentID{n}, TopicID: tid, BaseOffset: base, NextOffset: next, SizeBytes: next - base,
		LeaderEpoch: le, Epochs: []epochcache.Entry{{Epoch: le, StartOffset: base}}}
}

// The uploader's calls from a broker that is not the controller reach it,
// every node's image shows the result, and each refusal keeps its
// identity across the RPC.
func TestRemoteMetadataThroughFollower(t *testing.T) {
	_, nodes := memCluster(t, 3, nil)
	ctl := leaderOf(t, nodes)
	up := otherThan(nodes, ctl) // leads the partition, uploads
	third := int32(6) - up.NodeID() - ctl.NodeID()
	top, err := up.CreateTopic(ctxT(t), CreateTopicRequest{Name: "tiered", Assignment: [][]int32{{up.NodeID(), third, ctl.NodeID()}},
		Configs: map[string]string{"remote.storage.enable": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := top.ID
	if err := up.CommitRemoteSegment(ctxT(t), remoteSeg(tid, 1, 0, 100, 0)); err != nil {
		t.Fatal(err)
	}
	// Read your writes on the caller.
	if up.MetadataImage().RemoteEnd(tid, 0) != 100 {
		t.Fatal("commit not in the caller's image on return")
	}
	for _, c := range []struct {
		seg  rlm.Segment
		want error
	}{
		{remoteSeg(tid, 1, 0, 100, 0), metadata.ErrRemoteSegmentCommitted},
		{remoteSeg(tid, 2, 50, 100, 0), metadata.ErrRemoteSegmentCommitted},
		{remoteSeg(tid, 2, 101, 200, 0), metadata.ErrRemoteSegmentGap},
		{remoteSeg(metadata.NewUUID(), 2, 100, 200, 0), metadata.ErrUnknownTopic},
		{remoteSeg(tid, 2, 200, 100, 0), metadata.ErrInvalidCommand},
	} {
		if err := up.CommitRemoteSegment(ctxT(t), c.seg); !errors.Is(err, c.want) {
			t.Fatalf("commit [%d, %d): %v, want %v", c.seg.BaseOffset, c.seg.NextOffset, err, c.want)
		}
	}
	if err := up.CommitRemoteSegment(ctxT(t), remoteSeg(tid, 2, 100, 200, 0)); err != nil {
		t.Fatal(err)
	}
	// A retried commit reads as done, and the caller's image shows it.
	if err := up.CommitRemoteSegment(ctxT(t), remoteSeg(tid, 2, 100, 200, 0)); !errors.Is(err, metadata.ErrRemoteSegmentCommitted) ||
		!up.MetadataImage().HasRemoteSegment(tid, 0, rlm.SegmentID{2}) {
		t.Fatalf("retry: %v", err)
	}
	checkFor(t, 5*time.Second, func() error {
		for _, n := range nodes {
			im := n.MetadataImage()
			if s, ok := im.SegmentFor(tid, 0, 150); !ok || s.ID[0] != 2 || im.RemoteEnd(tid, 0) != 200 || im.RemoteSizeBytes(tid, 0) != 200 {
				return fmt.Errorf("node %d: segments %v", n.NodeID(), im.RemoteSegments(tid, 0))
			}
		}
		return nil
	})

	// Leadership moves off the uploader: its late upload is fenced, the
	// new leader continues.
	if err := up.ReportOfflineReplicas(ctxT(t), tid, []int32{0}); err != nil {
		t.Fatal(err)
	}
	p, _ := up.MetadataImage().Partition("tiered", 0)
	if p.Leader != third || p.LeaderEpoch != 1 {
		t.Fatalf("after the leader moved: %+v", p)
	}
	if err := up.CommitRemoteSegment(ctxT(t), remoteSeg(tid, 3, 200, 300, 0)); !errors.Is(err, metadata.ErrFencedLeaderEpoch) {
		t.Fatalf("deposed leader's commit: %v", err)
	}
	next := nodes[slices.IndexFunc(nodes, func(n *Node) bool { return n.NodeID() == third })]
	if err := next.CommitRemoteSegment(ctxT(t), remoteSeg(tid, 3, 150, 300, 1)); err != nil {
		t.Fatal(err)
	}

	// Retention: expire, then remove.
	if err := next.DeleteRemoteSegments(ctxT(t), tid, 0, 0, nil, 100); !errors.Is(err, metadata.ErrFencedLeaderEpoch) {
		t.Fatalf("delete at a stale epoch: %v", err)
	}
	if err := next.DeleteRemoteSegments(ctxT(t), tid, 0, 1, nil, 100); err != nil {
		t.Fatal(err)
	}
	if ex := next.MetadataImage().ExpiredRemoteSegments(tid, 0); len(ex) != 1 || ex[0].ID[0] != 1 {
		t.Fatalf("expired %v", ex)
	}
	if err := next.DeleteRemoteSegments(ctxT(t), tid, 0, 1, []rlm.SegmentID{{1}}, 100); err != nil {
		t.Fatal(err)
	}
	if im := next.MetadataImage(); im.RemoteLogStart(tid, 0) != 100 || len(im.RemoteSegments(tid, 0)) != 2 {
		t.Fatalf("after delete: start %d, %v", im.RemoteLogStart(tid, 0), im.RemoteSegments(tid, 0))
	}

	// Topic deletion queues the purge; any node reports it done.
	if err := up.DeleteTopic(ctxT(t), "tiered"); err != nil {
		t.Fatal(err)
	}
	if got := up.MetadataImage().PendingRemotePurge(); !slices.Equal(got, []metadata.UUID{tid}) {
		t.Fatalf("pending purge %v", got)
	}
	if err := ctl.RemoteTopicPurged(ctxT(t), tid); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, func() error {
		for _, n := range nodes {
			if got := n.MetadataImage().PendingRemotePurge(); len(got) != 0 {
				return fmt.Errorf("node %d: pending purge %v", n.NodeID(), got)
			}
		}
		return nil
	})
}
