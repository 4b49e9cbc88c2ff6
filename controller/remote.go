package controller

import (
	"context"
	"errors"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
)

// The broker's calls for the remote-log metadata (metadata/remote.go):
// the partition leader's uploader commits uploaded segments and retention
// deletions; whoever purges a deleted topic's objects reports it. Each is
// forwarded to the active controller like AlterPartition and returns once
// this node's image includes the result, so the caller may act on
// MetadataImage right away (e.g. let local retention delete a segment).
//
// Errors keep their identity across the RPC (errors.Is works):
//   - metadata.ErrRemoteSegmentCommitted: already done (a retry, or a
//     range another leader uploaded): move on, deleting this upload's
//     objects unless MetadataImage().HasRemoteSegment says its ID is the
//     committed one;
//   - metadata.ErrFencedLeaderEpoch: the partition's leader epoch moved:
//     drop this upload (and its objects); if this broker still leads, at
//     the new epoch, resume from the image's RemoteEnd;
//   - metadata.ErrRemoteSegmentGap: upload the missing range first;
//   - metadata.ErrUnknownTopic: the topic or partition is gone;
//   - metadata.ErrInvalidCommand: a bug in the caller;
//   - anything else (ErrNotController after retries, a context deadline,
//     ErrClosed, ErrNoSpace): the controller is unavailable; retry with
//     backoff, and keep the local copy meanwhile.

type (
	commitRemoteReq struct{ metadata.CommitRemoteSegment }
	deleteRemoteReq struct{ metadata.DeleteRemoteSegments }
	remotePurgedReq struct{ metadata.RemoteTopicPurged }
)

// CommitRemoteSegment records seg, whose objects are all in the store, in
// the remote-log metadata. After ErrRemoteSegmentCommitted too, this
// node's image includes the earlier commit when it returns.
func (n *Node) CommitRemoteSegment(ctx context.Context, seg rlm.Segment) error {
	idx, err := n.client.call(ctx, "CommitRemoteSegment", commitRemoteReq{metadata.CommitRemoteSegment{Segment: seg}}, nil)
	if err != nil && !errors.Is(err, metadata.ErrRemoteSegmentCommitted) {
		return err
	}
	// The refusal's index is after the commit it found.
	if werr := n.waitApplied(ctx, idx); werr != nil {
		return werr
	}
	return err
}

// DeleteRemoteSegments raises a partition's remote log start to logStart
// and removes the segments ids (each wholly below logStart) from the
// metadata; leaderEpoch is the caller's leader epoch of the partition.
// Delete a segment's objects after the command that expired it and
// before the one that removes it (metadata/remote.go explains why).
func (n *Node) DeleteRemoteSegments(ctx context.Context, topicID metadata.UUID, partition, leaderEpoch int32, ids []rlm.SegmentID, logStart int64) error {
	return n.write(ctx, "DeleteRemoteSegments", deleteRemoteReq{metadata.DeleteRemoteSegments{
		TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch, IDs: ids, LogStartOffset: logStart,
	}}, nil)
}

// RemoteTopicPurged reports that every object of the deleted topic id is
// gone from the store, which drops it from PendingRemotePurge.
func (n *Node) RemoteTopicPurged(ctx context.Context, id metadata.UUID) error {
	return n.write(ctx, "RemoteTopicPurged", remotePurgedReq{metadata.RemoteTopicPurged{TopicID: id}}, nil)
}

func (n *Node) handleCommitRemote(ctx context.Context, req *commitRemoteReq) (any, uint64, error) {
	return n.proposeAck(ctx, metadata.Command{CommitRemoteSegment: &req.CommitRemoteSegment})
}

func (n *Node) handleDeleteRemote(ctx context.Context, req *deleteRemoteReq) (any, uint64, error) {
	return n.proposeAck(ctx, metadata.Command{DeleteRemoteSegments: &req.DeleteRemoteSegments})
}

func (n *Node) handleRemotePurged(ctx context.Context, req *remotePurgedReq) (any, uint64, error) {
	return n.proposeAck(ctx, metadata.Command{RemoteTopicPurged: &req.RemoteTopicPurged})
}

// proposeAck proposes cmd for a call whose reply carries nothing but the
// index (and the refusal, if any).
func (n *Node) proposeAck(ctx context.Context, cmd metadata.Command) (any, uint64, error) {
	_, idx, err := n.propose(ctx, cmd)
	if err != nil {
		return nil, idx, err
	}
	return emptyResp{}, idx, nil
}
