package netpath

import (
	"errors"

	"github.com/ringlog/ringlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errorCode maps an internal error to the Kafka error code a client sees.
// It is the only place where engine (and later replication and coordinator)
// errors become protocol codes.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var kErr *kerr.Error
	if errors.As(err, &kErr) {
		return kErr.Code
	}
	switch {
	case errors.Is(err, engine.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, engine.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, engine.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, engine.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, engine.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, engine.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, engine.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, engine.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, engine.ErrUnsupportedVersion):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, engine.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, engine.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownServerError.Code
}

// errorMessage returns a message worth sending next to a code, or nil.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

var (
	kerrUnknownLeaderEpoch = kerr.UnknownLeaderEpoch.Code
	kerrFencedLeaderEpoch  = kerr.FencedLeaderEpoch.Code
)
