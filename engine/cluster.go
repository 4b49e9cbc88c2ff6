package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// This file is the engine's side of clustering: the broker reconciles the
// engine with the controller's metadata image (SyncTopic, DeleteTopic) and
// stamps the image's leader epoch into appends (SetLeaderEpoch). In a
// cluster topics.json is only a local cache of which logs exist here, so
// Open can load them before the image is available; the image decides.

// TopicSpec is what a broker should hold locally for one topic.
type TopicSpec struct {
	Name string
	// ID is the topic id from the image. A local topic of the same name
	// with another id is an older incarnation: its logs are deleted.
	ID [16]byte
	// Partitions is the topic's total partition count.
	Partitions int32
	// Hosted lists the partitions with a replica on this broker; only
	// they get local logs. Logs of other partitions are deleted.
	Hosted []int32
	// Configs are the topic's explicit overrides (Kafka key names).
	Configs map[string]string
}

// SyncTopic makes the local state of one topic match spec: creates the
// topic and logs that are missing, deletes logs of partitions not hosted
// here (and of an older topic with the same name), and updates the config.
// It writes topics.json only when something changed.
func (e *Engine) SyncTopic(spec TopicSpec) error {
	if err := ValidateTopicName(spec.Name); err != nil {
		return err
	}
	if spec.Partitions <= 0 {
		return fmt.Errorf("%w: %d", ErrInvalidPartitions, spec.Partitions)
	}
	cfg, err := ParseTopicConfig(e.Defaults(), spec.Configs)
	if err != nil {
		return err
	}
	want := make([]bool, spec.Partitions)
	for _, i := range spec.Hosted {
		if i < 0 || i >= spec.Partitions {
			return fmt.Errorf("%w: hosted partition %d of %d", ErrInvalidPartitions, i, spec.Partitions)
		}
		want[i] = true
	}

	var drop []*Partition
	defer func() { e.dropPartitions(drop) }() // after e.mu is released
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return ErrClosed
	}
	changed := false
	t, ok := e.topics[spec.Name]
	if ok && t.id != spec.ID {
		// Deleted and re-created while this broker was not looking.
		delete(e.topics, spec.Name)
		drop = append(drop, t.parts...)
		ok, changed = false, true
	}
	if !ok {
		t = &topicState{name: spec.Name, id: spec.ID, cfg: cfg}
		e.topics[spec.Name] = t
		changed = true
	}
	t.mu.Lock()
	if !maps.Equal(t.cfg.overrides, cfg.overrides) {
		t.cfg = cfg
		changed = true
	} else if !sameValues(t.cfg, cfg) {
		// Same overrides over changed broker defaults: nothing to
		// persist (topics.json holds overrides only).
		t.cfg = cfg
	}
	if int32(len(t.parts)) > spec.Partitions {
		// Partitions never shrink in Kafka; an image that says so wins.
		drop = append(drop, t.parts[spec.Partitions:]...)
		t.parts = slices.Clone(t.parts[:spec.Partitions])
		changed = true
	}
	for int32(len(t.parts)) < spec.Partitions {
		t.parts = append(t.parts, nil)
		changed = true
	}
	t.mu.Unlock()
	now := time.Now().UnixMilli()
	for i, w := range want {
		t.mu.RLock()
		p := t.parts[i]
		t.mu.RUnlock()
		switch {
		case w && p == nil:
			np, err := e.createPartition(t, int32(i), now)
			if err != nil {
				return err
			}
			t.mu.Lock()
			t.parts[i] = np
			t.mu.Unlock()
			changed = true
		case !w && p != nil:
			t.mu.Lock()
			t.parts[i] = nil
			t.mu.Unlock()
			drop = append(drop, p)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := e.fs.SyncDir(e.cfg.Dir); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := e.saveMetaLocked(); err != nil {
		return fmt.Errorf("%w: saving topic metadata: %v", ErrStorage, err)
	}
	return nil
}

// Hosted returns the partitions of topic with a local log, ascending.
func (e *Engine) Hosted(topic string) []int32 {
	e.mu.RLock()
	t, ok := e.topics[topic]
	e.mu.RUnlock()
	if !ok {
		return nil
	}
	return t.hosted()
}

// ParseConfig parses topic config overrides over this engine's defaults
// (the broker's log.* settings and dynamic broker configs), as CreateTopic
// would.
func (e *Engine) ParseConfig(kv map[string]string) (TopicConfig, error) {
	return ParseTopicConfig(e.Defaults(), kv)
}

// SetLeaderEpoch sets the leader epoch stamped into batches appended from
// now on (partitionLeaderEpoch, outside the CRC). The broker sets it from
// the metadata image whenever the partition's leadership changes.
func (p *Partition) SetLeaderEpoch(epoch int32) {
	p.mu.Lock()
	p.leaderEpoch = epoch
	p.mu.Unlock()
}

// LeaderEpoch returns the epoch appends are stamped with.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leaderEpoch
}
