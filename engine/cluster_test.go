package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSyncTopicHostsOnlyAssignedPartitions drives the reconcile API the
// way a cluster broker does: only hosted partitions get logs, survive a
// restart, and go away when unassigned; a new topic id replaces the old
// logs; leader epochs are stamped into appended batches.
func TestSyncTopicHostsOnlyAssignedPartitions(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	id1 := [16]byte{1}
	spec := TopicSpec{Name: "t", ID: id1, Partitions: 4, Hosted: []int32{1, 3}, Configs: map[string]string{"retention.ms": "1000"}}
	if err := e.SyncTopic(spec); err != nil {
		t.Fatal(err)
	}
	exists := func(p int) bool {
		_, err := os.Stat(filepath.Join(dir, partitionDirName("t", int32(p))))
		return err == nil
	}
	for p, want := range []bool{false, true, false, true} {
		if exists(p) != want {
			t.Fatalf("partition %d dir exists=%v, want %v", p, exists(p), want)
		}
		if _, err := e.Partition("t", int32(p)); (err == nil) != want {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	if info, _ := e.Topic("t"); info.Partitions != 4 || info.Config.RetentionMs != 1000 {
		t.Fatalf("topic info %+v", info)
	}
	part := mustPartition(t, e, "t", 1)
	part.SetLeaderEpoch(7)
	appendWait(t, part, batchOf(0, 2))
	rr, err := part.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	data := readRange(t, rr.Data)
	rr.Data.Release()
	if got := int32(data[12])<<24 | int32(data[13])<<16 | int32(data[14])<<8 | int32(data[15]); got != 7 {
		t.Fatalf("batch partitionLeaderEpoch %d, want 7", got)
	}

	// Restart: the hosted set comes back from topics.json, data intact.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, testConfig(dir))
	if got := e.Hosted("t"); !slices.Equal(got, []int32{1, 3}) {
		t.Fatalf("hosted after restart %v", got)
	}
	if recs := readAll(t, mustPartition(t, e, "t", 1), 0); len(recs) != 2 {
		t.Fatalf("records after restart: %d", len(recs))
	}

	// Reassignment: 1 leaves, 0 arrives; unchanged specs write nothing.
	spec.Hosted = []int32{0, 3}
	if err := e.SyncTopic(spec); err != nil {
		t.Fatal(err)
	}
	if exists(1) || !exists(0) {
		t.Fatalf("after reassignment: p0 %v p1 %v", exists(0), exists(1))
	}
	st, _ := os.Stat(filepath.Join(dir, metaDirName, topicsFileName))
	if err := e.SyncTopic(spec); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(filepath.Join(dir, metaDirName, topicsFileName)); !st2.ModTime().Equal(st.ModTime()) {
		t.Fatal("unchanged spec rewrote topics.json")
	}

	// Same name, new id: the old logs go.
	appendWait(t, mustPartition(t, e, "t", 3), batchOf(0, 5))
	spec.ID = [16]byte{2}
	if err := e.SyncTopic(spec); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Topic("t"); info.ID != spec.ID {
		t.Fatalf("topic id %x", info.ID)
	}
	if n := mustPartition(t, e, "t", 3).Info().LogEndOffset; n != 0 {
		t.Fatalf("re-created topic kept %d records", n)
	}
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if exists(0) || exists(3) {
		t.Fatal("delete left partition directories")
	}
	if err := e.SyncTopic(TopicSpec{Name: "x", ID: id1, Partitions: 1, Hosted: []int32{1}}); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("hosted partition out of range: %v", err)
	}
}
