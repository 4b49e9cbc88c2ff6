package peer

import (
	"context"
	"fmt"

	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/netpath/internal/proto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var markerFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID(proto.MarkerClientID))

// maxMarkerResponse bounds a WriteTxnMarkers response.
const maxMarkerResponse = 16 << 20

// TopicPartition names one partition of a marker write.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// WriteMarkers sends mk for tps to broker leader in one WriteTxnMarkers
// request (v1) and returns each partition's outcome, nil when written. A
// failed round trip is the returned error and no partition is known. The
// leader's errors come back as the engine's: producerstate's
// ErrProducerFenced, ErrInvalidProducerEpoch and
// ErrTransactionCoordinatorFenced (a newer coordinator acted),
// engine.ErrUnsupportedVersion; anything else is retriable for the caller.
func (c *Client) WriteMarkers(ctx context.Context, leader int32, mk producerstate.Marker, tps []TopicPartition) (map[TopicPartition]error, error) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	km := kmsg.NewWriteTxnMarkersRequestMarker()
	km.ProducerID, km.ProducerEpoch, km.Committed, km.CoordinatorEpoch = mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch
	for _, tp := range tps {
		if n := len(km.Topics); n == 0 || km.Topics[n-1].Topic != tp.Topic {
			kt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			kt.Topic = tp.Topic
			km.Topics = append(km.Topics, kt)
		}
		kt := &km.Topics[len(km.Topics)-1]
		kt.Partitions = append(kt.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, km)
	body, err := c.roundTrip(ctx, leader, markerFormatter, req, maxMarkerResponse, nil)
	if err != nil {
		return nil, fmt.Errorf("WriteTxnMarkers to broker %d: %w", leader, err)
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding WriteTxnMarkers response from broker %d: %w", leader, err)
	}
	codes := map[TopicPartition]int16{}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				codes[TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	out := make(map[TopicPartition]error, len(tps))
	for _, tp := range tps {
		code, ok := codes[tp]
		if !ok {
			code = kerr.UnknownServerError.Code
		}
		if err := markerCodeErr(code); err != nil {
			out[tp] = fmt.Errorf("broker %d: %w", leader, err)
		} else {
			out[tp] = nil
		}
	}
	return out, nil
}

// markerCodeErr maps a WriteTxnMarkers partition code to the error the
// leader's engine raised for it, so the marker writer treats a remote
// partition as it treats a local one.
func markerCodeErr(code int16) error {
	kErr := kerr.ErrorForCode(code)
	switch code {
	case 0:
		return nil
	case kerr.UnsupportedForMessageFormat.Code:
		return fmt.Errorf("%w: %w", engine.ErrUnsupportedVersion, kErr)
	case kerr.ProducerFenced.Code:
		return fmt.Errorf("%w: %w", producerstate.ErrProducerFenced, kErr)
	case kerr.InvalidProducerEpoch.Code:
		return fmt.Errorf("%w: %w", producerstate.ErrInvalidProducerEpoch, kErr)
	case kerr.TransactionCoordinatorFenced.Code:
		return fmt.Errorf("%w: %w", producerstate.ErrTransactionCoordinatorFenced, kErr)
	}
	return kErr
}
