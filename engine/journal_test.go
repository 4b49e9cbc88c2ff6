package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/internal/vfs"
)

// Crash tests of the broker-wide journal, on both write paths. A MemFS
// crash keeps only what was synced: segment bytes the journal covered but
// no checkpoint synced yet vanish, so only the replay brings acknowledged
// records back.

// journalEngine opens an engine on a crashable FS of write path mode.
func journalEngine(t *testing.T, mode string) (*vfs.MemFS, Config, *Engine) {
	t.Helper()
	mem := crashableFS(t, mode)
	cfg := ioConfig("/data", mode)
	cfg.FS = mem
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	if e.j == nil {
		e.Close()
		t.Fatal("no journal under fsync always")
	}
	return mem, cfg, e
}

// reopenAfterCrash crashes mem (the engine on it is closed, which fails)
// and opens an engine on what survived.
func reopenAfterCrash(t *testing.T, mem *vfs.MemFS, cfg Config, e *Engine, torn bool) (*vfs.MemFS, *Engine) {
	t.Helper()
	after := mem.Crash(vfs.CrashOptions{TornTail: torn, Seed: 7})
	e.Close()
	cfg.FS = after
	return after, mustOpen(t, cfg)
}

func fileSize(t *testing.T, fs vfs.FS, path string) int64 {
	t.Helper()
	st, err := fs.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

// checkValues fails unless p holds exactly want (one value per record)
// from offset 0.
func checkValues(t *testing.T, p *Partition, want []string) {
	t.Helper()
	recs := readAll(t, p, 0)
	if len(recs) != len(want) {
		t.Fatalf("%s-%d: %d records, want %d", p.Topic(), p.Index(), len(recs), len(want))
	}
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != want[i] {
			t.Fatalf("%s-%d record %d: offset %d value %q, want %q", p.Topic(), p.Index(), i, r.Offset, r.Value, want[i])
		}
	}
}

// TestJournalReplayAfterPowerLoss: acknowledged appends of several
// partitions, whose segment bytes were never synced, come back from the
// journal after a power cut.
func TestJournalReplayAfterPowerLoss(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem, cfg, e := journalEngine(t, mode)
		if _, err := e.CreateTopic("r", 4, nil); err != nil {
			t.Fatal(err)
		}
		want := map[int32][]string{}
		for i := 0; i < 40; i++ {
			part := int32(i % 4)
			v := fmt.Sprintf("v%d", i)
			appendWait(t, mustPartition(t, e, "r", part), valuesBatch(v, 1))
			want[part] = append(want[part], v+"/0")
		}
		st := e.Stats()
		if st.JournalWrites == 0 || st.JournalRecords < 40 {
			t.Fatalf("journal writes %d records %d", st.JournalWrites, st.JournalRecords)
		}
		after, e2 := reopenAfterCrash(t, mem, cfg, e, false)
		defer e2.Close()
		if n := e2.Stats().JournalReplayed; n < 40 {
			t.Fatalf("replayed %d records, want at least 40", n)
		}
		_ = after
		for part := int32(0); part < 4; part++ {
			checkValues(t, mustPartition(t, e2, "r", part), want[part])
		}
	})
}

// TestJournalSegmentsUnsyncedWithoutReplay shows what the replay repairs:
// after the same power cut, the segment file alone lost the acknowledged
// bytes (the journal, not a segment fdatasync, made them durable).
func TestJournalSegmentsUnsyncedWithoutReplay(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem, _, e := journalEngine(t, mode)
		if _, err := e.CreateTopic("u", 1, nil); err != nil {
			t.Fatal(err)
		}
		p := mustPartition(t, e, "u", 0)
		for i := 0; i < 10; i++ {
			appendWait(t, p, valuesBatch("x", 1))
		}
		after := mem.Crash(vfs.CrashOptions{})
		e.Close()
		seg := filepath.Join("/data", "u-0", segmentName(0, logSuffix))
		if n := fileSize(t, after, seg); n != 0 {
			t.Fatalf("segment holds %d bytes after the crash: the test does not show the replay", n)
		}
		if n := fileSize(t, after, journalPath("/data")); n != testJournalBytes {
			t.Fatalf("journal is %d bytes, want %d", n, testJournalBytes)
		}
	})
}

// journalRecords lists the valid records of a journal file from its
// checkpoint: position and partition name.
func journalRecords(t *testing.T, fs vfs.FS) (pos []int64, names []string) {
	t.Helper()
	f, err := fs.OpenFile(journalPath("/data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	j := &journal{f: f, path: journalPath("/data")}
	if j.size, err = f.Size(); err != nil {
		t.Fatal(err)
	}
	start, err := j.readSlots()
	if err != nil {
		t.Fatal(err)
	}
	at, seq := start.pos, start.seq
	h := make([]byte, journalRecFixed+journalMaxName)
	for {
		if _, err := f.ReadAt(h[:journalRecFixed], at); err != nil || be.Uint32(h) != journalRecMagic || be.Uint64(h[8:]) != seq {
			return pos, names
		}
		nl, dl := int64(be.Uint16(h[18:])), int64(be.Uint32(h[20:]))
		f.ReadAt(h[journalRecFixed:journalRecFixed+nl], at+journalRecFixed)
		pos = append(pos, at)
		names = append(names, string(h[journalRecFixed:journalRecFixed+nl]))
		at += journalRecFixed + nl + dl
		if h[17]&journalFlagLast != 0 {
			at = alignJournal(at)
		}
		seq++
	}
}

// TestJournalTornTail: a damaged last journal record (a torn write) ends
// the replay there; what it held was never acknowledged, and everything
// before it comes back.
func TestJournalTornTail(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem, cfg, e := journalEngine(t, mode)
		if _, err := e.CreateTopic("t", 1, nil); err != nil {
			t.Fatal(err)
		}
		p := mustPartition(t, e, "t", 0)
		var want []string
		for i := 0; i < 6; i++ {
			v := fmt.Sprintf("t%d", i)
			appendWait(t, p, valuesBatch(v, 1))
			want = append(want, v+"/0")
		}
		after := mem.Crash(vfs.CrashOptions{})
		e.Close()
		pos, _ := journalRecords(t, after)
		if len(pos) != 6 {
			t.Fatalf("%d journal records, want 6 (one per append)", len(pos))
		}
		// Tear the last record: flip a byte of its data.
		flipByte(t, after, journalPath("/data"), pos[5]+journalRecFixed+int64(len("t-0"))+30)
		cfg.FS = after
		e2 := mustOpen(t, cfg)
		defer e2.Close()
		checkValues(t, mustPartition(t, e2, "t", 0), want[:5])
		if n := e2.Stats().JournalReplayed; n != 5 {
			t.Fatalf("replayed %d records, want 5", n)
		}
	})
}

// TestJournalWrapCheckpointCrash: appends wrap a small journal many times
// (checkpoints moving its start), from several goroutines, and a power
// cut at a random moment (mid-checkpoint included) keeps every
// acknowledged record.
func TestJournalWrapCheckpointCrash(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		for seed := int64(1); seed <= 4; seed++ {
			mem, cfg, e := journalEngine(t, mode)
			if _, err := e.CreateTopic("w", 3, map[string]string{"segment.bytes": "20000"}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			acked := map[int32]map[int64]string{0: {}, 1: {}, 2: {}}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for w := 0; w < 3; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := mustPartition(t, e, "w", int32(w))
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						v := fmt.Sprintf("w%d-%d-%0200d", w, i, i)
						aw, err := p.Append(valuesBatch(v, 4))
						if err != nil {
							return
						}
						if !awaitAck(aw, &mu, acked[int32(w)], v) {
							return
						}
					}
				}()
			}
			// Enough bytes to wrap the journal a few times (checked below).
			testwait.Until(5*time.Second, func() bool { return e.Stats().JournalBytes >= 3*testJournalBytes+int64(seed)*20000 })
			st := e.Stats()
			after := mem.Crash(vfs.CrashOptions{TornTail: true, Seed: seed})
			close(stop)
			wg.Wait()
			e.Close()
			if st.JournalCheckpoints == 0 || st.JournalBytes < 2*testJournalBytes {
				t.Fatalf("seed %d: %d checkpoints, %d journal bytes: the journal did not wrap", seed, st.JournalCheckpoints, st.JournalBytes)
			}
			cfg.FS = after
			e2 := mustOpen(t, cfg)
			for part := int32(0); part < 3; part++ {
				checkAcked(t, mustPartition(t, e2, "w", part), acked[part], fmt.Sprintf("seed %d partition %d", seed, part))
			}
			e2.Close()
		}
	})
}

// checkAcked reads p after a crash: the offsets are a gapless sequence
// from 0 and every acknowledged value (by offset) was recovered. It
// returns the records read.
func checkAcked(t *testing.T, p *Partition, acked map[int64]string, what string) []batchtest.DecodedRecord {
	t.Helper()
	recs := readAll(t, p, 0)
	checkSequence(t, recs, 0, nil)
	got := map[int64]string{}
	for _, r := range recs {
		got[r.Offset] = string(r.Value)
	}
	for o, v := range acked {
		if got[o] != v {
			t.Fatalf("%s offset %d: acked %q, recovered %q (%d records)", what, o, v, got[o], len(recs))
		}
	}
	return recs
}

// awaitAck waits for an append of valuesBatch(v, n) and records its
// values by offset in acked (under mu); false when it failed.
func awaitAck(aw AppendWaiter, mu *sync.Mutex, acked map[int64]string, v string) bool {
	res, err := aw.Result()
	if err != nil {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	for o := res.BaseOffset; o <= res.LastOffset; o++ {
		acked[o] = fmt.Sprintf("%s/%d", v, o-res.BaseOffset)
	}
	return true
}

// TestJournalTruncateThenCrash: a truncation checkpoints the journal
// first, so a replay after a crash cannot write the removed batches back.
func TestJournalTruncateThenCrash(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem, cfg, e := journalEngine(t, mode)
		if _, err := e.CreateTopic("tr", 1, nil); err != nil {
			t.Fatal(err)
		}
		p := mustPartition(t, e, "tr", 0)
		var want []string
		for i := 0; i < 10; i++ {
			v := fmt.Sprintf("a%d", i)
			appendWait(t, p, valuesBatch(v, 1))
			want = append(want, v+"/0")
		}
		if err := p.TruncateTo(5); err != nil {
			t.Fatal(err)
		}
		// As long as the removed batch: a replay of the removed ones
		// would line up behind it and read as valid.
		appendWait(t, p, valuesBatch("bb", 1))
		want = append(want[:5], "bb/0")
		after, e2 := reopenAfterCrash(t, mem, cfg, e, false)
		defer e2.Close()
		checkValues(t, mustPartition(t, e2, "tr", 0), want)

		// TruncateFullyAndStartAt as well.
		p2 := mustPartition(t, e2, "tr", 0)
		if err := p2.TruncateFullyAndStartAt(0); err != nil {
			t.Fatal(err)
		}
		_, e3 := reopenAfterCrash(t, after, cfg, e2, false)
		defer e3.Close()
		checkValues(t, mustPartition(t, e3, "tr", 0), nil)
	})
}

// TestJournalDeleteRecreateThenCrash: records of a deleted topic are not
// replayed into a new topic of the same name.
func TestJournalDeleteRecreateThenCrash(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem, cfg, e := journalEngine(t, mode)
		if _, err := e.CreateTopic("d", 1, nil); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			appendWait(t, mustPartition(t, e, "d", 0), valuesBatch(fmt.Sprintf("old%d", i), 1))
		}
		if err := e.DeleteTopic("d"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateTopic("d", 1, nil); err != nil {
			t.Fatal(err)
		}
		// As long as an old batch: replayed old batches would line up
		// behind it and read as valid.
		appendWait(t, mustPartition(t, e, "d", 0), valuesBatch("nnnn", 1))
		_, e2 := reopenAfterCrash(t, mem, cfg, e, false)
		defer e2.Close()
		checkValues(t, mustPartition(t, e2, "d", 0), []string{"nnnn/0"})
	})
}

// TestJournalCleanerSwapThenCrash: the cleaner rewrites sealed segments
// whose appends the journal may still hold; a replay skips records of a
// segment that is no longer its partition's last (it was fdatasynced in
// full when it was rolled), so the cleaned copy stays as it is.
func TestJournalCleanerSwapThenCrash(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem, cfg, e := journalEngine(t, mode)
		if _, err := e.CreateTopic("c", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "400", "min.cleanable.dirty.ratio": "0.01"}); err != nil {
			t.Fatal(err)
		}
		p := mustPartition(t, e, "c", 0)
		for i := 0; i < 30; i++ {
			appendWait(t, p, keyed(time.Now().UnixMilli(), kv{key: fmt.Sprintf("k%d", i%3), value: fmt.Sprintf("v%d", i)}))
		}
		res, err := p.Compact()
		if err != nil {
			t.Fatal(err)
		}
		if res.SegmentsRewritten == 0 {
			t.Fatalf("nothing cleaned: %+v", res)
		}
		before := readAll(t, p, 0)
		_, e2 := reopenAfterCrash(t, mem, cfg, e, false)
		defer e2.Close()
		got := readAll(t, mustPartition(t, e2, "c", 0), 0)
		if len(got) != len(before) {
			t.Fatalf("%d records after the crash, %d before", len(got), len(before))
		}
		for i := range got {
			if got[i].Offset != before[i].Offset || string(got[i].Value) != string(before[i].Value) {
				t.Fatalf("record %d: %d %q after the crash, %d %q before", i, got[i].Offset, got[i].Value, before[i].Offset, before[i].Value)
			}
		}
	})
}

// TestJournalFullWaitsForCheckpoint: while checkpoints are slow the
// writer waits for them instead of overwriting live records: appends
// stall (backpressure), and every acknowledged one survives a crash.
func TestJournalFullWaitsForCheckpoint(t *testing.T) {
	forEachIOPath(t, func(t *testing.T, mode string) {
		mem := crashableFS(t, mode)
		cfg := ioConfig("/data", mode)
		cfg.FS = mem
		cfg.JournalBytes = MinJournalBytes
		var slow sync.Mutex
		journalCheckpointHook = func() { slow.Lock(); slow.Unlock() } //nolint:staticcheck // a gate, not a critical section
		defer func() { journalCheckpointHook = nil }()
		e := mustOpen(t, cfg)
		if _, err := e.CreateTopic("f", 2, nil); err != nil {
			t.Fatal(err)
		}
		slow.Lock() // checkpoints wait from here on
		var want [2][]string
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 200; i++ {
				part := int32(i % 2)
				v := fmt.Sprintf("f%d-%0500d", i, i)
				appendWait(t, mustPartition(t, e, "f", part), valuesBatch(v, 1))
				want[part] = append(want[part], v+"/0")
			}
		}()
		select {
		case <-done:
			slow.Unlock()
			t.Fatal("200 appends of 500+ bytes went through a 64 KiB journal without a checkpoint")
		case <-time.After(300 * time.Millisecond):
		}
		if f := e.Stats().JournalFill; f < 0.5 || f > 1 {
			slow.Unlock()
			t.Fatalf("journal fill %.2f while the writer waits", f)
		}
		slow.Unlock()
		<-done
		if e.Stats().JournalCheckpoints == 0 {
			t.Fatal("no checkpoint")
		}
		after, e2 := reopenAfterCrash(t, mem, cfg, e, true)
		_ = after
		defer e2.Close()
		for part := int32(0); part < 2; part++ {
			checkValues(t, mustPartition(t, e2, "f", part), want[part])
		}
	})
}

// TestJournalConfig: the size is validated, and --journal=false (or
// another fsync policy) keeps the per-partition path with no journal.
func TestJournalConfig(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.JournalBytes = MinJournalBytes - 1
	if err := cfg.Validate(); err == nil {
		t.Fatal("a journal below MinJournalBytes validated")
	}
	cfg.Journal = false
	if err := cfg.Validate(); err != nil {
		t.Fatalf("journal off: %v", err)
	}
	e := mustOpen(t, cfg)
	defer e.Close()
	if e.j != nil {
		t.Fatal("journal in use with Journal false")
	}
	if _, err := os.Stat(journalPath(cfg.Dir)); !os.IsNotExist(err) {
		t.Fatalf("journal file created with Journal false: %v", err)
	}
}
