package upload

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
)

// purger deletes the objects of deleted topics while this broker hosts
// the active controller, then reports each topic purged.
func (m *Manager) purger() {
	defer m.wg.Done()
	timer := time.NewTimer(m.cfg.Interval)
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.purgeWake:
		case <-timer.C:
		}
		delay := m.cfg.Interval
		if err := m.purgeOnce(); err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.uploadErrors.Add(1)
			if failures++; failures == 1 {
				m.log.Warn("purging deleted topics' remote objects is failing; retrying with backoff", "err", err)
			}
			delay = m.backoff(failures)
		} else if failures > 0 {
			m.log.Info("purging deleted topics' remote objects recovered", "failed_attempts", failures)
			failures = 0
		}
		timer.Reset(delay)
	}
}

// purgeOnce purges every topic the image lists as pending, if this
// broker is the controller's.
func (m *Manager) purgeOnce() error {
	if m.meta.Controller() != m.cfg.BrokerID {
		return nil
	}
	for _, id := range m.meta.MetadataImage().PendingRemotePurge() {
		if err := m.purgeTopic(id); err != nil {
			return fmt.Errorf("topic id %s: %w", hex.EncodeToString(id[:]), err)
		}
	}
	return nil
}

// purgeTopic deletes every object under the topic id's prefix. An upload
// racing with it (a leader that has not seen the deletion) fails its
// commit with ErrUnknownTopic and deletes its own objects.
func (m *Manager) purgeTopic(id metadata.UUID) error {
	prefix := hex.EncodeToString(id[:]) + "/"
	ctx, cancel := m.opCtx(m.ctx)
	objs, err := m.store.List(ctx, prefix)
	cancel()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := m.deleteKeys([]string{o.Key}); err != nil {
			return err
		}
		if strings.HasSuffix(o.Key, ".log") {
			m.segmentsDeleted.Add(1)
		}
	}
	ctx, cancel = m.opCtx(m.ctx)
	defer cancel()
	if err := m.meta.RemoteTopicPurged(ctx, id); err != nil {
		return err
	}
	m.log.Info("purged the remote objects of a deleted topic", "topic_id", hex.EncodeToString(id[:]), "objects", len(objs))
	return nil
}

// sweep deletes the partition's orphans: objects whose segment id the
// metadata does not list and whose base offset is below the remote end,
// so no commit can make them visible any more (only this task's leader
// epoch may commit, and it has not uploaded anything yet). They are left
// by a broker that crashed mid-upload, a deposed leader's late upload, or
// a commit whose answer was lost. Objects at or above the remote end may
// still be committed by nobody but this task; a later sweep gets them.
func (t *task) sweep(img *metadata.Image) error {
	prefix := fmt.Sprintf("%s/%d/", hex.EncodeToString(t.tid[:]), t.part)
	ctx, cancel := t.m.opCtx(t.ctx)
	objs, err := t.m.store.List(ctx, prefix)
	cancel()
	if err != nil {
		return err
	}
	listed := map[rlm.SegmentID]bool{}
	for _, s := range img.RemoteSegments(t.tid, t.part) {
		listed[s.ID] = true
	}
	end := img.RemoteEnd(t.tid, t.part)
	var orphans []string
	for _, o := range objs {
		base, id, ok := parseObjectName(strings.TrimPrefix(o.Key, prefix))
		if !ok || listed[id] || base >= end {
			continue // not ours to judge, committed, or possibly still to be
		}
		orphans = append(orphans, o.Key)
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := t.m.deleteKeys(orphans); err != nil {
		return err
	}
	t.m.log.Info("deleted orphaned remote objects", "partition", t, "objects", len(orphans))
	return nil
}

// parseObjectName splits the last part of an rlm.ObjectKey,
// "<base>-<id>.<kind>", refusing anything else.
func parseObjectName(name string) (base int64, id rlm.SegmentID, ok bool) {
	b, rest, ok1 := strings.Cut(name, "-")
	hexID, kind, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(hexID) != 2*len(id) || !isKind(kind) {
		return 0, id, false
	}
	base, err := strconv.ParseInt(b, 10, 64)
	if err != nil || base < 0 {
		return 0, id, false
	}
	if _, err := hex.Decode(id[:], []byte(hexID)); err != nil {
		return 0, id, false
	}
	return base, id, true
}

func isKind(k string) bool {
	for _, o := range objectKinds {
		if k == o {
			return true
		}
	}
	return false
}
