package netpath

import (
	"context"
	"errors"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-9
//
// Behavior:
//   - Timestamp -2 is the log start offset, -1 the high watermark (the
//     last stable offset under read_committed), -3 the offset of the batch
//     with the largest timestamp (KIP-734); otherwise the first offset
//     whose batch timestamp is >= the one asked for, or -1 when none.
//   - Tiered storage (KIP-405): -2 is the whole log's start (remote tier
//     included); -4 EARLIEST_LOCAL_TIMESTAMP (v8+) the local log start;
//     -5 LATEST_TIERED_TIMESTAMP (v9+) the highest offset the remote
//     tier holds (-1 when nothing is tiered), with the leader epoch the
//     remote segments record for it. A timestamp lookup first searches
//     the remote tier (Deps.Remote), as Kafka does, and the local log
//     only when no remote batch is stamped at or after it; -3 searches
//     the local log only. v8 and v9 add no fields.
//   - v0 (old style, max_num_offsets) is not served.
//   - Under read_committed a lookup by timestamp (or -3) that lands at or
//     past the last stable offset finds nothing (-1), as in Kafka, where
//     the LSO is the last fetchable offset.
//   - Only the partition's leader answers (NOT_LEADER_OR_FOLLOWER
//     elsewhere); the leader epoch reported and checked is the image's.
//   - After a leader change (RF > 1), while the new leader's high
//     watermark is below the log end its epoch began with, it may lag
//     what the previous leader acknowledged (KIP-207,
//     replication.LeaderState.CheckOffsetsAvailable). Then, as in Kafka's
//     Partition.fetchOffsetForTimestamp: -1 answers OFFSET_NOT_AVAILABLE
//     (LEADER_NOT_AVAILABLE before v5), retriable, so a consumer never
//     reads "to the end" and stops short; a timestamp or -3 lookup
//     answers it only when nothing below the HW matches (a match below
//     it stands); -2 (the log start) is answered as usual. Fetch is not
//     refused in that state (01_fetch.go).

func init() { register(2, 1, 9, handleListOffsets) }

func handleListOffsets(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	img, fresh := s.node.MetadataImage(), s.node.Fresh()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !s.authorize(r, metadata.OpDescribe, metadata.ResourceTopic, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			lc := s.leaderPartition(img, fresh, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch)
			if lc.code != 0 {
				sp.ErrorCode = lc.code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			part := lc.part
			if rp.Timestamp == engine.TimestampMax && req.Version < 7 ||
				rp.Timestamp == engine.TimestampEarliestLocal && req.Version < 8 ||
				rp.Timestamp == timestampLatestTiered && req.Version < 9 {
				sp.ErrorCode = kerr.UnsupportedVersion.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			// Checked before the log is read: the HW only rises, so a
			// partition found caught up stays so for the read.
			var lagging error
			if s.repl != nil && part.Replicated() {
				lagging = s.repl.OffsetsAvailable(rt.Topic, rp.Partition, lc.info.LeaderEpoch)
				if errors.Is(lagging, replication.ErrNotLeaderOrFollower) {
					sp.ErrorCode = replErrorCode(lagging)
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			var (
				offset, ts int64
				epoch      = lc.info.LeaderEpoch
				err        error
			)
			switch {
			case rp.Timestamp == timestampLatestTiered:
				offset, ts, epoch = latestTiered(img, rt.Topic, rp.Partition)
			case rp.Timestamp >= 0:
				offset, ts, err = s.offsetForTimestamp(img, part, rt.Topic, rp.Partition, rp.Timestamp)
			default:
				offset, ts, err = part.OffsetForTimestamp(rp.Timestamp)
			}
			if err == nil && req.IsolationLevel == 1 {
				switch lso := part.LastStableOffset(); {
				case rp.Timestamp == engine.TimestampLatest:
					offset = lso
				case rp.Timestamp != engine.TimestampEarliest && rp.Timestamp != engine.TimestampEarliestLocal && offset >= lso:
					offset, ts = -1, -1
				}
			}
			if err == nil && lagging != nil && rp.Timestamp != engine.TimestampEarliest && rp.Timestamp != engine.TimestampEarliestLocal &&
				rp.Timestamp != timestampLatestTiered &&
				(rp.Timestamp == engine.TimestampLatest || offset < 0) {
				err = lagging
			}
			if err != nil {
				sp.ErrorCode = replErrorCode(err)
				if sp.ErrorCode == kerr.OffsetNotAvailable.Code && req.Version < 5 {
					// Kafka's answer to clients that predate the code.
					sp.ErrorCode = kerr.LeaderNotAvailable.Code
				}
			} else {
				sp.Offset, sp.Timestamp = offset, ts
				if offset >= 0 {
					sp.LeaderEpoch = epoch
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return immediate(resp)
}

// timestampLatestTiered is Kafka's LATEST_TIERED_TIMESTAMP (KIP-1005).
const timestampLatestTiered = -5

// latestTiered answers -5: the highest offset in the remote tier and the
// leader epoch of its batch, or -1s when nothing is tiered.
func latestTiered(img *metadata.Image, topic string, idx int32) (offset, ts int64, epoch int32) {
	t, ok := img.Topic(topic)
	if !ok {
		return -1, -1, -1
	}
	end := img.RemoteEnd(t.ID, idx)
	if end <= 0 || end <= img.RemoteLogStart(t.ID, idx) {
		return -1, -1, -1
	}
	epoch = -1
	if seg, ok := img.SegmentFor(t.ID, idx, end-1); ok {
		for _, e := range seg.Epochs {
			if e.StartOffset <= end-1 {
				epoch = e.Epoch
			}
		}
	}
	return end - 1, -1, epoch
}

// offsetForTimestamp answers a lookup by time: the remote tier first
// when it holds data (Kafka's order: its batches are the older ones),
// then the local log.
func (s *Server) offsetForTimestamp(img *metadata.Image, part *engine.Partition, topic string, idx int32, ts int64) (int64, int64, error) {
	if s.remote != nil {
		if t, ok := img.Topic(topic); ok && img.RemoteLogStart(t.ID, idx) >= 0 {
			ctx, cancel := context.WithTimeout(s.ctx, remoteReadMaxWait)
			off, at, found, err := s.remote.OffsetForTimestamp(ctx, t.ID, idx, ts)
			cancel()
			if err != nil {
				return -1, -1, err
			}
			// DeleteRecords may have raised the log start into the
			// remote range: an answer below it is not readable.
			if found && off >= part.Info().LogStartOffset {
				return off, at, nil
			}
		}
	}
	return part.OffsetForTimestamp(ts)
}
