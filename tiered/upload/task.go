package upload

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/epochcache"
)

// objectKinds are the objects of one uploaded segment, in upload order.
var objectKinds = []string{"log", "index", "timeindex", "producers", "epochs"}

// errStop ends a task: its leadership is fenced or its topic is gone. A
// new image starts a new task if this broker leads again.
var errStop = errors.New("upload task stopped")

// task uploads one partition at one leader epoch. Its fields after the
// atomics are used by its goroutine only.
type task struct {
	m     *Manager
	topic string
	tid   metadata.UUID
	part  int32
	epoch int32

	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	stalled               atomic.Bool
	lagBytes, lagSegments atomic.Int64

	failures int  // consecutive failed rounds
	swept    bool // the orphan sweep succeeded once
}

func (t *task) start() {
	t.ctx, t.cancel = context.WithCancel(t.m.ctx)
	t.wake = make(chan struct{}, 1)
	t.m.wg.Add(1)
	go t.run()
}

func (t *task) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *task) String() string { return fmt.Sprintf("%s-%d@%d", t.topic, t.part, t.epoch) }

func (t *task) run() {
	defer t.m.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.wake:
		case <-timer.C:
		}
		delay, stop := t.round()
		if stop {
			t.stalled.Store(false)
			t.lagBytes.Store(0)
			t.lagSegments.Store(0)
			return
		}
		timer.Reset(delay)
	}
}

// round does one pass: the orphan sweep (until it succeeds once), remote
// retention, then uploads. It returns when to run again, or stop.
func (t *task) round() (time.Duration, bool) {
	img := t.m.meta.MetadataImage()
	if p, ok := img.Partition(t.topic, t.part); !ok || p.Leader != t.m.cfg.BrokerID || p.LeaderEpoch != t.epoch {
		// The image moved on (the broker's Reconcile stops this task),
		// or it lags the one that started it: wait either way.
		return t.m.cfg.Interval, false
	}
	p, err := t.m.eng.Partition(t.topic, t.part)
	if err != nil {
		return t.m.cfg.Interval, false
	}
	if !t.swept {
		if err := t.sweep(img); err == nil {
			t.swept = true
		} else if t.ctx.Err() == nil {
			t.m.log.Debug("orphan sweep failed; retried next round", "partition", t, "err", err)
		}
	}
	retErr := t.retention(p)
	upErr := t.uploadAll(p)
	err = errors.Join(upErr, retErr)
	switch {
	case t.ctx.Err() != nil:
		return 0, true
	case errors.Is(err, errStop):
		t.m.log.Info("remote uploads stopped for this leadership", "partition", t, "err", err)
		return 0, true
	case err != nil:
		return t.failed(p, err), false
	}
	if t.stalled.CompareAndSwap(true, false) {
		t.m.log.Info("remote uploads recovered", "partition", t, "failed_rounds", t.failures)
	}
	t.failures = 0
	return t.m.cfg.Interval, false
}

// failed counts a failed round, logs the first of a run, and returns the
// backoff: MinBackoff doubling to MaxBackoff, less up to a quarter of
// jitter so partitions that failed together spread their retries.
func (t *task) failed(p *engine.Partition, err error) time.Duration {
	t.m.uploadErrors.Add(1)
	t.failures++
	if t.stalled.CompareAndSwap(false, true) {
		t.m.log.Warn("remote uploads failing: local segments stay until they are uploaded; retrying with backoff",
			"partition", t, "err", err, "held_back_bytes", p.UploadHeldBackBytes(), "lag_bytes", t.lagBytes.Load())
	}
	return t.m.backoff(t.failures)
}

// backoff is the delay after the n-th consecutive failure (n >= 1).
func (m *Manager) backoff(n int) time.Duration {
	d := m.cfg.MinBackoff
	for i := 1; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, m.cfg.MaxBackoff)
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

// uploadAll uploads the partition's sealed segments above the remote end
// in order, listing again (a bounded number of times per round) when a
// commit or a truncation says the listing is stale.
func (t *task) uploadAll(p *engine.Partition) error {
	for range 4 {
		img := t.m.meta.MetadataImage()
		after := max(img.RemoteEnd(t.tid, t.part), img.RemoteLogStart(t.tid, t.part))
		infos := p.UploadableSegments(after)
		relist, err := t.uploadList(p, infos)
		if err != nil || !relist {
			return err
		}
	}
	return nil
}

// uploadList uploads infos in order and releases all of them.
func (t *task) uploadList(p *engine.Partition, infos []engine.SegmentInfo) (relist bool, err error) {
	defer func() {
		for i := range infos {
			infos[i].Release()
		}
	}()
	var lag int64
	for _, si := range infos {
		lag += si.Size
	}
	t.lagBytes.Store(lag)
	t.lagSegments.Store(int64(len(infos)))
	for i := range infos {
		if err := t.ctx.Err(); err != nil {
			return false, err
		}
		relist, err := t.uploadOne(p, &infos[i], i == 0)
		infos[i].Release()
		if err != nil || relist {
			return relist, err
		}
		t.lagBytes.Add(-infos[i].Size)
		t.lagSegments.Add(-1)
	}
	return false, nil
}

// uploadOne puts one segment's objects and commits it. relist says the
// listing is stale (a truncation, or the range was covered meanwhile).
func (t *task) uploadOne(p *engine.Partition, si *engine.SegmentInfo, first bool) (relist bool, err error) {
	select {
	case t.m.sem <- struct{}{}:
	case <-t.ctx.Done():
		return false, t.ctx.Err()
	}
	// The slot bounds the streams to the store; it is given back before
	// the commit, which may wait on a slow controller.
	held := true
	unslot := func() {
		if held {
			held = false
			<-t.m.sem
		}
	}
	defer unslot()

	seg := rlm.Segment{
		TopicID: t.tid, Partition: t.part, BaseOffset: si.BaseOffset, NextOffset: si.NextOffset,
		MaxTimestamp: si.MaxTimestamp, SizeBytes: si.Size, LeaderEpoch: t.epoch, Epochs: si.Epochs,
	}
	if _, err := crand.Read(seg.ID[:]); err != nil {
		return false, fmt.Errorf("segment id: %w", err)
	}
	var put []string
	// discard deletes this attempt's objects: only for attempts known
	// never to be committed. What it cannot delete the sweep finds.
	discard := func() {
		if err := t.m.deleteKeys(put); err != nil {
			t.m.log.Debug("deleting an abandoned upload's objects failed; left to the sweep", "partition", t, "segment", seg.ID, "err", err)
		}
	}
	putObj := func(kind string, r io.Reader, size int64) error {
		key := rlm.ObjectKey(&seg, kind)
		ctx, cancel := t.m.putCtx(t.ctx, size)
		defer cancel()
		put = append(put, key) // before the call: a failed Put may have stored it
		if err := t.m.store.Put(ctx, key, t.m.pace.reader(ctx, r), size); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		return nil
	}
	fail := func(err error) (bool, error) {
		discard()
		return false, err
	}

	if err := putObj("log", si.Log(), si.Size); err != nil {
		return fail(err)
	}
	// After the log: the indexes check the segment was not truncated
	// while it streamed.
	ib, tb, err := si.Indexes()
	if errors.Is(err, engine.ErrSegmentChanged) {
		discard()
		return true, nil
	}
	if err != nil {
		return fail(err)
	}
	snap, err := si.ProducerSnapshot()
	if err != nil {
		return fail(err)
	}
	img := t.m.meta.MetadataImage()
	epochs := rlm.EncodeEpochs(epochHistory(img.RemoteSegments(t.tid, t.part), p.EpochEntries(), si.NextOffset))
	for _, o := range []struct {
		kind string
		b    []byte
	}{{"index", ib}, {"timeindex", tb}, {"producers", snap}, {"epochs", epochs}} {
		if err := putObj(o.kind, bytes.NewReader(o.b), int64(len(o.b))); err != nil {
			return fail(err)
		}
	}

	unslot()
	ctx, cancel := t.m.opCtx(t.ctx)
	err = t.m.meta.CommitRemoteSegment(ctx, seg)
	cancel()
	switch {
	case err == nil:
		t.m.segmentsUploaded.Add(1)
		t.m.bytesUploaded.Add(seg.SizeBytes)
		return false, nil
	case errors.Is(err, metadata.ErrRemoteSegmentCommitted):
		// Done, by this attempt (a retried commit) or by another leader.
		if !t.m.meta.MetadataImage().HasRemoteSegment(t.tid, t.part, seg.ID) {
			discard()
		}
		return true, nil
	case errors.Is(err, metadata.ErrFencedLeaderEpoch), errors.Is(err, metadata.ErrUnknownTopic):
		discard()
		return false, fmt.Errorf("%w: commit of [%d, %d): %w", errStop, seg.BaseOffset, seg.NextOffset, err)
	case errors.Is(err, metadata.ErrRemoteSegmentGap):
		discard()
		if first {
			return true, t.skipGap(p, &seg)
		}
		return true, nil
	case errors.Is(err, metadata.ErrInvalidCommand):
		discard() // refused for good: a bug, retried with backoff so it shows
		return false, fmt.Errorf("commit of [%d, %d) refused: %w", seg.BaseOffset, seg.NextOffset, err)
	default:
		// The controller is unavailable, or the answer was lost: the
		// commit may still be applied, so the objects stay (the sweep
		// deletes them if it was not).
		return false, fmt.Errorf("commit of [%d, %d): %w", seg.BaseOffset, seg.NextOffset, err)
	}
}

// skipGap handles a gap nothing local can fill: the local log starts
// above the remote tier's end (DeleteRecords, or local data lost), so the
// offsets between are gone from the log. It raises the remote log start
// to the local one, which lets the next commit start there. A gap the
// local log does hold is filled by listing again.
func (t *task) skipGap(p *engine.Partition, seg *rlm.Segment) error {
	img := t.m.meta.MetadataImage()
	covered := max(img.RemoteEnd(t.tid, t.part), img.RemoteLogStart(t.tid, t.part))
	local := p.LocalLogStartOffset()
	if local <= covered || local < seg.BaseOffset {
		return nil
	}
	t.m.log.Warn("remote tier ends below the local log start; raising the remote log start over the missing range",
		"partition", t, "remote_end", covered, "local_log_start", local)
	ctx, cancel := t.m.opCtx(t.ctx)
	defer cancel()
	if err := t.m.meta.DeleteRemoteSegments(ctx, t.tid, t.part, t.epoch, nil, local); err != nil {
		return stopOn(fmt.Errorf("raising the remote log start to %d: %w", local, err))
	}
	return nil
}

// stopOn marks the errors after which this leadership cannot go on.
func stopOn(err error) error {
	if errors.Is(err, metadata.ErrFencedLeaderEpoch) || errors.Is(err, metadata.ErrUnknownTopic) {
		return fmt.Errorf("%w: %w", errStop, err)
	}
	return err
}

// epochHistory is the partition's leader-epoch history below next: what
// the committed segments recorded (older than the local log, whose epoch
// cache was trimmed with it), then the local cache's entries.
func epochHistory(remote []rlm.Segment, local []epochcache.Entry, next int64) []epochcache.Entry {
	var out []epochcache.Entry
	add := func(e epochcache.Entry) {
		if e.StartOffset >= next {
			return
		}
		if n := len(out); n > 0 && (e.Epoch <= out[n-1].Epoch || e.StartOffset < out[n-1].StartOffset) {
			return // known already, from an earlier start (or inconsistent: the earlier history wins)
		}
		out = append(out, e)
	}
	for _, s := range remote {
		for _, e := range s.Epochs {
			add(e)
		}
	}
	for _, e := range local {
		add(e)
	}
	return out
}
