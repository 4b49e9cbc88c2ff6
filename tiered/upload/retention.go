package upload

import (
	"fmt"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
)

// retention applies the topic's retention.ms and retention.bytes to the
// remote copy, in the order metadata/remote.go requires: raise the
// remote log start (expiring the segments below it), delete the expired
// segments' objects, then remove them from the metadata. It also
// finishes the expired segments a previous leader left listed.
func (t *task) retention(p *engine.Partition) error {
	ti, ok := t.m.eng.Topic(t.topic)
	if !ok {
		return nil
	}
	img := t.m.meta.MetadataImage()
	start := img.RemoteLogStart(t.tid, t.part)
	if newStart := retentionStart(img.RemoteSegments(t.tid, t.part), start, img.RemoteEnd(t.tid, t.part), p, ti.Config, time.Now().UnixMilli()); newStart > start {
		ctx, cancel := t.m.opCtx(t.ctx)
		err := t.m.meta.DeleteRemoteSegments(ctx, t.tid, t.part, t.epoch, nil, newStart)
		cancel()
		if err != nil {
			return stopOn(fmt.Errorf("expiring remote segments below %d: %w", newStart, err))
		}
		img = t.m.meta.MetadataImage()
	}
	expired := img.ExpiredRemoteSegments(t.tid, t.part)
	for len(expired) > 0 {
		chunk := expired[:min(len(expired), metadata.MaxRemoteDeleteIDs)]
		expired = expired[len(chunk):]
		ids := make([]rlm.SegmentID, len(chunk))
		for i := range chunk {
			ids[i] = chunk[i].ID
			if err := t.m.deleteKeys(segmentKeys(&chunk[i])); err != nil {
				return fmt.Errorf("deleting expired remote segment %s: %w", chunk[i].ID, err)
			}
		}
		ctx, cancel := t.m.opCtx(t.ctx)
		err := t.m.meta.DeleteRemoteSegments(ctx, t.tid, t.part, t.epoch, ids, img.RemoteLogStart(t.tid, t.part))
		cancel()
		if err != nil {
			return stopOn(fmt.Errorf("removing %d expired remote segments: %w", len(ids), err))
		}
		t.m.segmentsDeleted.Add(int64(len(ids)))
	}
	return nil
}

// segmentKeys are the object keys of every kind of one segment.
func segmentKeys(s *rlm.Segment) []string {
	keys := make([]string, len(objectKinds))
	for i, k := range objectKinds {
		keys[i] = rlm.ObjectKey(s, k)
	}
	return keys
}

// retentionStart is the remote log start retention asks for: past every
// leading segment whose newest record is older than retention.ms, and
// past the oldest segments while the whole log (the remote segments plus
// the local bytes not in the remote tier, as Kafka counts it) stays at or
// above retention.bytes without them. segs is sorted by base offset.
func retentionStart(segs []rlm.Segment, start, end int64, p *engine.Partition, cfg engine.TopicConfig, nowMs int64) int64 {
	newStart := start
	if cfg.RetentionMs >= 0 {
		for _, s := range segs {
			if s.NextOffset <= newStart {
				continue
			}
			if s.MaxTimestamp < 0 || nowMs-s.MaxTimestamp <= cfg.RetentionMs {
				break
			}
			newStart = s.NextOffset
		}
	}
	if cfg.RetentionBytes >= 0 && end >= 0 {
		total := p.LocalBytesFrom(end)
		for _, s := range segs {
			if s.NextOffset > newStart {
				total += s.SizeBytes
			}
		}
		for _, s := range segs {
			if s.NextOffset <= newStart {
				continue
			}
			if total-s.SizeBytes < cfg.RetentionBytes {
				break
			}
			total -= s.SizeBytes
			newStart = s.NextOffset
		}
	}
	return newStart
}
