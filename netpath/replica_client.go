package netpath

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicaClient is replication.FetchClient over Kafka Fetch v12 (replica
// id set, LastFetchedEpoch and DivergingEpoch carried) to the leader's
// plaintext listener, as the metadata image advertises it. One connection
// per leader broker, used by that leader's one Fetcher goroutine.
type replicaClient struct {
	s *Server

	mu    sync.Mutex
	conns map[int32]*replicaConn
}

type replicaConn struct {
	s    *Server
	mu   sync.Mutex
	addr string
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

var replicaFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("ringlog-replica-fetcher"))

func (rc *replicaClient) addrOf(id int32) (string, error) {
	for _, b := range rc.s.node.MetadataImage().Brokers() {
		if b.ID != id {
			continue
		}
		for _, ep := range b.Endpoints {
			if ep.Listener == endpointPlaintext {
				return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), nil
			}
		}
	}
	return "", fmt.Errorf("broker %d has no %s endpoint in the metadata image", id, endpointPlaintext)
}

// Fetch implements replication.FetchClient.
func (rc *replicaClient) Fetch(ctx context.Context, leaderID int32, req *replication.FetchRequest) (*replication.FetchResponse, error) {
	addr, err := rc.addrOf(leaderID)
	if err != nil {
		return nil, err
	}
	rc.mu.Lock()
	c := rc.conns[leaderID]
	if c == nil {
		c = &replicaConn{s: rc.s}
		rc.conns[leaderID] = c
	}
	rc.mu.Unlock()

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
	body, err := c.roundTrip(ctx, addr, kr, req.MaxWait+10*time.Second)
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

// roundTrip sends req and returns the response body (after the header).
// Any error closes the connection; the next call redials.
func (c *replicaConn) roundTrip(ctx context.Context, addr string, req kmsg.Request, timeout time.Duration) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil && c.addr != addr {
		c.c.Close()
		c.c = nil
	}
	if c.c == nil {
		nc, br, err := c.s.dialBroker(ctx, addr)
		if err != nil {
			return nil, err
		}
		c.c, c.r, c.addr = nc, br, addr
	}
	fail := func(err error) ([]byte, error) {
		c.c.Close()
		c.c = nil
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Now()) })
	defer stop()
	c.corr++
	if _, err := c.c.Write(replicaFormatter.AppendRequest(nil, req, c.corr)); err != nil {
		return fail(err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return fail(err)
	}
	size := int32(binary.BigEndian.Uint32(hdr[:]))
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != c.corr {
		return fail(fmt.Errorf("correlation id %d, want %d", corr, c.corr))
	}
	if size < 4 || size > 256<<20 {
		return fail(fmt.Errorf("response size %d", size))
	}
	buf := make([]byte, size-4)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return fail(err)
	}
	if req.IsFlexible() {
		// Response header tagged fields: skip them.
		n, k := binary.Uvarint(buf)
		if k <= 0 {
			return fail(errors.New("bad response header tags"))
		}
		buf = buf[k:]
		for range n {
			_, k1 := binary.Uvarint(buf)
			if k1 <= 0 {
				return fail(errors.New("bad response header tag"))
			}
			l, k2 := binary.Uvarint(buf[k1:])
			if k2 <= 0 || uint64(len(buf)) < uint64(k1+k2)+l {
				return fail(errors.New("bad response header tag"))
			}
			buf = buf[uint64(k1+k2)+l:]
		}
	}
	return buf, nil
}
