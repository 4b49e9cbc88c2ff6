package group

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/coordinator/statelog"
)

func txnReq(group string, pid int64, offs ...CommitOffset) TxnOffsetCommitRequest {
	return TxnOffsetCommitRequest{TransactionalID: "tx", GroupID: group, ProducerID: pid, ProducerEpoch: 3, Generation: -1, Offsets: offs}
}

func co(topic string, part int32, off int64) CommitOffset {
	return CommitOffset{Topic: topic, Partition: part, Offset: off, LeaderEpoch: -1}
}

// txnCommit commits one offset in producer pid's transaction, without
// group metadata, and returns the partition's error.
func (h *harness) txnCommit(group string, pid int64, topic string, part int32, off int64) error {
	h.t.Helper()
	r := wait(h.t, h.m.CommitTxnOffsets(txnReq(group, pid, co(topic, part, off))))
	return r.Partitions[0].Err
}

// marker writes producer pid's marker to the group's partition and reports
// it, as the broker does for WriteTxnMarkers.
func (h *harness) marker(group string, pid int64, commit bool) {
	h.t.Helper()
	p := h.m.Partition(group)
	if err := h.p.AppendMarker(p, pid, 3, commit).Wait(); err != nil {
		h.t.Fatal(err)
	}
	if err := h.m.CompleteTxn(p, pid, commit); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) fetchOpts(group string, stable bool, tps ...TopicPartition) []FetchedOffset {
	h.t.Helper()
	fo, err := h.m.FetchOffsetsOpts(group, tps, FetchOptions{RequireStable: stable})
	if err != nil {
		h.t.Fatal(err)
	}
	return fo
}

// reload replaces the Manager with one loaded from what the old one wrote,
// as a new partition leader would.
func (h *harness) reload() {
	h.t.Helper()
	m2, err := NewManager(h.m.cfg, h.p, h.clock)
	if err != nil {
		h.t.Fatal(err)
	}
	for p := range int32(h.m.cfg.OffsetsTopicPartitions) {
		m2.BeginLoad(p)
		snap, err := Load(Records(h.p.Records(p)))
		if err != nil {
			h.t.Fatal(err)
		}
		m2.FinishLoad(p, snap)
	}
	h.m = m2
}

func TestTxnOffsetsPendingUntilMarker(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			h := newHarness(t, nil)
			if err := h.commit("g", -1, "", "t", 0, 5); err != nil {
				t.Fatal(err)
			}
			r := wait(t, h.m.CommitTxnOffsets(txnReq("g", 7, co("t", 0, 10), co("t", 1, 20))))
			if r.Partitions[0].Err != nil || r.Partitions[1].Err != nil {
				t.Fatalf("%+v", r)
			}
			recs := h.p.Records(h.m.Partition("g"))
			for _, kv := range recs[len(recs)-2:] {
				if !kv.Transactional || kv.ProducerID != 7 || kv.ProducerEpoch != 3 || kv.Control != nil {
					t.Fatalf("txn offset written as %+v", kv)
				}
			}
			if h.fetch("g", "t", 0) != 5 || h.fetch("g", "t", 1) != -1 {
				t.Fatal("pending transactional offsets visible before the marker")
			}
			if all, _ := h.m.FetchOffsets("g", nil); len(all) != 1 || all[0].Offset != 5 {
				t.Fatalf("fetch all lists pending offsets: %+v", all)
			}
			want0, want1 := int64(5), int64(-1)
			if commit {
				want0, want1 = 10, 20
			}
			check := func(when string) {
				t.Helper()
				if got0, got1 := h.fetch("g", "t", 0), h.fetch("g", "t", 1); got0 != want0 || got1 != want1 {
					t.Fatalf("%s: offsets %d %d, want %d %d", when, got0, got1, want0, want1)
				}
			}
			h.marker("g", 7, commit)
			check("after the marker")
			// A second marker, even of the other kind, finds nothing.
			h.marker("g", 7, !commit)
			check("after a second marker")
			h.reload()
			check("after a reload")
			for _, f := range h.fetchOpts("g", true, TopicPartition{"t", 0}, TopicPartition{"t", 1}) {
				if f.Err != nil {
					t.Fatalf("reloaded group still has pending offsets: %+v", f)
				}
			}
		})
	}
}

func TestTxnRequireStable(t *testing.T) {
	h := newHarness(t, nil)
	for p, off := range []int64{1, 2} {
		if err := h.commit("g", -1, "", "t", int32(p), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.txnCommit("g", 1, "t", 1, 5); err != nil {
		t.Fatal(err)
	}
	if err := h.txnCommit("g", 2, "t", 2, 6); err != nil {
		t.Fatal(err)
	}
	tps := []TopicPartition{{"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}}
	type want struct {
		off int64
		err error
	}
	check := func(name string, stable bool, ws ...want) {
		t.Helper()
		got := h.fetchOpts("g", stable, tps...)
		for i, w := range ws {
			if got[i].Offset != w.off || !errors.Is(got[i].Err, w.err) || (w.err == nil && got[i].Err != nil) {
				t.Errorf("%s: partition %d: got %d %v, want %d %v", name, i, got[i].Offset, got[i].Err, w.off, w.err)
			}
		}
	}
	check("stable, both open", true, want{1, nil}, want{-1, ErrUnstableOffsetCommit}, want{-1, ErrUnstableOffsetCommit}, want{-1, nil})
	check("not stable, both open", false, want{1, nil}, want{2, nil}, want{-1, nil}, want{-1, nil})
	all := h.fetchOpts("g", true)
	if len(all) != 2 || all[0].Err != nil || all[0].Offset != 1 || !errors.Is(all[1].Err, ErrUnstableOffsetCommit) {
		t.Errorf("stable fetch of all partitions: %+v", all)
	}
	h.marker("g", 1, true)
	check("stable, 1 committed", true, want{1, nil}, want{5, nil}, want{-1, ErrUnstableOffsetCommit}, want{-1, nil})
	h.marker("g", 2, false)
	check("stable, 2 aborted", true, want{1, nil}, want{5, nil}, want{-1, nil}, want{-1, nil})
	if got := h.fetchOpts("unknown", true, tps[0]); got[0].Offset != -1 || got[0].Err != nil {
		t.Errorf("unknown group: %+v", got)
	}
}

// TestTxnCommitOrder checks that plain and transactional commits of one
// partition are ordered by when they were written, not by when the marker
// came, in memory and across reloads at any point.
func TestTxnCommitOrder(t *testing.T) {
	type step struct {
		op  string // "plain", "txn", "commit", "abort", "reload"
		pid int64
		off int64
	}
	plain := func(off int64) step { return step{op: "plain", off: off} }
	txn := func(pid, off int64) step { return step{op: "txn", pid: pid, off: off} }
	commit := func(pid int64) step { return step{op: "commit", pid: pid} }
	abort := func(pid int64) step { return step{op: "abort", pid: pid} }
	reload := step{op: "reload"}
	for _, tc := range []struct {
		name  string
		steps []step
		want  int64
	}{
		{"txn alone", []step{txn(1, 10), commit(1)}, 10},
		{"plain after txn wins", []step{txn(1, 10), plain(20), commit(1)}, 20},
		{"txn after plain wins", []step{plain(20), txn(1, 10), commit(1)}, 10},
		{"abort keeps plain", []step{plain(20), txn(1, 10), abort(1)}, 20},
		{"later producer wins, markers in order", []step{txn(1, 10), txn(2, 20), commit(1), commit(2)}, 20},
		{"later producer wins, markers reversed", []step{txn(1, 10), txn(2, 20), commit(2), commit(1)}, 20},
		{"plain after the marker wins", []step{txn(1, 10), commit(1), plain(5)}, 5},
		{"same producer, last write", []step{txn(1, 10), txn(1, 11), commit(1)}, 11},
		{"reload, then plain, then marker", []step{txn(1, 10), reload, plain(20), commit(1)}, 20},
		{"plain, reload, then marker", []step{txn(1, 10), plain(20), reload, commit(1)}, 20},
		{"plain before txn, reload, marker", []step{plain(20), txn(1, 10), reload, commit(1)}, 10},
		{"two producers across a reload", []step{txn(1, 10), reload, txn(2, 20), commit(2), commit(1)}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			for _, s := range tc.steps {
				var err error
				switch s.op {
				case "plain":
					err = h.commit("g", -1, "", "t", 0, s.off)
				case "txn":
					err = h.txnCommit("g", s.pid, "t", 0, s.off)
				case "commit", "abort":
					h.marker("g", s.pid, s.op == "commit")
				case "reload":
					h.reload()
				}
				if err != nil {
					t.Fatalf("%+v: %v", s, err)
				}
			}
			if got := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; got.Offset != tc.want || got.Err != nil {
				t.Fatalf("got %d %v, want %d", got.Offset, got.Err, tc.want)
			}
			h.reload()
			if got := h.fetch("g", "t", 0); got != tc.want {
				t.Fatalf("after the final reload: got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLoadTxnMarkers(t *testing.T) {
	ov := func(o int64) []byte {
		return EncodeOffsetValue(OffsetValue{Offset: o, LeaderEpoch: -1, CommitTimestamp: o})
	}
	key := func(g string) []byte { return EncodeOffsetKey(OffsetKey{g, "t", 0}) }
	off := func(g string, o int64) statelog.KV { return statelog.KV{Key: key(g), Value: ov(o)} }
	txo := func(pid int64, g string, o int64) statelog.KV {
		return statelog.KV{Key: key(g), Value: ov(o), Transactional: true, ProducerID: pid, ProducerEpoch: 2}
	}
	tomb := func(g string) statelog.KV { return statelog.KV{Key: key(g)} }
	mk := func(pid int64, commit bool) statelog.KV {
		return statelog.KV{Key: []byte{0, 0, 0, 9}, Transactional: true, ProducerID: pid, Control: &statelog.Marker{Commit: commit}}
	}
	const none = int64(-1)
	for _, tc := range []struct {
		name      string
		recs      []statelog.KV
		committed int64   // -1: none
		pending   []int64 // producers with open transactions, in order
		gone      bool    // the group is not in the snapshot
	}{
		{"commit", []statelog.KV{off("g", 5), txo(1, "g", 10), mk(1, true)}, 10, nil, false},
		{"abort", []statelog.KV{off("g", 5), txo(1, "g", 10), mk(1, false)}, 5, nil, false},
		{"open at the end", []statelog.KV{off("g", 5), txo(1, "g", 10)}, 5, []int64{1}, false},
		{"plain between txn and marker wins", []statelog.KV{txo(1, "g", 10), off("g", 20), mk(1, true)}, 20, nil, false},
		{"plain before txn loses", []statelog.KV{off("g", 20), txo(1, "g", 10), mk(1, true)}, 10, nil, false},
		{"later producer wins", []statelog.KV{txo(1, "g", 10), txo(2, "g", 20), mk(2, true), mk(1, true)}, 20, nil, false},
		{"marker of another producer", []statelog.KV{txo(1, "g", 10), mk(2, true)}, none, []int64{1}, false},
		{"marker before the records", []statelog.KV{mk(1, true), txo(1, "g", 10)}, none, []int64{1}, false},
		{"tombstone drops pending", []statelog.KV{txo(1, "g", 10), tomb("g"), mk(1, true)}, none, nil, true},
		{"aborted txn-only group", []statelog.KV{txo(1, "g", 10), mk(1, false)}, none, nil, true},
		{"control record is not decoded", []statelog.KV{off("g", 5), {Key: []byte{0xff}, Control: &statelog.Marker{}}}, 5, nil, false},
		{"two groups, one marker", []statelog.KV{txo(1, "g", 10), txo(1, "h", 11), off("h", 1), mk(1, true)}, 10, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(Records(tc.recs))
			if err != nil {
				t.Fatal(err)
			}
			g, ok := s.Groups["g"]
			if tc.gone {
				if ok {
					t.Fatalf("group kept: %+v", g)
				}
				return
			}
			if !ok {
				t.Fatal("group missing")
			}
			if v, ok := g.Offsets[TopicPartition{"t", 0}]; (tc.committed == none) == ok || (ok && v.Offset != tc.committed) {
				t.Fatalf("committed %+v (present %v), want %d", v, ok, tc.committed)
			}
			if len(g.Pending) != len(tc.pending) {
				t.Fatalf("pending %v, want producers %v", g.Pending, tc.pending)
			}
			for _, pid := range tc.pending {
				if lt := g.Pending[pid]; lt == nil || lt.ProducerEpoch != 2 || lt.Offsets[TopicPartition{"t", 0}].Offset != 10 {
					t.Fatalf("pending of %d: %+v", pid, lt)
				}
			}
		})
	}
}

// TestLoadedOpenTxnCompletes loads a transaction that is still open, then
// ends it through the Manager as the broker would after the move.
func TestLoadedOpenTxnCompletes(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			h := newHarness(t, nil)
			if err := h.commit("g", -1, "", "t", 0, 5); err != nil {
				t.Fatal(err)
			}
			if err := h.txnCommit("g", 4, "t", 0, 10); err != nil {
				t.Fatal(err)
			}
			h.reload()
			if f := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; !errors.Is(f.Err, ErrUnstableOffsetCommit) {
				t.Fatalf("loaded open transaction not pending: %+v", f)
			}
			if got := h.fetch("g", "t", 0); got != 5 {
				t.Fatalf("committed offset after reload: %d", got)
			}
			h.marker("g", 4, commit)
			want := int64(5)
			if commit {
				want = 10
			}
			if f := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; f.Err != nil || f.Offset != want {
				t.Fatalf("after the marker: %+v, want %d", f, want)
			}
		})
	}
}

// TestCompleteTxnDuringLoad covers a marker that lands while the partition
// is loading, after the loader read past where it went.
func TestCompleteTxnDuringLoad(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.txnCommit("g", 3, "t", 0, 10); err != nil {
		t.Fatal(err)
	}
	p := h.m.Partition("g")
	m2, err := NewManager(h.m.cfg, h.p, h.clock)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.CompleteTxn(p, 3, true); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("marker for a partition not owned: %v", err)
	}
	m2.BeginLoad(p)
	snap, err := Load(Records(h.p.Records(p)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.p.AppendMarker(p, 3, 3, true).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := m2.CompleteTxn(p, 3, true); err != nil {
		t.Fatalf("marker while loading: %v", err)
	}
	m2.FinishLoad(p, snap)
	h.m = m2
	if f := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; f.Err != nil || f.Offset != 10 {
		t.Fatalf("buffered marker not applied: %+v", f)
	}
	// The buffer is spent: the producer's next transaction stays open.
	if err := h.txnCommit("g", 3, "t", 0, 11); err != nil {
		t.Fatal(err)
	}
	if f := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; !errors.Is(f.Err, ErrUnstableOffsetCommit) {
		t.Fatalf("next transaction: %+v", f)
	}
	// Unload forgets buffered markers with the partition.
	m2.BeginLoad(p)
	if err := m2.CompleteTxn(p, 3, true); err != nil {
		t.Fatal(err)
	}
	m2.Unload(p)
	m2.BeginLoad(p)
	snap, err = Load(Records(h.p.Records(p)))
	if err != nil {
		t.Fatal(err)
	}
	m2.FinishLoad(p, snap)
	if f := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; !errors.Is(f.Err, ErrUnstableOffsetCommit) {
		t.Fatalf("a marker buffered before Unload was applied: %+v", f)
	}
}

func TestTxnOffsetCommitFencing(t *testing.T) {
	h := newHarness(t, nil)
	sg := h.form("g", 2)
	// A static member in group "s".
	inst := "instance-1"
	sj := joinReq("s", "")
	sj.InstanceID = &inst
	jr := wait(t, h.m.Join(sj))
	if jr.Err != nil {
		t.Fatal(jr.Err)
	}
	if sr := wait(t, h.m.Sync(SyncRequest{Group: "s", Generation: jr.Generation, MemberID: jr.MemberID, InstanceID: &inst,
		Assignments: map[string][]byte{jr.MemberID: {1}}})); sr.Err != nil {
		t.Fatal(sr.Err)
	}
	other := "instance-2"
	// "e": an Empty group with a committed offset and no members.
	if err := h.commit("e", -1, "", "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name     string
		group    string
		gen      int32
		member   string
		instance *string
		want     error
	}{
		{"no group metadata, members present", "g", -1, "", nil, nil},
		{"current member and generation", "g", sg.gen, sg.members[1], nil, nil},
		{"old generation", "g", sg.gen - 1, sg.members[0], nil, ErrIllegalGeneration},
		{"newer generation", "g", sg.gen + 1, sg.members[0], nil, ErrIllegalGeneration},
		{"unknown member", "g", sg.gen, "stranger", nil, ErrUnknownMemberID},
		{"generation without member", "g", sg.gen, "", nil, ErrUnknownMemberID},
		{"member without generation", "g", -1, sg.members[0], nil, ErrIllegalGeneration},
		{"static member", "s", jr.Generation, jr.MemberID, &inst, nil},
		{"static member, old id", "s", jr.Generation, "old-id", &inst, ErrFencedInstanceID},
		{"unknown instance", "s", jr.Generation, jr.MemberID, &other, ErrUnknownMemberID},
		{"empty group, member given", "e", 1, "zombie", nil, ErrUnknownMemberID},
		{"unknown group with generation", "nope", 1, "zombie", nil, ErrIllegalGeneration},
		{"unknown group, member only", "nope2", -1, "zombie", nil, ErrUnknownMemberID},
		{"unknown group, no metadata", "new", -1, "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := int64(100 + i)
			req := txnReq(tc.group, pid, co("t", 0, 42))
			req.Generation, req.MemberID, req.GroupInstanceID = tc.gen, tc.member, tc.instance
			r := wait(t, h.m.CommitTxnOffsets(req))
			if got := r.Partitions[0].Err; !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			pending := errors.Is(h.fetchOpts(tc.group, true, TopicPartition{"t", 0})[0].Err, ErrUnstableOffsetCommit)
			if pending != (tc.want == nil) {
				t.Fatalf("pending %v after %v", pending, tc.want)
			}
			h.marker(tc.group, pid, false)
		})
	}
	if d := h.m.Describe([]string{"new"})[0]; d.State != "Empty" {
		t.Fatalf("unknown group not created as a simple group: %+v", d)
	}

	// Per-partition metadata limit; other partitions of the request go on.
	r := wait(t, h.m.CommitTxnOffsets(txnReq("g", 1, CommitOffset{Topic: "t", Partition: 0, Offset: 1, Metadata: strings.Repeat("m", 5000)}, co("t", 1, 2))))
	mustErr(t, r.Partitions[0].Err, ErrOffsetMetadataTooLarge)
	if r.Partitions[1].Err != nil {
		t.Fatal(r.Partitions[1].Err)
	}
	// A zombie producer epoch meets the open transaction of a newer one.
	stale := txnReq("g", 1, co("t", 2, 3))
	stale.ProducerEpoch = 2
	mustErr(t, wait(t, h.m.CommitTxnOffsets(stale)).Partitions[0].Err, ErrInvalidProducerEpoch)
	h.marker("g", 1, true)
	if h.fetch("g", "t", 0) != -1 || h.fetch("g", "t", 1) != 2 || h.fetch("g", "t", 2) != -1 {
		t.Fatal("rejected partitions committed")
	}
	bad := txnReq("g", -1, co("t", 0, 1))
	mustErr(t, wait(t, h.m.CommitTxnOffsets(bad)).Partitions[0].Err, ErrInvalidProducerEpoch)
	mustErr(t, wait(t, h.m.CommitTxnOffsets(txnReq("", 1, co("t", 0, 1)))).Partitions[0].Err, ErrInvalidGroupID)

	// Unlike OffsetCommit, a transactional commit is fine while the
	// members sync a new generation.
	c := h.form("c", 1)
	rj := wait(t, h.m.Join(joinReq("c", c.members[0], "range", "roundrobin")))
	if rj.Err != nil || h.state("c") != "CompletingRebalance" {
		t.Fatalf("rejoin: %+v %s", rj, h.state("c"))
	}
	mustErr(t, h.commit("c", rj.Generation, c.members[0], "t", 0, 1), ErrRebalanceInProgress)
	req := txnReq("c", 9, co("t", 0, 1))
	req.Generation, req.MemberID = rj.Generation, c.members[0]
	if err := wait(t, h.m.CommitTxnOffsets(req)).Partitions[0].Err; err != nil {
		t.Fatalf("txn commit during CompletingRebalance: %v", err)
	}
}

func TestTxnCommitDurability(t *testing.T) {
	h := newHarness(t, nil)
	h.p.Hold()
	f := h.m.CommitTxnOffsets(txnReq("g", 1, co("t", 0, 10)))
	if !pending(f) {
		t.Fatal("TxnOffsetCommit acknowledged before durable")
	}
	// Already pending for require_stable, never visible as committed.
	if fo := h.fetchOpts("g", true, TopicPartition{"t", 0})[0]; !errors.Is(fo.Err, ErrUnstableOffsetCommit) {
		t.Fatalf("in-flight transactional offset not unstable: %+v", fo)
	}
	if h.fetch("g", "t", 0) != -1 {
		t.Fatal("in-flight transactional offset visible")
	}
	h.p.Release(nil)
	if r := wait(t, f); r.Partitions[0].Err != nil {
		t.Fatal(r.Partitions[0].Err)
	}
	if h.fetch("g", "t", 0) != -1 {
		t.Fatal("durable but uncommitted transactional offset visible")
	}

	// A failed append is reported and takes its pending offset back.
	h.p.Hold()
	f = h.m.CommitTxnOffsets(txnReq("g", 1, co("t", 1, 11)))
	h.p.Release(ErrAppendFailed)
	r := wait(t, f)
	mustErr(t, r.Partitions[0].Err, ErrCoordinatorNotAvailable)
	got := h.fetchOpts("g", true, TopicPartition{"t", 0}, TopicPartition{"t", 1})
	if !errors.Is(got[0].Err, ErrUnstableOffsetCommit) || got[1].Err != nil {
		t.Fatalf("after a failed append: %+v", got)
	}

	h.p.Fail(fmt.Errorf("stale epoch: %w", ErrInvalidProducerEpoch))
	r = wait(t, h.m.CommitTxnOffsets(txnReq("g", 1, co("t", 1, 12))))
	if err := r.Partitions[0].Err; !errors.Is(err, ErrInvalidProducerEpoch) || errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Fatalf("fenced producer: %v", err)
	}
	h.p.Fail(fmt.Errorf("moved: %w", ErrNotCoordinator))
	mustErr(t, wait(t, h.m.CommitTxnOffsets(txnReq("g", 1, co("t", 1, 12)))).Partitions[0].Err, ErrNotCoordinator)
	h.p.Fail(nil)

	// The first transaction is still open and commits.
	h.marker("g", 1, true)
	if h.fetch("g", "t", 0) != 10 || h.fetch("g", "t", 1) != -1 {
		t.Fatal("wrong offsets committed")
	}
}

// appendOnly is a Persister without AppendTxn.
type appendOnly struct{ p *MemoryPersister }

func (a appendOnly) Append(partition int32, records []statelog.KV) statelog.Waiter {
	return a.p.Append(partition, records)
}

func TestTxnOffsetCommitNeedsTxnPersister(t *testing.T) {
	m, err := NewManager(DefaultConfig(), appendOnly{NewMemoryPersister()}, &fakeClock{})
	if err != nil {
		t.Fatal(err)
	}
	m.FinishLoad(m.Partition("g"), nil)
	r := wait(t, m.CommitTxnOffsets(txnReq("g", 1, co("t", 0, 1))))
	mustErr(t, r.Partitions[0].Err, ErrCoordinatorNotAvailable)
	if !errors.Is(r.Partitions[0].Err, errNoTxnPersister) {
		t.Fatalf("error does not say why: %v", r.Partitions[0].Err)
	}
}

func TestTxnOffsetsHoldExpiryBack(t *testing.T) {
	const retention = time.Hour
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention = retention
		c.OffsetsRetentionCheckInterval = time.Second
	})
	for p, off := range []int64{1, 2} {
		if err := h.commit("s", -1, "", "t", int32(p), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.txnCommit("s", 9, "t", 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := h.txnCommit("p", 8, "t", 0, 3); err != nil { // a group with nothing but a transaction
		t.Fatal(err)
	}
	h.tick(2 * retention)
	if h.fetch("s", "t", 1) != -1 {
		t.Fatal("an offset without a transaction did not expire")
	}
	if h.fetch("s", "t", 0) != 1 {
		t.Fatal("an offset with a pending transaction expired")
	}
	if s := h.state("p"); s != "Empty" {
		t.Fatalf("a group with an open transaction was deleted: %s", s)
	}
	h.marker("s", 9, false)
	h.marker("p", 8, false)
	h.tick(time.Second)
	if h.fetch("s", "t", 0) != -1 || h.state("s") != "Dead" || h.state("p") != "Dead" {
		t.Fatalf("not expired after the abort: %d %s %s", h.fetch("s", "t", 0), h.state("s"), h.state("p"))
	}
}

func TestTxnOffsetsDeleted(t *testing.T) {
	h := newHarness(t, nil)
	// OffsetDelete of a partition with only a pending offset.
	if err := h.txnCommit("d", 4, "t", 0, 7); err != nil {
		t.Fatal(err)
	}
	r := wait(t, h.m.DeleteOffsets("d", []TopicPartition{{"t", 0}}))
	if r.Err != nil || r.Partitions[0].Err != nil {
		t.Fatalf("%+v", r)
	}
	if f := h.fetchOpts("d", true, TopicPartition{"t", 0})[0]; f.Err != nil || f.Offset != -1 {
		t.Fatalf("pending offset survived OffsetDelete: %+v", f)
	}
	// DeleteGroups of a group with committed and pending offsets.
	if err := h.commit("x", -1, "", "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.txnCommit("x", 5, "t", 1, 2); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, h.m.DeleteGroups([]string{"x"})); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	// The transactions commit afterwards: nothing comes back, live or
	// after a reload.
	h.marker("d", 4, true)
	h.marker("x", 5, true)
	for _, when := range []string{"live", "reloaded"} {
		if when == "reloaded" {
			h.reload()
		}
		if h.fetch("d", "t", 0) != -1 || h.fetch("x", "t", 0) != -1 || h.fetch("x", "t", 1) != -1 {
			t.Fatalf("%s: deleted offsets came back", when)
		}
		if s := h.state("x"); s != "Dead" {
			t.Fatalf("%s: deleted group is %s", when, s)
		}
	}
}

// TestTxnConcurrent runs transactional and plain commits, markers and ticks
// at once under -race. Producers are shared by groups of the same
// partition, so one marker may end another goroutine's commit: everything
// commits, so the last offset of each group must win either way.
func TestTxnConcurrent(t *testing.T) {
	h := newHarness(t, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				h.m.Tick(h.clock.Now())
			}
		}
	}()
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := fmt.Sprintf("group-%d", i)
			pid := int64(i % 3)
			p := h.m.Partition(g)
			for o := range 20 {
				var err error
				if o%3 == 0 {
					err = wait(t, h.m.CommitOffsets(OffsetCommitRequest{Group: g, Generation: -1, Offsets: []CommitOffset{co("t", 0, int64(o))}})).Partitions[0].Err
				} else {
					err = wait(t, h.m.CommitTxnOffsets(txnReq(g, pid, co("t", 0, int64(o))))).Partitions[0].Err
					if err == nil {
						err = h.m.CompleteTxn(p, pid, true)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				if f, err := h.m.FetchOffsetsOpts(g, []TopicPartition{{"t", 0}}, FetchOptions{RequireStable: true}); err != nil || f[0].Offset != int64(o) {
					t.Errorf("%s: after %d: %+v %v", g, o, f, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
}
