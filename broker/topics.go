package broker

import (
	"strings"
	"sync/atomic"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/group"
)

// topicView is group.Topics over the metadata image: the consumer group
// protocol resolves subscriptions (names and regexes) and assignments
// (topic ids) through it. Images are immutable, so every call reads the
// current one without a lock; lookups are the image's map lookups.
type topicView struct {
	image func() *metadata.Image
	// all caches AllTopics for one image index: a regex subscription
	// reads the whole list, and the image changes far less often than
	// members heartbeat.
	all atomic.Pointer[topicList]
}

type topicList struct {
	index  uint64
	topics []group.TopicInfo
}

var _ group.Topics = (*topicView)(nil)

func topicInfo(t metadata.Topic) group.TopicInfo {
	return group.TopicInfo{Name: t.Name, ID: group.TopicID(t.ID), Partitions: int32(len(t.Partitions))}
}

// TopicByName implements group.Topics.
func (v *topicView) TopicByName(name string) (group.TopicInfo, bool) {
	img := v.image()
	if img == nil {
		return group.TopicInfo{}, false
	}
	t, ok := img.Topic(name)
	if !ok {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

// TopicByID implements group.Topics.
func (v *topicView) TopicByID(id group.TopicID) (group.TopicInfo, bool) {
	img := v.image()
	if img == nil {
		return group.TopicInfo{}, false
	}
	t, ok := img.TopicByID(metadata.UUID(id))
	if !ok {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

// AllTopics implements group.Topics: every topic but the internal ones
// ("__" prefix), sorted by name. The caller owns the returned slice.
func (v *topicView) AllTopics() []group.TopicInfo {
	img := v.image()
	if img == nil {
		return nil
	}
	l := v.all.Load()
	if l == nil || l.index != img.Index() {
		l = &topicList{index: img.Index()}
		for _, t := range img.Topics() {
			if !strings.HasPrefix(t.Name, "__") {
				l.topics = append(l.topics, topicInfo(t))
			}
		}
		v.all.Store(l)
	}
	return append([]group.TopicInfo(nil), l.topics...)
}
