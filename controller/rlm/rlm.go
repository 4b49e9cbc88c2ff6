// Package rlm holds the remote-log metadata types: what the controller
// replicates about each uploaded segment. Of ringlog it imports only the
// leader-epoch entry type (engine/epochcache), so the metadata image and
// the uploader share it, and the engine needs none of it.
package rlm

import (
	"encoding/hex"
	"fmt"

	"github.com/ringlog/ringlog/engine/epochcache"
)

// SegmentID names one uploaded copy of a segment. A new id per upload
// attempt keeps a retried or duplicated upload from overwriting objects a
// committed segment points at.
type SegmentID [16]byte

func (id SegmentID) String() string { return hex.EncodeToString(id[:]) }

// Segment is one uploaded segment as the metadata records it. It becomes
// visible to readers (and lets local retention delete the local copy)
// only once the controller committed it.
type Segment struct {
	ID        SegmentID
	TopicID   [16]byte
	Partition int32
	// BaseOffset is the first offset; NextOffset the offset after the
	// last record (exclusive), as in the engine's segments.
	BaseOffset int64
	NextOffset int64
	// MaxTimestamp (ms) drives time retention of the remote copy.
	MaxTimestamp int64
	// SizeBytes is the size of the segment's log object, for
	// retention.bytes and the remote-size metric.
	SizeBytes int64
	// LeaderEpoch is the epoch of the leader that uploaded it: the
	// controller refuses a commit from a leader that has been replaced.
	LeaderEpoch int32
	// Epochs are the leader-epoch entries covering [BaseOffset,
	// NextOffset), for OffsetForLeaderEpoch below the local log.
	Epochs []epochcache.Entry
}

// ObjectKey returns the object key of one of a segment's files: kind is
// "log", "index", "timeindex", "producers" (producer-state snapshot at
// NextOffset) or "epochs" (the leader-epoch entries). Keys spread by topic
// id and partition, then base offset (zero-padded so listings sort), then
// the segment id.
func ObjectKey(s *Segment, kind string) string {
	return fmt.Sprintf("%s/%d/%020d-%s.%s", hex.EncodeToString(s.TopicID[:]), s.Partition, s.BaseOffset, s.ID, kind)
}
