package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/ringlog/ringlog/internal/vfs"
)

// TestJournalDirectReplay: on the OS file system the journal is written
// O_DIRECT with RWF_DSYNC. Records so written come back after the
// segments lost every byte written since the last checkpoint (what a
// power cut does to unsynced page cache), on both write paths.
func TestJournalDirectReplay(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		dir := t.TempDir()
		cfg := ioConfig(dir, mode)
		e := mustOpen(t, cfg)
		if e.j == nil || !e.j.direct() {
			e.Close()
			t.Skip("the test directory's file system refuses O_DIRECT")
		}
		if _, err := e.CreateTopic("d", 3, nil); err != nil {
			t.Fatal(err)
		}
		want := map[int32][]string{}
		for i := 0; i < 30; i++ {
			part := int32(i % 3)
			v := fmt.Sprintf("d%d", i)
			// Appends of different sizes, so records straddle blocks.
			appendWait(t, mustPartition(t, e, "d", part), valuesBatch(v, 1+i%4))
			for k := 0; k < 1+i%4; k++ {
				want[part] = append(want[part], fmt.Sprintf("%s/%d", v, k))
			}
		}
		if st := e.Stats(); st.JournalCheckpoints != 0 {
			t.Fatalf("%d checkpoints: the test needs the records in the journal only", st.JournalCheckpoints)
		}
		// The journal as the power cut leaves it: durable, its start
		// before the records.
		jbytes, err := os.ReadFile(journalPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		if err := os.WriteFile(journalPath(dir), jbytes, 0o644); err != nil {
			t.Fatal(err)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "d-*", "*"+logSuffix))
		if len(segs) != 3 {
			t.Fatalf("segments %v", segs)
		}
		for _, s := range segs {
			if err := os.Truncate(s, 0); err != nil {
				t.Fatal(err)
			}
		}
		e2 := mustOpen(t, cfg)
		defer e2.Close()
		if n := e2.Stats().JournalReplayed; n != 30 {
			t.Fatalf("replayed %d records, want 30", n)
		}
		for part := int32(0); part < 3; part++ {
			checkValues(t, mustPartition(t, e2, "d", part), want[part])
		}
	})
}

// TestJournalReplaysVersion1: a journal written by an earlier release
// (version 1: records back to back, no block padding) is replayed, and
// the journal goes on in version 2 from there, through a later crash.
func TestJournalReplaysVersion1(t *testing.T) {
	mem := vfs.NewMem()
	cfg := ioConfig("/data", "sync")
	cfg.FS = mem
	e := mustOpen(t, cfg)
	if _, err := e.CreateTopic("v", 1, nil); err != nil {
		t.Fatal(err)
	}
	e.Close()

	// Two appends in a version 1 journal, after a version 1 slot.
	b0, b1 := valuesBatch("old0", 1), valuesBatch("old1", 1)
	binary.BigEndian.PutUint64(b1, 1) // base offset 1
	f, err := mem.OpenFile(journalPath("/data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	slot := make([]byte, journalBlock)
	be.PutUint32(slot[0:], journalSlotMagic)
	be.PutUint32(slot[4:], 1)
	be.PutUint64(slot[12:], 100)
	be.PutUint64(slot[20:], journalDataStart)
	be.PutUint64(slot[28:], 7)
	be.PutUint64(slot[36:], testJournalBytes)
	be.PutUint32(slot[8:], crc32.Checksum(slot[12:44], journalCRC))
	var recs []byte
	for i, b := range [][]byte{b0, b1} {
		h := make([]byte, journalRecFixed+len("v-0"))
		putJournalHeader(h, 7+uint64(i), journalKindData, 0, "v-0", 0, int64(i*len(b0)), [][]byte{b})
		recs = append(append(recs, h...), b...)
	}
	if _, err := f.WriteAt(slot, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(recs, journalDataStart); err != nil {
		t.Fatal(err)
	}
	f.Datasync()
	f.Close()

	e2 := mustOpen(t, cfg)
	if n := e2.Stats().JournalReplayed; n != 2 {
		t.Fatalf("replayed %d version 1 records, want 2", n)
	}
	if e2.j.version != journalVersion {
		t.Fatalf("journal version %d after Open, want %d", e2.j.version, journalVersion)
	}
	p := mustPartition(t, e2, "v", 0)
	appendWait(t, p, valuesBatch("new", 1))
	after, e3 := reopenAfterCrash(t, mem, cfg, e2, false)
	_ = after
	defer e3.Close()
	checkValues(t, mustPartition(t, e3, "v", 0), []string{"old0/0", "old1/0", "new/0"})
}
