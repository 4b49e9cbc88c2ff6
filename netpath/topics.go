package netpath

import (
	"errors"
	"strings"

	"github.com/ringlog/ringlog/engine"
)

// partitionFor returns a partition, creating its topic first when the
// topic does not exist, autoCreate is requested and the broker allows it.
func (s *Server) partitionFor(topic string, partition int32, autoCreate bool) (*engine.Partition, error) {
	p, err := s.engine.Partition(topic, partition)
	if err == nil || !errors.Is(err, engine.ErrUnknownTopic) {
		return p, err
	}
	if _, exists := s.engine.Topic(topic); exists || !autoCreate {
		return nil, err
	}
	if _, err := s.autoCreate(topic); err != nil {
		return nil, err
	}
	return s.engine.Partition(topic, partition)
}

// autoCreate creates topic with the broker defaults, tolerating a
// concurrent creation of the same topic.
func (s *Server) autoCreate(topic string) (engine.TopicInfo, error) {
	if !s.cfg.AutoCreateTopics {
		return engine.TopicInfo{}, engine.ErrUnknownTopic
	}
	if err := engine.ValidateTopicName(topic); err != nil {
		return engine.TopicInfo{}, err
	}
	if isInternalTopic(topic) {
		return engine.TopicInfo{}, engine.ErrUnknownTopic
	}
	info, err := s.engine.CreateTopic(topic, s.cfg.DefaultPartitions, nil)
	if errors.Is(err, engine.ErrTopicExists) {
		if t, ok := s.engine.Topic(topic); ok {
			return t, nil
		}
	}
	if err == nil {
		s.log.Info("auto-created topic", "topic", topic, "partitions", info.Partitions)
	}
	return info, err
}

// isInternalTopic reports names reserved for the broker's own topics.
func isInternalTopic(name string) bool {
	return strings.HasPrefix(name, "__")
}

// topicByID finds a topic by its 16-byte id.
func (s *Server) topicByID(id [16]byte) (engine.TopicInfo, bool) {
	for _, t := range s.engine.Topics() {
		if t.ID == id {
			return t, true
		}
	}
	return engine.TopicInfo{}, false
}

// leaderEpoch is the partition leader epoch this broker reports. A single
// node never changes leaders, so it is 0 until replication arrives.
const leaderEpoch int32 = 0

// checkLeaderEpoch validates a client's current_leader_epoch (-1 = unset).
func checkLeaderEpoch(clientEpoch int32) int16 {
	switch {
	case clientEpoch == -1 || clientEpoch == leaderEpoch:
		return 0
	case clientEpoch > leaderEpoch:
		return kerrUnknownLeaderEpoch
	default:
		return kerrFencedLeaderEpoch
	}
}
