package metadata

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
)

// rseg builds a segment of partition p of topic tid with id n, uploaded at
// leader epoch le.
func rseg(tid UUID, p int32, n byte, base, next int64, le int32) rlm.Segment {
	return rlm.Segment{ID: rlm.SegmentID{n}, TopicID: tid, Partition: p, BaseOffset: base, NextOffset: next,
		MaxTimestamp: 1000 + next, SizeBytes: next - base, LeaderEpoch: le, Epochs: []epochcache.Entry{{Epoch: le, StartOffset: base}}}
}

func commitCmd(s rlm.Segment) Command {
	return Command{CommitRemoteSegment: &CommitRemoteSegment{Segment: s}}
}

func deleteCmd(tid UUID, le int32, start int64, ids ...byte) Command {
	c := &DeleteRemoteSegments{TopicID: tid, Partition: 0, LeaderEpoch: le, LogStartOffset: start}
	for _, n := range ids {
		c.IDs = append(c.IDs, rlm.SegmentID{n})
	}
	return Command{DeleteRemoteSegments: c}
}

// try applies c and checks its outcome (want nil: accepted).
func (m *machine) try(name string, c Command, want error) {
	m.t.Helper()
	res := m.apply(c)
	if want == nil && res.Err != nil || want != nil && !errors.Is(res.Err, want) {
		m.t.Fatalf("%s: got %v, want %v", name, res.Err, want)
	}
}

// checkRemote checks partition 0's bounds and the ids of its segments in
// order.
func (m *machine) checkRemote(tid UUID, start, end, size int64, ids ...byte) {
	m.t.Helper()
	im := m.img
	var got []byte
	for _, s := range im.RemoteSegments(tid, 0) {
		got = append(got, s.ID[0])
	}
	if im.RemoteLogStart(tid, 0) != start || im.RemoteEnd(tid, 0) != end || im.RemoteSizeBytes(tid, 0) != size || !slices.Equal(got, ids) {
		m.t.Fatalf("remote state start %d end %d size %d ids %v, want %d %d %d %v",
			im.RemoteLogStart(tid, 0), im.RemoteEnd(tid, 0), im.RemoteSizeBytes(tid, 0), got, start, end, size, ids)
	}
}

func TestRemoteCommit(t *testing.T) {
	m, e1, _, tid := newMachineWithTopicA(t)
	m.checkRemote(tid, -1, -1, 0)
	bad := func(mut func(s *rlm.Segment)) Command {
		s := rseg(tid, 0, 9, 100, 200, 0)
		mut(&s)
		return commitCmd(s)
	}
	tooMany := make([]epochcache.Entry, MaxRemoteEpochs+1)
	for i := range tooMany {
		tooMany[i] = epochcache.Entry{Epoch: int32(i), StartOffset: int64(i)}
	}
	steps := []struct {
		name string
		c    Command
		want error
	}{
		{"zero id", bad(func(s *rlm.Segment) { s.ID = rlm.SegmentID{} }), ErrInvalidCommand},
		{"empty range", bad(func(s *rlm.Segment) { s.NextOffset = s.BaseOffset }), ErrInvalidCommand},
		{"negative base", bad(func(s *rlm.Segment) { s.BaseOffset = -1 }), ErrInvalidCommand},
		{"negative size", bad(func(s *rlm.Segment) { s.SizeBytes = -1 }), ErrInvalidCommand},
		{"no epochs", bad(func(s *rlm.Segment) { s.Epochs = nil }), ErrInvalidCommand},
		{"too many epochs", bad(func(s *rlm.Segment) { s.LeaderEpoch, s.Epochs = MaxRemoteEpochs, tooMany }), ErrInvalidCommand},
		{"epochs out of order", bad(func(s *rlm.Segment) {
			s.LeaderEpoch, s.Epochs = 2, []epochcache.Entry{{Epoch: 2, StartOffset: 100}, {Epoch: 1, StartOffset: 150}}
		}), ErrInvalidCommand},
		{"epoch entry past the end", bad(func(s *rlm.Segment) { s.Epochs[0].StartOffset = 200 }), ErrInvalidCommand},
		{"epoch above the leader's", bad(func(s *rlm.Segment) { s.Epochs[0].Epoch = 1 }), ErrInvalidCommand},
		{"unknown topic", bad(func(s *rlm.Segment) { s.TopicID = NewUUID() }), ErrUnknownTopic},
		{"unknown partition", bad(func(s *rlm.Segment) { s.Partition = 1 }), ErrUnknownTopic},
		{"negative partition", bad(func(s *rlm.Segment) { s.Partition = -1 }), ErrUnknownTopic},
		{"epoch from the future", bad(func(s *rlm.Segment) { s.LeaderEpoch, s.Epochs[0].Epoch = 1, 1 }), ErrFencedLeaderEpoch},
		// The first segment may start anywhere.
		{"first", commitCmd(rseg(tid, 0, 1, 100, 200, 0)), nil},
		{"same id", commitCmd(rseg(tid, 0, 1, 150, 300, 0)), ErrRemoteSegmentCommitted},
		{"nothing new", commitCmd(rseg(tid, 0, 2, 150, 200, 0)), ErrRemoteSegmentCommitted},
		{"gap", commitCmd(rseg(tid, 0, 2, 201, 300, 0)), ErrRemoteSegmentGap},
		{"adjacent", commitCmd(rseg(tid, 0, 2, 200, 300, 0)), nil},
		{"overlap", commitCmd(rseg(tid, 0, 3, 250, 400, 0)), nil},
	}
	for _, s := range steps {
		m.try(s.name, s.c, s.want)
	}
	m.checkRemote(tid, 100, 400, 100+100+150, 1, 2, 3)

	// A leader change: the old leader's late upload is fenced, the new
	// leader's accepted; a duplicate still reads as done, even from the
	// deposed leader (a retry of a commit that was applied).
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	p := m.part("a", 0)
	if p.LeaderEpoch != 1 || p.Leader == 1 {
		t.Fatalf("leader change did not happen: %+v", p)
	}
	m.try("deposed leader", commitCmd(rseg(tid, 0, 4, 400, 500, 0)), ErrFencedLeaderEpoch)
	m.try("deposed leader's retry", commitCmd(rseg(tid, 0, 3, 250, 400, 0)), ErrRemoteSegmentCommitted)
	if !m.img.HasRemoteSegment(tid, 0, rlm.SegmentID{3}) || m.img.HasRemoteSegment(tid, 0, rlm.SegmentID{4}) || m.img.HasRemoteSegment(tid, 1, rlm.SegmentID{3}) {
		t.Fatal("HasRemoteSegment")
	}
	m.try("new leader", commitCmd(rseg(tid, 0, 5, 300, 500, 1)), nil)
	m.checkRemote(tid, 100, 500, 550, 1, 2, 3, 5)
	seg, _ := m.img.SegmentFor(tid, 0, 450)
	if seg.ID[0] != 5 || seg.LeaderEpoch != 1 {
		t.Fatalf("segment for 450: %+v", seg)
	}
}

// With overlaps the segment with the greatest base offset that contains
// the offset wins, even when a later upload swallowed earlier ones whole.
func TestRemoteSegmentFor(t *testing.T) {
	m, e1, _, tid := newMachineWithTopicA(t)
	m.ok(commitCmd(rseg(tid, 0, 1, 0, 100, 0)))
	m.ok(commitCmd(rseg(tid, 0, 2, 100, 200, 0)))
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	// The new leader rolled less often: one segment covers both.
	m.ok(commitCmd(rseg(tid, 0, 3, 0, 300, 1)))
	m.ok(commitCmd(rseg(tid, 0, 4, 300, 350, 1)))
	m.checkRemote(tid, 0, 350, 100+100+300+50, 1, 3, 2, 4)
	for _, c := range []struct {
		off  int64
		want byte // 0: none
	}{{-1, 0}, {0, 3}, {50, 3}, {99, 3}, {100, 2}, {199, 2}, {200, 3}, {299, 3}, {300, 4}, {349, 4}, {350, 0}, {1 << 40, 0}} {
		s, ok := m.img.SegmentFor(tid, 0, c.off)
		if c.want == 0 && ok || c.want != 0 && (!ok || s.ID[0] != c.want) {
			t.Errorf("SegmentFor(%d) = %v %v, want %d", c.off, s.ID[0], ok, c.want)
		}
		if ok && (s.BaseOffset > c.off || s.NextOffset <= c.off) {
			t.Errorf("SegmentFor(%d) = [%d, %d)", c.off, s.BaseOffset, s.NextOffset)
		}
	}
	if _, ok := m.img.SegmentFor(NewUUID(), 0, 10); ok {
		t.Error("segment found for an unknown topic")
	}
}

func TestRemoteDelete(t *testing.T) {
	m, e1, _, tid := newMachineWithTopicA(t)
	m.ok(commitCmd(rseg(tid, 0, 1, 0, 100, 0)))
	m.ok(commitCmd(rseg(tid, 0, 2, 100, 200, 0)))
	m.ok(commitCmd(rseg(tid, 0, 3, 200, 300, 0)))

	m.try("too many ids", deleteCmd(tid, 0, 0, make([]byte, MaxRemoteDeleteIDs+1)...), ErrInvalidCommand)
	m.try("negative log start", deleteCmd(tid, 0, -1), ErrInvalidCommand)
	m.try("unknown topic", deleteCmd(NewUUID(), 0, 100), ErrUnknownTopic)
	m.try("future epoch", deleteCmd(tid, 1, 100), ErrFencedLeaderEpoch)
	m.try("live segment", deleteCmd(tid, 0, 150, 2), ErrInvalidCommand)

	// Step 1: raise the log start; segment 1 is expired but still listed.
	m.try("expire", deleteCmd(tid, 0, 150), nil)
	m.checkRemote(tid, 150, 300, 300, 1, 2, 3)
	if ex := m.img.ExpiredRemoteSegments(tid, 0); len(ex) != 1 || ex[0].ID[0] != 1 {
		t.Fatalf("expired %v", ex)
	}
	if _, ok := m.img.SegmentFor(tid, 0, 99); ok {
		t.Fatal("expired segment still readable")
	}
	if s, ok := m.img.SegmentFor(tid, 0, 150); !ok || s.ID[0] != 2 {
		t.Fatalf("segment for 150: %v %v", s, ok)
	}
	// A lower log start never lowers it.
	m.try("lower start", deleteCmd(tid, 0, 10), nil)
	m.checkRemote(tid, 150, 300, 300, 1, 2, 3)

	// Step 3 (after the objects are gone), from a new leader finishing
	// the old one's work; the old leader is fenced.
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	m.try("deposed leader", deleteCmd(tid, 0, 150, 1), ErrFencedLeaderEpoch)
	m.try("remove expired", deleteCmd(tid, 1, 150, 1), nil)
	m.checkRemote(tid, 150, 300, 200, 2, 3)
	if len(m.img.ExpiredRemoteSegments(tid, 0)) != 0 {
		t.Fatal("removed segment still expired")
	}
	m.try("retry", deleteCmd(tid, 1, 150, 1), nil)

	// Expire and remove everything at once: the end stays, so nothing is
	// uploaded twice and the next segment must continue from it.
	m.try("remove all", deleteCmd(tid, 1, 300, 2, 3), nil)
	m.checkRemote(tid, 300, 300, 0)
	m.try("below the end", commitCmd(rseg(tid, 0, 6, 250, 300, 1)), ErrRemoteSegmentCommitted)
	m.try("gap after removal", commitCmd(rseg(tid, 0, 6, 301, 400, 1)), ErrRemoteSegmentGap)
	m.try("continue", commitCmd(rseg(tid, 0, 6, 250, 400, 1)), nil)
	m.checkRemote(tid, 300, 400, 150, 6)
	if s, ok := m.img.SegmentFor(tid, 0, 299); ok {
		t.Fatalf("offset below the log start readable in %v", s)
	}

	// A log start raised past the end (records deleted): what lies below
	// it is nothing new, what starts at it is no gap.
	m.try("past the end", deleteCmd(tid, 1, 500), nil)
	m.try("below the raised start", commitCmd(rseg(tid, 0, 7, 400, 500, 1)), ErrRemoteSegmentCommitted)
	m.try("from the raised start", commitCmd(rseg(tid, 0, 7, 500, 600, 1)), nil)
	m.checkRemote(tid, 500, 600, 250, 6, 7)
}

// A log start raised before anything was committed bounds the first
// segment from below.
func TestRemoteDeleteBeforeFirstCommit(t *testing.T) {
	m, _, _, tid := newMachineWithTopicA(t)
	m.ok(deleteCmd(tid, 0, 100))
	m.checkRemote(tid, 100, -1, 0)
	m.try("below the start", commitCmd(rseg(tid, 0, 1, 0, 100, 0)), ErrRemoteSegmentCommitted)
	m.ok(commitCmd(rseg(tid, 0, 1, 50, 150, 0)))
	m.checkRemote(tid, 100, 150, 100, 1)
}

func TestRemoteTopicPurge(t *testing.T) {
	m, _, _, tid := newMachineWithTopicA(t)
	tidB, tidC := NewUUID(), NewUUID()
	m.ok(Command{CreateTopic: &CreateTopic{Name: "b", ID: tidB, Configs: map[string]string{remoteStorageEnableKey: "true"}, Assignment: [][]int32{{1}}}})
	m.ok(Command{CreateTopic: &CreateTopic{Name: "c", ID: tidC, Assignment: [][]int32{{1}}}})
	m.ok(commitCmd(rseg(tid, 0, 1, 0, 100, 0)))

	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "c"}})
	if len(m.img.PendingRemotePurge()) != 0 {
		t.Fatal("topic without remote data queued for purge")
	}
	// b had the remote tier on but committed nothing: uploads may have
	// left objects all the same.
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "b"}})
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "a"}})
	want := []UUID{tid, tidB}
	slices.SortFunc(want, compareUUID)
	if got := m.img.PendingRemotePurge(); !slices.Equal(got, want) {
		t.Fatalf("pending purge %v, want %v", got, want)
	}
	if len(m.img.RemoteSegments(tid, 0)) != 0 || m.img.RemoteEnd(tid, 0) != -1 {
		t.Fatal("deleted topic keeps its remote state")
	}
	m.try("commit to a deleted topic", commitCmd(rseg(tid, 0, 2, 100, 200, 0)), ErrUnknownTopic)
	// A topic of the same name has a new id and no remote state.
	tid2 := NewUUID()
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: tid2, Assignment: [][]int32{{1}}}})
	m.checkRemote(tid2, -1, -1, 0)

	// Its old id stays taken until the purge is done.
	m.try("reuse of a pending id", Command{CreateTopic: &CreateTopic{Name: "a2", ID: tid, Assignment: [][]int32{{1}}}}, ErrTopicExists)

	m.ok(Command{RemoteTopicPurged: &RemoteTopicPurged{TopicID: tid}})
	if got := m.img.PendingRemotePurge(); !slices.Equal(got, []UUID{tidB}) {
		t.Fatalf("after purge of a: %v", got)
	}
	m.ok(Command{RemoteTopicPurged: &RemoteTopicPurged{TopicID: tid}})
	m.ok(Command{RemoteTopicPurged: &RemoteTopicPurged{TopicID: tidB}})
	if got := m.img.PendingRemotePurge(); got != nil {
		t.Fatalf("after purge of both: %v", got)
	}
}

// An update to one partition copies that partition's list only: other
// partitions and topics keep their slices, and older images are
// untouched.
func TestRemoteCopyOnWrite(t *testing.T) {
	m := newMachine(t)
	m.register(1, "")
	ta, tb := NewUUID(), NewUUID()
	m.ok(Command{CreateTopic: &CreateTopic{Name: "a", ID: ta, Assignment: [][]int32{{1}, {1}}}})
	m.ok(Command{CreateTopic: &CreateTopic{Name: "b", ID: tb, Assignment: [][]int32{{1}}}})
	m.ok(commitCmd(rseg(ta, 0, 1, 0, 100, 0)))
	m.ok(commitCmd(rseg(tb, 0, 2, 0, 100, 0)))
	before := m.img
	a0, b0 := before.RemoteSegments(ta, 0), before.RemoteSegments(tb, 0)
	m.ok(commitCmd(rseg(ta, 1, 3, 0, 50, 0)))
	m.ok(commitCmd(rseg(ta, 0, 4, 100, 200, 0)))
	mid := m.img
	if &mid.RemoteSegments(tb, 0)[0] != &b0[0] {
		t.Fatal("topic b's list was copied by updates to topic a")
	}
	m.ok(commitCmd(rseg(ta, 1, 5, 50, 60, 0)))
	if &m.img.RemoteSegments(ta, 0)[0] != &mid.RemoteSegments(ta, 0)[0] {
		t.Fatal("partition a-0's list was copied by an update to a-1")
	}
	if len(before.RemoteSegments(ta, 0)) != 1 || len(before.RemoteSegments(ta, 1)) != 0 || before.RemoteEnd(ta, 0) != 100 ||
		&before.RemoteSegments(ta, 0)[0] != &a0[0] || a0[0].ID[0] != 1 {
		t.Fatal("an older image changed")
	}
	if len(m.img.RemoteSegments(ta, 1)) != 2 || m.img.RemoteEnd(ta, 1) != 60 {
		t.Fatalf("a-1: %v", m.img.RemoteSegments(ta, 1))
	}
}

func TestRemoteSnapshot(t *testing.T) {
	m, e1, _, tid := newMachineWithTopicA(t)
	m.ok(commitCmd(rseg(tid, 0, 1, 0, 100, 0)))
	m.ok(commitCmd(rseg(tid, 0, 2, 100, 200, 0)))
	m.ok(deleteCmd(tid, 0, 100))
	m.ok(Command{FenceBroker: &FenceBroker{ID: 1, Epoch: e1}})
	s := rseg(tid, 0, 3, 150, 300, 1)
	s.Epochs = []epochcache.Entry{{Epoch: 0, StartOffset: 100}, {Epoch: 1, StartOffset: 200}}
	m.ok(commitCmd(s))
	tidB := NewUUID()
	m.ok(Command{CreateTopic: &CreateTopic{Name: "b", ID: tidB, Assignment: [][]int32{{2}}}})
	m.ok(commitCmd(rseg(tidB, 0, 4, 7, 9, 0)))
	m.ok(Command{DeleteTopic: &DeleteTopic{Name: "b"}})

	var buf bytes.Buffer
	if err := m.img.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m.img) {
		t.Fatal("round trip differs")
	}
	var again bytes.Buffer
	_ = back.Encode(&again)
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatalf("encodings differ:\n%s\n%s", buf.Bytes(), again.Bytes())
	}
	got, _ := back.SegmentFor(tid, 0, 250)
	if got.ID[0] != 3 || got.TopicID != tid || got.Partition != 0 || got.MaxTimestamp != 1300 || got.SizeBytes != 150 ||
		got.LeaderEpoch != 1 || !slices.Equal(got.Epochs, s.Epochs) {
		t.Fatalf("restored segment %+v", got)
	}
	if back.RemoteLogStart(tid, 0) != 100 || back.RemoteSizeBytes(tid, 0) != 350 || len(back.ExpiredRemoteSegments(tid, 0)) != 1 ||
		!slices.Equal(back.PendingRemotePurge(), []UUID{tidB}) {
		t.Fatal("restored bounds or purge list differ")
	}
	// Equal sees remote state.
	m.ok(commitCmd(rseg(tid, 0, 5, 300, 301, 1)))
	if withIndex(back, m.img.Index()).Equal(m.img) {
		t.Fatal("Equal ignores a commit")
	}
	m.ok(Command{RemoteTopicPurged: &RemoteTopicPurged{TopicID: tidB}})
	if withIndex(back, m.img.Index()).Equal(withIndex(m.img, m.img.Index())) {
		t.Fatal("Equal ignores the purge list")
	}

	// A version 1 snapshot (before the remote tier) loads with none.
	old := `{"Version":1,"Index":5,"ClusterID":"c1","Topics":[{"ID":"` + tid.String() + `","Name":"a","Configs":{},"Partitions":[{"Replicas":[1],"ISR":[1],"Leader":1,"LeaderEpoch":0,"PartitionEpoch":0}]}]}`
	im, err := DecodeImage(strings.NewReader(old))
	if err != nil || im.RemoteEnd(tid, 0) != -1 || len(im.RemoteSegments(tid, 0)) != 0 || im.PendingRemotePurge() != nil {
		t.Fatalf("old snapshot: %v", err)
	}

	// Damaged remote state is refused with an error, not a panic.
	enc := buf.String()
	for name, bad := range map[string]string{
		"unknown partition": strings.Replace(enc, `"Partition":0,"End":300`, `"Partition":2147483647,"End":300`, 1),
		"bad segment id":    strings.Replace(enc, `"Segments":[{"ID":"01`, `"Segments":[{"ID":"zz`, 1),
		"segment past end":  strings.Replace(enc, `"End":300`, `"End":250`, 1),
		"out of order":      strings.Replace(enc, `"Base":100,"Next":200`, `"Base":290,"Next":295`, 1),
		"version 3":         strings.Replace(enc, `"Version":2`, `"Version":3`, 1),
	} {
		if bad == enc {
			t.Fatalf("%s: the edit matched nothing in %s", name, enc)
		}
		if _, err := DecodeImage(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The bounds keep every remote-metadata entry small.
func TestRemoteEntryBounds(t *testing.T) {
	s := rseg(NewUUID(), 1<<30, 0xff, 1<<62, 1<<62+1<<40, 1<<30)
	s.ID = rlm.SegmentID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	s.Epochs = make([]epochcache.Entry, MaxRemoteEpochs)
	for i := range s.Epochs {
		s.Epochs[i] = epochcache.Entry{Epoch: 1<<30 - int32(MaxRemoteEpochs) + int32(i), StartOffset: s.BaseOffset + int64(i)<<20}
	}
	if err := validRemoteSegment(&s); err != nil {
		t.Fatal(err)
	}
	d := &DeleteRemoteSegments{TopicID: NewUUID(), Partition: 1 << 30, LeaderEpoch: 1 << 30, LogStartOffset: 1 << 62}
	for range MaxRemoteDeleteIDs {
		d.IDs = append(d.IDs, s.ID)
	}
	for _, c := range []Command{commitCmd(s), {DeleteRemoteSegments: d}} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("entry of %d bytes", len(b))
		if len(b) > 100<<10 {
			t.Errorf("entry of %d bytes", len(b))
		}
	}
}
