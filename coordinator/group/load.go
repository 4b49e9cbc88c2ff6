package group

import (
	"errors"
	"fmt"
	"iter"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

// Snapshot is the state of one __consumer_offsets partition rebuilt from
// its records: what FinishLoad installs.
type Snapshot struct {
	Groups map[string]*LoadedGroup
	// Skipped counts records with key or value versions we do not model
	// (for example Kafka's own share-group records).
	Skipped int
}

// LoadedGroup is one group's last stored state. Metadata is nil for a
// "simple" group that only ever committed offsets.
type LoadedGroup struct {
	Metadata *GroupMetadata
	Offsets  map[TopicPartition]OffsetValue
	// Pending holds, by producer id, the transactional offset commits
	// whose transaction had no marker on the partition by the end of the
	// load. FinishLoad keeps them pending; CompleteTxn decides them.
	Pending map[int64]*LoadedTxn
	// Consumer is set for a KIP-848 consumer group (its records use key
	// versions 3-8); Metadata is then nil.
	Consumer *LoadedConsumerGroup
	// Share is set for a share (KIP-932) group; Metadata and Consumer
	// are then nil.
	Share *LoadedShareGroup

	// classicPos, consumerPos and sharePos are the load positions of the
	// last live classic metadata record, consumer record and share
	// record: if more than one kind of group is still live at the end,
	// the latest one wins.
	classicPos, consumerPos, sharePos uint64
	// orphanCurrent holds current-assignment records of consumer members
	// whose metadata record has not come (yet); Members lists only
	// members with metadata.
	orphanCurrent map[string]*ConsumerAssignmentRecord

	// pos is the load position (1-based record index) of the record behind
	// each entry of Offsets. A commit marker arriving after the load
	// compares it with the pending record's position: the later record
	// wins, as in Kafka. A hand-built LoadedGroup leaves it nil (all 0).
	pos map[TopicPartition]uint64
}

// LoadedShareGroup is a share group's last stored state: its epoch, its
// members, and the topics whose share-partition state was initialized.
type LoadedShareGroup struct {
	Epoch       int32
	Members     map[string]*ShareMemberRecord
	Initialized []TopicID
}

// LoadedTxn is one producer's open transaction in a group: the offsets it
// committed so far, each the last of its partition.
type LoadedTxn struct {
	ProducerEpoch int16
	Offsets       map[TopicPartition]OffsetValue

	pos map[TopicPartition]uint64 // as LoadedGroup.pos
}

// Load rebuilds every group of one partition from its records in log
// order: the last value per key wins and a tombstone deletes what its key
// named. A group tombstone removes only the metadata: its offsets have keys
// of their own and Kafka writes a tombstone for each. The partition may be
// compacted or not; the result is the same. A record that claims a known
// version but does not parse stops the load with ErrCorruptRecord, because
// guessing would silently move a group's offsets.
//
// Transactions (KV.Transactional, KV.Control) replay as in Kafka: an
// offset record of a transactional batch is pending for its producer until
// that producer's marker: COMMIT makes it the committed offset unless a
// record written later already set the partition, ABORT drops it. A
// tombstone drops the partition's pending offsets of every producer too
// (that is how OffsetDelete and DeleteGroups reach open transactions).
// Transactions still open at the end stay in LoadedGroup.Pending.
//
// Consumer-group records (key versions 3-8) build LoadedGroup.Consumer;
// share-group records build LoadedGroup.Share (applyShare); see
// settleType for a log that holds more than one type of a group.
func Load(records iter.Seq2[statelog.KV, error]) (*Snapshot, error) {
	s := &Snapshot{Groups: make(map[string]*LoadedGroup)}
	get := func(id string) *LoadedGroup {
		g := s.Groups[id]
		if g == nil {
			g = &LoadedGroup{
				Offsets: make(map[TopicPartition]OffsetValue),
				Pending: make(map[int64]*LoadedTxn),
				pos:     make(map[TopicPartition]uint64),
			}
			s.Groups[id] = g
		}
		return g
	}
	// open indexes the groups with pending offsets by producer, so a
	// marker costs the groups it touches, not every group.
	open := make(map[int64]map[string]bool)
	n := 0
	for kv, err := range records {
		if err != nil {
			return nil, fmt.Errorf("group: load: reading record %d: %w", n, err)
		}
		n++
		pos := uint64(n)
		if kv.Control != nil {
			for id := range open[kv.ProducerID] {
				s.Groups[id].endTxn(kv.ProducerID, kv.Control.Commit)
			}
			delete(open, kv.ProducerID)
			continue
		}
		rec, err := DecodeRecord(kv.Key, kv.Value)
		switch {
		case err == nil:
		case isUnknown(err):
			s.Skipped++
			continue
		default:
			return nil, fmt.Errorf("group: load: record %d: %w", n-1, err)
		}
		g := get(rec.GroupID)
		switch rec.Kind {
		case KindOffset:
			tp := TopicPartition{rec.OffsetKey.Topic, rec.OffsetKey.Partition}
			switch {
			case rec.Tombstone:
				delete(g.Offsets, tp)
				delete(g.pos, tp)
				for pid, t := range g.Pending {
					delete(t.Offsets, tp)
					if len(t.Offsets) == 0 {
						delete(g.Pending, pid)
					}
				}
			case kv.Transactional:
				t := g.Pending[kv.ProducerID]
				if t == nil {
					t = &LoadedTxn{Offsets: make(map[TopicPartition]OffsetValue), pos: make(map[TopicPartition]uint64)}
					g.Pending[kv.ProducerID] = t
					if open[kv.ProducerID] == nil {
						open[kv.ProducerID] = make(map[string]bool)
					}
					open[kv.ProducerID][rec.GroupID] = true
				}
				t.ProducerEpoch = kv.ProducerEpoch
				t.Offsets[tp] = *rec.Offset
				t.pos[tp] = pos
			default:
				g.Offsets[tp] = *rec.Offset
				g.pos[tp] = pos
			}
		case KindGroup:
			if rec.Tombstone {
				g.Metadata = nil
			} else {
				g.Metadata = rec.Group
				g.classicPos = pos
			}
		case KindShareGroup, KindShareMember, KindShareInitialized:
			g.applyShare(&rec, pos)
		default:
			g.applyConsumer(&rec, pos)
		}
	}
	for id, g := range s.Groups {
		g.settleType()
		if g.Metadata == nil && g.Consumer == nil && g.Share == nil && len(g.Offsets) == 0 && len(g.Pending) == 0 {
			delete(s.Groups, id)
		}
	}
	return s, nil
}

// applyConsumer replays one consumer-group record. Kafka writes a new
// member's metadata before the group epoch, so any live record brings the
// group into being; only the group-epoch tombstone (written last when
// Kafka deletes or converts a consumer group) ends it, and tombstones for
// a group that is gone are no-ops. Offsets are not touched: they have
// tombstones of their own.
func (g *LoadedGroup) applyConsumer(rec *Record, pos uint64) {
	if rec.Kind == KindConsumerPartitionMetadata {
		return // we resolve topics from the live cluster view
	}
	c := g.Consumer
	if rec.Tombstone {
		if c == nil {
			return
		}
		switch rec.Kind {
		case KindConsumerGroup:
			g.Consumer = nil
			g.consumerPos = 0
			g.orphanCurrent = nil
		case KindConsumerTarget:
			c.AssignmentEpoch = 0
		case KindConsumerMember:
			delete(c.Members, rec.MemberID)
		case KindConsumerTargetMember:
			delete(c.Target, rec.MemberID)
		case KindConsumerCurrent:
			if m := c.Members[rec.MemberID]; m != nil {
				m.Current = nil
			}
			delete(g.orphanCurrent, rec.MemberID)
		}
		return
	}
	if c == nil {
		c = &LoadedConsumerGroup{
			Members: make(map[string]*LoadedConsumerMember),
			Target:  make(map[string]Assignment),
		}
		g.Consumer = c
	}
	g.consumerPos = pos
	switch rec.Kind {
	case KindConsumerGroup:
		c.GroupEpoch = rec.ConsumerEpoch
	case KindConsumerTarget:
		c.AssignmentEpoch = rec.ConsumerEpoch
	case KindConsumerMember:
		m := c.Members[rec.MemberID]
		if m == nil {
			// A current assignment written before the metadata (not
			// Kafka's order, but harmless) joins its member now.
			m = &LoadedConsumerMember{Current: g.orphanCurrent[rec.MemberID]}
			delete(g.orphanCurrent, rec.MemberID)
			c.Members[rec.MemberID] = m
		}
		m.Metadata = *rec.ConsumerMember
	case KindConsumerTargetMember:
		c.Target[rec.MemberID] = rec.ConsumerTarget
	case KindConsumerCurrent:
		if m := c.Members[rec.MemberID]; m != nil {
			m.Current = rec.ConsumerCurrent
		} else {
			if g.orphanCurrent == nil {
				g.orphanCurrent = make(map[string]*ConsumerAssignmentRecord)
			}
			g.orphanCurrent[rec.MemberID] = rec.ConsumerCurrent
		}
	}
}

// applyShare replays one share-group record. As for consumer groups, any
// live record brings the group into being and only the group-epoch
// tombstone (written last by DeleteGroups) ends it.
func (g *LoadedGroup) applyShare(rec *Record, pos uint64) {
	sg := g.Share
	if rec.Tombstone {
		if sg == nil {
			return
		}
		switch rec.Kind {
		case KindShareGroup:
			g.Share, g.sharePos = nil, 0
		case KindShareMember:
			delete(sg.Members, rec.MemberID)
		case KindShareInitialized:
			sg.Initialized = nil
		}
		return
	}
	if sg == nil {
		sg = &LoadedShareGroup{Members: make(map[string]*ShareMemberRecord)}
		g.Share = sg
	}
	g.sharePos = pos
	switch rec.Kind {
	case KindShareGroup:
		sg.Epoch = rec.ShareEpoch
	case KindShareMember:
		sg.Members[rec.MemberID] = rec.ShareMember
	case KindShareInitialized:
		sg.Initialized = rec.ShareTopics
	}
}

// settleType leaves the group one type. Converting a group writes the old
// type's tombstones before the new type's records, so normally at most one
// is live; if a log holds more (a conversion cut short by a coordinator
// crash between its batches), the type whose last live record came last
// wins, because that is the state the coordinator was moving to.
func (g *LoadedGroup) settleType() {
	var last uint64
	if g.Metadata != nil {
		last = g.classicPos
	}
	if g.Consumer != nil {
		last = max(last, g.consumerPos)
	}
	if g.Share != nil {
		last = max(last, g.sharePos)
	}
	if g.Metadata != nil && g.classicPos < last {
		g.Metadata = nil
	}
	if g.Consumer != nil && g.consumerPos < last {
		g.Consumer = nil
	}
	if g.Share != nil && g.sharePos < last {
		g.Share = nil
	}
	g.orphanCurrent = nil
}

// endTxn applies producerID's marker to the group.
func (g *LoadedGroup) endTxn(producerID int64, commit bool) {
	t := g.Pending[producerID]
	if t == nil {
		return // emptied by tombstones meanwhile
	}
	delete(g.Pending, producerID)
	if !commit {
		return
	}
	for tp, v := range t.Offsets {
		if _, ok := g.Offsets[tp]; !ok || g.pos[tp] < t.pos[tp] {
			g.Offsets[tp] = v
			g.pos[tp] = t.pos[tp]
		}
	}
}

// Records lists a slice as the iterator Load takes.
func Records(kvs []statelog.KV) iter.Seq2[statelog.KV, error] {
	return func(yield func(statelog.KV, error) bool) {
		for _, kv := range kvs {
			if !yield(kv, nil) {
				return
			}
		}
	}
}

func isUnknown(err error) bool { return errors.Is(err, ErrUnknownRecord) }
