package netpath

import (
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/share"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What ShareFetch (78) and ShareAcknowledge (79) share: the leader check
// of a partition named by topic id, acknowledgement decoding, and the
// read-and-acquire of one share-partition.

// shareTarget is one partition of a share request, checked to be led
// here.
type shareTarget struct {
	key  share.Key
	name string
	part *engine.Partition
	code int16 // non-zero: the partition's error
	// leader/epoch fill CurrentLeader with a NOT_LEADER_OR_FOLLOWER.
	leader, epoch int32
}

// shareTargetOf checks that this broker leads topicID/partition and may
// serve it to group's members (READ on the topic).
func (s *Server) shareTargetOf(r *request, img *metadata.Image, fresh error, group string, topicID [16]byte, partition int32) shareTarget {
	t := shareTarget{key: share.Key{Group: group, TopicID: topicID, Partition: partition}, leader: -1, epoch: -1}
	info, ok := img.TopicByID(metadata.UUID(topicID))
	if !ok {
		t.code = kerr.UnknownTopicID.Code
		return t
	}
	t.name = info.Name
	if !s.authorize(r, metadata.OpRead, metadata.ResourceTopic, t.name) {
		t.code = kerr.TopicAuthorizationFailed.Code
		return t
	}
	lc := s.leaderPartition(img, fresh, t.name, partition, -1)
	if lc.code != 0 {
		t.code = lc.code
		if lc.code != kerr.UnknownTopicOrPartition.Code {
			t.leader, t.epoch = lc.info.Leader, lc.info.LeaderEpoch
		}
		return t
	}
	t.part = lc.part
	// The state is read and written at this epoch: a deposed leader's
	// writes are refused once this one has taken it over.
	s.shares.Lead(share.TP{TopicID: topicID, Partition: partition}, lc.info.LeaderEpoch)
	return t
}

// maxShareAckBatches bounds the acknowledgement ranges of one partition
// in one request (the client sends one per run of a type).
const maxShareAckBatches = 100_000

// shareAcks converts one partition's acknowledgement batches; a batch
// with no types is INVALID_REQUEST (returned as share.ErrInvalidRequest
// by Acknowledge, which checks the rest).
func shareAcks[B kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch | kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch](batches []B) []share.Ack {
	out := make([]share.Ack, 0, len(batches))
	for _, b := range batches {
		// Both kmsg types have the same fields.
		kb := kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch(b)
		a := share.Ack{First: kb.FirstOffset, Last: kb.LastOffset, Types: make([]share.AckType, len(kb.AcknowledgeTypes))}
		for i, t := range kb.AcknowledgeTypes {
			a.Types[i] = share.AckType(t)
		}
		out = append(out, a)
	}
	return out
}

// shareRead is one share-partition's part of a ShareFetch answer.
type shareRead struct {
	records  []byte
	acquired []share.Lease
	code     int16
}

// readShare reads t from where its share-partition can acquire records
// and acquires up to maxRecords of them for member. version is the
// partition's change count taken before the read (for the long poll).
func (s *Server) readShare(t shareTarget, member string, maxBytes int32, maxRecords int, waker *engine.Waker, now time.Time) (out shareRead, version uint64) {
	version = waker.Seen(t.part)
	info := t.part.Info()
	b := share.Bounds{LogStart: info.LogStartOffset, HighWatermark: info.HighWatermark, LastStable: t.part.LastStableOffset()}
	offset, limit, ok := s.shares.NextOffset(t.key, b)
	if !ok {
		return out, version
	}
	gc := s.shares.GroupConfig(t.key.Group)
	var (
		res     engine.ReadResult
		aborted []producerstate.AbortedTxn
		err     error
	)
	if gc.ReadUncommitted {
		res, err = t.part.Read(offset, maxBytes, true)
	} else {
		res, aborted, err = t.part.ReadCommitted(offset, maxBytes, true)
	}
	if err != nil {
		out.code = errorCode(err)
		return out, version
	}
	defer res.Data.Release()
	n := res.Data.Len()
	if n == 0 {
		return out, version
	}
	buf := make([]byte, n)
	if _, err := res.Data.ReadAt(buf, res.Data.Pos()); err != nil {
		out.code = errorCode(err)
		return out, version
	}
	var (
		spans   []share.Span
		batches []records.Batch
	)
	records.Walk(buf, func(bt records.Batch) bool {
		spans = append(spans, share.Span{First: bt.BaseOffset, Last: bt.LastOffset(), Deliverable: !bt.IsControl() && !inAborted(bt.Header, aborted)})
		batches = append(batches, bt)
		return true
	})
	out.acquired = s.shares.Acquire(t.key, member, spans, maxRecords, limit, now)
	if len(out.acquired) == 0 {
		return out, version
	}
	// Send the batches that hold acquired records, whole.
	for _, bt := range batches {
		if overlaps(bt.BaseOffset, bt.LastOffset(), out.acquired) {
			out.records = append(out.records, bt.Raw...)
		}
	}
	return out, version
}

// inAborted reports whether h is a transactional batch of an aborted
// transaction (read_committed leaves those out).
func inAborted(h records.Header, aborted []producerstate.AbortedTxn) bool {
	if !h.IsTransactional() {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

func overlaps(first, last int64, ls []share.Lease) bool {
	for _, l := range ls {
		if l.First <= last && first <= l.Last {
			return true
		}
	}
	return false
}
