package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Follower fetches are Kafka Fetch v12 (replica id set, LastFetchedEpoch
// and DivergingEpoch carried) to the leader's plaintext listener, as the
// metadata image advertises it. Each leader has one Fetcher goroutine, so
// one pooled connection per leader carries them.

var replicaFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("ringlog-replica-fetcher"))

// maxFetchResponse bounds a replica fetch response.
const maxFetchResponse = 256 << 20

var _ replication.FetchClient = (*Client)(nil)

// Fetch implements replication.FetchClient.
func (c *Client) Fetch(ctx context.Context, leaderID int32, req *replication.FetchRequest) (*replication.FetchResponse, error) {
	kr := kmsg.NewPtrFetchRequest()
	kr.Version = 12
	kr.ReplicaID = req.ReplicaID
	kr.MaxWaitMillis = int32(req.MaxWait / time.Millisecond)
	kr.MinBytes = req.MinBytes
	kr.MaxBytes = req.MaxBytes
	kr.SessionEpoch = -1
	byTopic := map[string]int{}
	for _, p := range req.Partitions {
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(kr.Topics)
			byTopic[p.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.Topic
			t.TopicID = p.TopicID
			kr.Topics = append(kr.Topics, t)
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p.Partition
		fp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
		fp.FetchOffset = p.FetchOffset
		fp.LastFetchedEpoch = p.LastFetchedEpoch
		fp.LogStartOffset = p.LogStartOffset
		fp.PartitionMaxBytes = p.MaxBytes
		kr.Topics[i].Partitions = append(kr.Topics[i].Partitions, fp)
	}
	ctx, cancel := context.WithTimeout(ctx, req.MaxWait+10*time.Second)
	defer cancel()
	body, err := c.roundTrip(ctx, leaderID, replicaFormatter, kr, maxFetchResponse)
	if err != nil {
		return nil, err
	}
	kresp := kmsg.NewPtrFetchResponse()
	kresp.Version = 12
	if err := kresp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding fetch response from broker %d: %w", leaderID, err)
	}
	if kresp.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch from broker %d: %w", leaderID, kerr.ErrorForCode(kresp.ErrorCode))
	}
	ids := map[string][16]byte{}
	for _, p := range req.Partitions {
		ids[p.Topic] = p.TopicID
	}
	out := &replication.FetchResponse{}
	for _, t := range kresp.Topics {
		for _, p := range t.Partitions {
			r := replication.FetchPartitionResponse{
				TopicPartition: replication.TopicPartition{Topic: t.Topic, TopicID: ids[t.Topic], Partition: p.Partition},
				Err:            fetchCodeErr(p.ErrorCode),
				HighWatermark:  p.HighWatermark,
				LogStartOffset: p.LogStartOffset,
				Records:        p.RecordBatches,
			}
			if p.DivergingEpoch.Epoch >= 0 && p.DivergingEpoch.EndOffset >= 0 {
				r.DivergingEpoch = &replication.EpochEndOffset{Epoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset}
			}
			out.Partitions = append(out.Partitions, r)
		}
	}
	return out, nil
}

// fetchCodeErr maps a partition error code of a fetch response to
// replication's errors, which the Fetcher acts on.
func fetchCodeErr(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotLeaderForPartition.Code:
		return replication.ErrNotLeaderOrFollower
	case kerr.FencedLeaderEpoch.Code:
		return replication.ErrFencedLeaderEpoch
	case kerr.UnknownLeaderEpoch.Code:
		return replication.ErrUnknownLeaderEpoch
	case kerr.OffsetOutOfRange.Code:
		return replication.ErrOffsetOutOfRange
	case kerr.UnknownTopicOrPartition.Code:
		return replication.ErrUnknownTopicOrPartition
	case kerr.KafkaStorageError.Code:
		return replication.ErrStorage
	}
	return kerr.ErrorForCode(code)
}
