package metadata

// Remote-log metadata (tiered storage): which segments of a
// partition are in the object store. It is the source of truth for the
// remote tier: a segment is readable remotely, and its local copy may be
// deleted, only once CommitRemoteSegment has been applied here.
//
// Why the controller and not a compacted internal topic (Kafka's
// __remote_log_metadata, KIP-405's default RLMM): ringlog already has a
// replicated, snapshotted state machine that every broker follows and
// that already holds each partition's leader epoch. Putting the metadata
// in it gives, in one deterministic apply, what KIP-405 builds with a
// topic, a consumer per broker and a local materialised cache: fencing of
// a deposed leader's late upload against the partition's current leader
// epoch (the epoch and the segment list live in the same image, so no
// race between "who leads" and "what is committed"), gap and duplicate
// checks, snapshots (the FSM snapshot), a read-your-writes path for the
// uploader (Node.write waits for the local apply), and no bootstrap
// problem (an internal topic would itself need metadata and leaders
// before the remote tier could be read).
//
// The cost: every broker holds every partition's remote segment list in
// memory and in each metadata snapshot, not only the partitions it leads
// or replicates. An rlm.Segment costs about 120 bytes in the image (104
// for the struct, 16 per leader-epoch entry) and about 190 bytes of JSON
// in a snapshot (measured). The list of a partition is bounded by
// retention: about retention / segment duration entries, so the whole
// image holds about (remote bytes of one copy / segment.bytes) segments.
// The seed workload (907.2 TB over 3 copies over 7 days, 302.4 TB per
// copy) with 1 GiB segments is about 282,000 segments: about 34 MB of
// memory per broker and 54 MB per snapshot. Time-rolled segments
// (segment.ms) of low-rate partitions add at most one segment per
// partition per segment.ms. Each raft entry is bounded (MaxRemoteEpochs,
// MaxRemoteDeleteIDs) to well under 100 KiB, far below the RPC frame
// limit. If the count grows far beyond that (much smaller segments, many
// more partitions), a compacted topic that each broker reads only for
// the partitions it serves is the way out, at the price of the above.
//
// Ordering of deletion (retention of the remote copy). Deleting a
// segment takes two steps so that no reader is ever handed a segment
// whose objects are gone, and no object is leaked when the leader dies
// in between:
//  1. The leader commits DeleteRemoteSegments raising LogStartOffset.
//     Every segment whose NextOffset <= the new log start is now expired:
//     SegmentFor no longer returns it (offsets below the log start are
//     out of range), but it stays listed (ExpiredRemoteSegments) so that
//     its objects are still known.
//  2. The leader deletes the expired segments' objects from the store.
//  3. The leader commits DeleteRemoteSegments listing their IDs, which
//     removes them from the list (steps 3 and the next round's step 1 can
//     be the same command).
//
// A leader that dies after step 1 or 2 leaves expired segments listed;
// the next leader finds them with ExpiredRemoteSegments and repeats steps
// 2 and 3 (a missing object is not an error for Delete). A reader that
// looked a segment up before step 1 was applied on its broker and fetches
// after step 2 finds the object missing (objstore.ErrNotFound): the
// fetch path re-reads RemoteLogStart and answers OFFSET_OUT_OF_RANGE when
// the offset fell below it, which is exactly what the reader would have
// got a moment later; a missing object for an offset still at or above
// the log start is a real loss and gets the clear "remote object missing"
// error.
//
// Topic deletion: DeleteTopic drops the topic's remote state and, when
// the topic had any remote segment or had remote.storage.enable set,
// records its id in PendingRemotePurge. Some broker (the wiring runs it on
// the active controller's node) deletes every object under the topic's
// key prefix and then commits RemoteTopicPurged.

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
)

// Bounds that keep each remote-metadata raft entry small (under 100 KiB
// of JSON).
const (
	// MaxRemoteEpochs is the most leader-epoch entries one segment may
	// carry. A segment spans a handful of leader changes in practice.
	MaxRemoteEpochs = 1024
	// MaxRemoteDeleteIDs is the most segment ids one DeleteRemoteSegments
	// may remove; the leader removes more in several commands.
	MaxRemoteDeleteIDs = 1000
)

// remoteStorageEnableKey is the topic config that turns the remote tier
// on (its parsing and default live in engine's TopicConfig); a deleted
// topic that had it set may have uploaded objects without committing any.
const remoteStorageEnableKey = "remote.storage.enable"

// CommitRemoteSegment records one uploaded segment; the partition's leader
// proposes it after every object of the segment is in the store. It is
// refused with:
//   - ErrInvalidCommand: malformed (BaseOffset < 0, BaseOffset >=
//     NextOffset, SizeBytes < 0, zero ID, no or more than MaxRemoteEpochs
//     epoch entries, entries not strictly ascending in epoch and start
//     offset, an entry starting at or after NextOffset or with an epoch
//     above LeaderEpoch);
//   - ErrUnknownTopic: unknown topic id or partition;
//   - ErrRemoteSegmentCommitted: the same ID is already listed, or the
//     segment adds nothing (NextOffset <= the remote end or the remote log
//     start): the uploader treats it as done. Checked before fencing, so
//     a retried commit whose first attempt was applied reads as done even
//     after a leader change;
//   - ErrFencedLeaderEpoch: Segment.LeaderEpoch is not the partition's
//     current leader epoch (a deposed leader's late upload);
//   - ErrRemoteSegmentGap: BaseOffset is above the remote end (and the
//     remote log start): the range between must be uploaded first.
//
// Overlap with committed data is allowed (BaseOffset <= remote end <
// NextOffset): a new leader's segment boundaries differ from the old
// leader's. The first segment of a partition may start anywhere at or
// above a log start raised before it.
//
// After a refusal the uploader deletes the objects it uploaded under this
// ID, except when the refusal is ErrRemoteSegmentCommitted and
// HasRemoteSegment finds this ID (then they are the committed ones):
// nothing else knows them. Objects
// of an upload whose uploader died before committing are not listed
// anywhere; they are left to a sweep of the partition's key prefix (not
// built yet), or to the topic purge.
type CommitRemoteSegment struct {
	Segment rlm.Segment
}

// DeleteRemoteSegments raises the partition's remote log start to
// LogStartOffset (never lowers it) and removes the listed segments, each
// of which must lie wholly below the new log start (else
// ErrInvalidCommand). IDs not listed any more are skipped, so a retry is
// harmless. Fenced like CommitRemoteSegment by LeaderEpoch. See the
// ordering at the top of this file: objects are deleted between the
// command that expires a segment and the one that removes it.
type DeleteRemoteSegments struct {
	TopicID        UUID
	Partition      int32
	LeaderEpoch    int32
	IDs            []rlm.SegmentID `json:",omitempty"`
	LogStartOffset int64
}

// RemoteTopicPurged clears a deleted topic from PendingRemotePurge once
// its objects are gone. An id that is not pending is a no-op (retries).
type RemoteTopicPurged struct {
	TopicID UUID
}

// remoteLog is one partition's remote state. It is immutable once in an
// image: apply builds a new one for the partition it changes.
type remoteLog struct {
	// segs is sorted by BaseOffset, then NextOffset.
	segs []rlm.Segment
	// end is the greatest NextOffset ever committed (-1: none). It does
	// not fall when segments are removed, so the uploader never uploads
	// a range again.
	end int64
	// logStart is the first offset readable remotely (-1: nothing
	// committed and never raised).
	logStart int64
	size     int64 // sum of SizeBytes over segs
}

var emptyRemoteLog = &remoteLog{end: -1, logStart: -1}

// remoteLogOf returns the state of one partition (empty when none).
func (im *Image) remoteLogOf(topicID UUID, partition int32) *remoteLog {
	parts := im.remote[topicID]
	if partition < 0 || int(partition) >= len(parts) || parts[partition] == nil {
		return emptyRemoteLog
	}
	return parts[partition]
}

// RemoteSegments returns the committed segments of a partition, sorted by
// BaseOffset (then NextOffset), expired ones included. The slice (and each
// segment's Epochs) is shared with the image: read-only.
func (im *Image) RemoteSegments(topicID UUID, partition int32) []rlm.Segment {
	return im.remoteLogOf(topicID, partition).segs
}

// HasRemoteSegment reports whether the segment id is listed for the
// partition: after ErrRemoteSegmentCommitted it tells the uploader whether
// its own upload is the committed one (keep its objects) or another
// covered the range (delete them).
func (im *Image) HasRemoteSegment(topicID UUID, partition int32, id rlm.SegmentID) bool {
	return slices.ContainsFunc(im.remoteLogOf(topicID, partition).segs, func(s rlm.Segment) bool { return s.ID == id })
}

// RemoteEnd returns the greatest NextOffset committed for the partition,
// or -1 when nothing was: every offset below it (and at or above
// RemoteLogStart) is in the remote tier, so local retention may delete a
// local segment whose NextOffset <= RemoteEnd.
func (im *Image) RemoteEnd(topicID UUID, partition int32) int64 {
	return im.remoteLogOf(topicID, partition).end
}

// RemoteLogStart returns the first offset readable from the remote tier,
// or -1 when nothing was committed: the whole log starts here.
func (im *Image) RemoteLogStart(topicID UUID, partition int32) int64 {
	return im.remoteLogOf(topicID, partition).logStart
}

// RemoteSizeBytes returns the summed size of the listed segments' log
// objects (what the store holds for the partition, overlaps counted
// twice, expired segments until they are removed).
func (im *Image) RemoteSizeBytes(topicID UUID, partition int32) int64 {
	return im.remoteLogOf(topicID, partition).size
}

// SegmentFor returns the committed segment holding offset: of those whose
// [BaseOffset, NextOffset) contains it, the one with the greatest
// BaseOffset (the newer upload where boundaries overlap). Offsets below
// RemoteLogStart or at or above RemoteEnd find none. Cost O(log n + k),
// k the number of segments nested inside an overlapping one (a few per
// leader change).
func (im *Image) SegmentFor(topicID UUID, partition int32, offset int64) (rlm.Segment, bool) {
	rl := im.remoteLogOf(topicID, partition)
	if offset < rl.logStart || offset >= rl.end {
		return rlm.Segment{}, false
	}
	// Last segment with BaseOffset <= offset, then back to the first that
	// still reaches past offset.
	i := sort.Search(len(rl.segs), func(i int) bool { return rl.segs[i].BaseOffset > offset }) - 1
	for ; i >= 0; i-- {
		if rl.segs[i].NextOffset > offset {
			return rl.segs[i], true
		}
	}
	return rlm.Segment{}, false
}

// ExpiredRemoteSegments returns the listed segments wholly below the
// remote log start: unreadable, their objects still to be deleted and
// then removed with DeleteRemoteSegments (step 2 and 3 of the ordering
// above). A new leader calls it to finish what its predecessor started.
func (im *Image) ExpiredRemoteSegments(topicID UUID, partition int32) []rlm.Segment {
	rl := im.remoteLogOf(topicID, partition)
	var out []rlm.Segment
	for _, s := range rl.segs {
		if s.NextOffset <= rl.logStart {
			out = append(out, s)
		}
	}
	return out
}

// PendingRemotePurge returns the ids of deleted topics whose remote
// objects have not been purged yet, sorted. Read-only.
func (im *Image) PendingRemotePurge() []UUID { return im.remotePurge }

// putRemoteLog replaces one partition's remote state, copying only the
// topic-level map and that topic's partition slice.
func (t *txn) putRemoteLog(topicID UUID, partition int32, rl *remoteLog) {
	t.cloneRemote()
	parts := t.im.remote[topicID]
	n := max(len(parts), int(partition)+1)
	np := make([]*remoteLog, n)
	copy(np, parts)
	np[partition] = rl
	t.im.remote[topicID] = np
}

// cloneRemote makes the topic-level map of the image being built its own
// (once per command); the partition lists stay shared.
func (t *txn) cloneRemote() {
	if t.remoteCloned {
		return
	}
	t.im.remote = maps.Clone(t.im.remote)
	if t.im.remote == nil {
		t.im.remote = map[UUID][]*remoteLog{}
	}
	t.remoteCloned = true
}

// remotePartition checks that topicID/partition exists and that
// leaderEpoch is its current leader epoch.
func (t *txn) remotePartition(topicID UUID, partition, leaderEpoch int32) (string, error) {
	tp, p, err := t.partitionByID(topicID, partition)
	if err != nil {
		return "", err
	}
	if leaderEpoch != p.LeaderEpoch {
		return "", fmt.Errorf("%w: %s-%d is at leader epoch %d, remote-log request has %d", ErrFencedLeaderEpoch, tp.Name, partition, p.LeaderEpoch, leaderEpoch)
	}
	return fmt.Sprintf("%s-%d", tp.Name, partition), nil
}

func validRemoteSegment(s *rlm.Segment) error {
	switch {
	case s.ID == rlm.SegmentID{}:
		return fmt.Errorf("%w: remote segment with zero id", ErrInvalidCommand)
	case s.BaseOffset < 0 || s.BaseOffset >= s.NextOffset:
		return fmt.Errorf("%w: remote segment %s offsets [%d, %d)", ErrInvalidCommand, s.ID, s.BaseOffset, s.NextOffset)
	case s.SizeBytes < 0:
		return fmt.Errorf("%w: remote segment %s size %d", ErrInvalidCommand, s.ID, s.SizeBytes)
	case len(s.Epochs) == 0 || len(s.Epochs) > MaxRemoteEpochs:
		return fmt.Errorf("%w: remote segment %s has %d epoch entries, want 1 to %d", ErrInvalidCommand, s.ID, len(s.Epochs), MaxRemoteEpochs)
	}
	for i, e := range s.Epochs {
		if e.Epoch < 0 || e.Epoch > s.LeaderEpoch || e.StartOffset < 0 || e.StartOffset >= s.NextOffset ||
			(i > 0 && (e.Epoch <= s.Epochs[i-1].Epoch || e.StartOffset <= s.Epochs[i-1].StartOffset)) {
			return fmt.Errorf("%w: remote segment %s epoch entry %d (%d@%d) out of order or range", ErrInvalidCommand, s.ID, i, e.Epoch, e.StartOffset)
		}
	}
	return nil
}

func (t *txn) commitRemoteSegment(c *CommitRemoteSegment) Result {
	s := c.Segment
	if err := validRemoteSegment(&s); err != nil {
		return Result{Err: err}
	}
	tid := UUID(s.TopicID)
	if _, _, err := t.partitionByID(tid, s.Partition); err != nil {
		return Result{Err: err}
	}
	rl := t.im.remoteLogOf(tid, s.Partition)
	if t.im.HasRemoteSegment(tid, s.Partition, s.ID) {
		return Result{Err: fmt.Errorf("%w: segment %s", ErrRemoteSegmentCommitted, s.ID)}
	}
	covered := max(rl.end, rl.logStart)
	if s.NextOffset <= covered {
		return Result{Err: fmt.Errorf("%w: segment %s ends at %d, remote tier covers up to %d", ErrRemoteSegmentCommitted, s.ID, s.NextOffset, covered)}
	}
	name, err := t.remotePartition(tid, s.Partition, s.LeaderEpoch)
	if err != nil {
		return Result{Err: err}
	}
	if rl.end >= 0 && s.BaseOffset > covered {
		return Result{Err: fmt.Errorf("%w: %s segment %s starts at %d, remote tier ends at %d", ErrRemoteSegmentGap, name, s.ID, s.BaseOffset, covered)}
	}
	s.Epochs = slices.Clone(s.Epochs)
	nl := &remoteLog{end: s.NextOffset, logStart: rl.logStart, size: rl.size + s.SizeBytes}
	if rl.end < 0 {
		nl.logStart = max(rl.logStart, s.BaseOffset)
	}
	i, _ := slices.BinarySearchFunc(rl.segs, s, compareSegments)
	nl.segs = make([]rlm.Segment, 0, len(rl.segs)+1)
	nl.segs = append(append(append(nl.segs, rl.segs[:i]...), s), rl.segs[i:]...)
	t.putRemoteLog(tid, s.Partition, nl)
	return Result{}
}

func compareSegments(a, b rlm.Segment) int {
	return cmp.Or(cmp.Compare(a.BaseOffset, b.BaseOffset), cmp.Compare(a.NextOffset, b.NextOffset))
}

func (t *txn) deleteRemoteSegments(c *DeleteRemoteSegments) Result {
	switch {
	case len(c.IDs) > MaxRemoteDeleteIDs:
		return Result{Err: fmt.Errorf("%w: %d segment ids in one delete, at most %d", ErrInvalidCommand, len(c.IDs), MaxRemoteDeleteIDs)}
	case c.LogStartOffset < 0:
		return Result{Err: fmt.Errorf("%w: remote log start %d", ErrInvalidCommand, c.LogStartOffset)}
	}
	name, err := t.remotePartition(c.TopicID, c.Partition, c.LeaderEpoch)
	if err != nil {
		return Result{Err: err}
	}
	rl := t.im.remoteLogOf(c.TopicID, c.Partition)
	nl := &remoteLog{end: rl.end, logStart: max(rl.logStart, c.LogStartOffset), size: rl.size}
	drop := make(map[rlm.SegmentID]bool, len(c.IDs))
	for _, id := range c.IDs {
		drop[id] = true
	}
	nl.segs = make([]rlm.Segment, 0, len(rl.segs))
	for _, s := range rl.segs {
		if !drop[s.ID] {
			nl.segs = append(nl.segs, s)
			continue
		}
		if s.NextOffset > nl.logStart {
			return Result{Err: fmt.Errorf("%w: %s segment %s [%d, %d) is not below the remote log start %d", ErrInvalidCommand, name, s.ID, s.BaseOffset, s.NextOffset, nl.logStart)}
		}
		nl.size -= s.SizeBytes
	}
	if nl.logStart == rl.logStart && len(nl.segs) == len(rl.segs) {
		return Result{} // a retry: nothing changes
	}
	t.putRemoteLog(c.TopicID, c.Partition, nl)
	return Result{}
}

// remoteTopicDeleted drops a deleted topic's remote state and, if it may
// have objects in the store, queues it for purging.
func (t *txn) remoteTopicDeleted(tp *Topic) {
	parts, had := t.im.remote[tp.ID]
	if had {
		t.cloneRemote()
		delete(t.im.remote, tp.ID)
	}
	enabled := strings.EqualFold(strings.TrimSpace(tp.Configs[remoteStorageEnableKey]), "true")
	if len(parts) == 0 && !enabled {
		return
	}
	if i, found := slices.BinarySearchFunc(t.im.remotePurge, tp.ID, compareUUID); !found {
		t.im.remotePurge = slices.Insert(slices.Clone(t.im.remotePurge), i, tp.ID)
	}
}

// remotePurgePending reports whether id belongs to a deleted topic whose
// objects are still to be purged: reusing it for a new topic would let
// the purge delete the new topic's objects (they share the key prefix).
func (t *txn) remotePurgePending(id UUID) bool {
	_, found := slices.BinarySearchFunc(t.im.remotePurge, id, compareUUID)
	return found
}

func compareUUID(a, b UUID) int { return strings.Compare(string(a[:]), string(b[:])) }

func (t *txn) remoteTopicPurged(c *RemoteTopicPurged) Result {
	if i, found := slices.BinarySearchFunc(t.im.remotePurge, c.TopicID, compareUUID); found {
		t.im.remotePurge = slices.Delete(slices.Clone(t.im.remotePurge), i, i+1)
		if len(t.im.remotePurge) == 0 {
			t.im.remotePurge = nil
		}
	}
	return Result{}
}

// Snapshot encoding (fsm.go, snapshot version 2).

// remoteSegmentID encodes a segment id as 32 hex digits.
type remoteSegmentID rlm.SegmentID

func (id remoteSegmentID) MarshalText() ([]byte, error) {
	return []byte(hex.EncodeToString(id[:])), nil
}

func (id *remoteSegmentID) UnmarshalText(b []byte) error {
	if len(b) != 2*len(id) {
		return fmt.Errorf("metadata: segment id %q: want 32 hex digits", b)
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// remoteSegmentSnap is a segment less what its partition entry implies.
type remoteSegmentSnap struct {
	ID           remoteSegmentID
	Base, Next   int64
	MaxTimestamp int64
	Size         int64
	LeaderEpoch  int32
	Epochs       []epochcache.Entry
}

// remotePartitionSnap is one partition's remote state in a snapshot.
type remotePartitionSnap struct {
	TopicID   UUID
	Partition int32
	End       int64
	LogStart  int64
	Segments  []remoteSegmentSnap `json:",omitempty"`
}

// remoteSnap lists the remote state by topic id then partition.
func (im *Image) remoteSnap() []remotePartitionSnap {
	var out []remotePartitionSnap
	for _, id := range slices.SortedFunc(maps.Keys(im.remote), compareUUID) {
		for p, rl := range im.remote[id] {
			if rl == nil {
				continue
			}
			ps := remotePartitionSnap{TopicID: id, Partition: int32(p), End: rl.end, LogStart: rl.logStart}
			for _, s := range rl.segs {
				ps.Segments = append(ps.Segments, remoteSegmentSnap{ID: remoteSegmentID(s.ID), Base: s.BaseOffset, Next: s.NextOffset,
					MaxTimestamp: s.MaxTimestamp, Size: s.SizeBytes, LeaderEpoch: s.LeaderEpoch, Epochs: s.Epochs})
			}
			out = append(out, ps)
		}
	}
	return out
}

// restoreRemote loads snapshot entries into im, whose topics are already
// restored. It checks what would otherwise make accessors misbehave:
// unknown partitions, duplicates, malformed segments.
func (im *Image) restoreRemote(parts []remotePartitionSnap, purge []UUID) error {
	for _, ps := range parts {
		name, ok := im.topicNames[ps.TopicID]
		if !ok || ps.Partition < 0 || int(ps.Partition) >= len(im.topics[name].Partitions) {
			return fmt.Errorf("metadata: snapshot: remote state of unknown partition %s-%d", ps.TopicID, ps.Partition)
		}
		if im.remote == nil {
			im.remote = map[UUID][]*remoteLog{}
		}
		list := im.remote[ps.TopicID]
		if list == nil {
			list = make([]*remoteLog, len(im.topics[name].Partitions))
			im.remote[ps.TopicID] = list
		}
		if list[ps.Partition] != nil {
			return fmt.Errorf("metadata: snapshot: remote state of %s-%d twice", name, ps.Partition)
		}
		rl := &remoteLog{end: ps.End, logStart: ps.LogStart}
		for _, ss := range ps.Segments {
			s := rlm.Segment{ID: rlm.SegmentID(ss.ID), TopicID: ps.TopicID, Partition: ps.Partition, BaseOffset: ss.Base, NextOffset: ss.Next,
				MaxTimestamp: ss.MaxTimestamp, SizeBytes: ss.Size, LeaderEpoch: ss.LeaderEpoch, Epochs: ss.Epochs}
			if err := validRemoteSegment(&s); err != nil || s.NextOffset > rl.end {
				return fmt.Errorf("metadata: snapshot: %s-%d: bad remote segment %s (end %d): %v", name, ps.Partition, s.ID, rl.end, err)
			}
			rl.segs = append(rl.segs, s)
			rl.size += s.SizeBytes
		}
		if !slices.IsSortedFunc(rl.segs, compareSegments) {
			return fmt.Errorf("metadata: snapshot: %s-%d: remote segments out of order", name, ps.Partition)
		}
		list[ps.Partition] = rl
	}
	if !slices.IsSortedFunc(purge, compareUUID) {
		return fmt.Errorf("metadata: snapshot: pending remote purge list out of order")
	}
	im.remotePurge = purge
	return nil
}

// equalRemote compares the remote state of two images.
func equalRemote(a, b *Image) bool {
	if !slices.Equal(a.remotePurge, b.remotePurge) {
		return false
	}
	sa, sb := a.remoteSnap(), b.remoteSnap()
	return slices.EqualFunc(sa, sb, func(x, y remotePartitionSnap) bool {
		return x.TopicID == y.TopicID && x.Partition == y.Partition && x.End == y.End && x.LogStart == y.LogStart &&
			slices.EqualFunc(x.Segments, y.Segments, func(p, q remoteSegmentSnap) bool {
				return p.ID == q.ID && p.Base == q.Base && p.Next == q.Next && p.MaxTimestamp == q.MaxTimestamp &&
					p.Size == q.Size && p.LeaderEpoch == q.LeaderEpoch && slices.Equal(p.Epochs, q.Epochs)
			})
	})
}
