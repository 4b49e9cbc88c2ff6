package engine

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/vfs"
)

// TestCrashKeepsAcknowledgedRecords appends from several goroutines with
// FsyncAlways, crashes the file system at a random moment (keeping a random
// torn prefix of unsynced bytes), reopens, and checks that every
// acknowledged record is there, in order, and that the log is contiguous.
// On the io_uring path the ring's writes are unsynced until their
// fdatasync completes (vfs.Synced), so the crash drops them the same way.
// acknowledged record is there, in order, and that the log is contiguous.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	forEachIOPath(t, testCrashKeepsAcknowledgedRecords)
}

func testCrashKeepsAcknowledgedRecords(t *testing.T, mode string) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			mem := crashableFS(t, mode)
			cfg := ioConfig("/data", mode)
			cfg.FS = mem
			e := mustOpen(t, cfg)
			checkIOPath(t, e, mode)
			if _, err := e.CreateTopic("c", 2, map[string]string{"segment.bytes": "2500", "index.interval.bytes": "300"}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			acked := map[int32]map[int64]string{0: {}, 1: {}}
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					part := int32(w % 2)
					p, _ := e.Partition("c", part)
					for i := 0; i < 2000; i++ {
						v := fmt.Sprintf("w%d-%d", w, i)
						aw, err := p.Append(valuesBatch(v, 1+i%3))
						if err != nil {
							return
						}
						if !awaitAck(aw, &mu, acked[part], v) {
							return
						}
					}
				}()
			}
			// Real time passes on purpose: the crash lands 1-30 ms into
			// the appends, wherever the writers are by then.
			time.Sleep(time.Duration(1+rng.Intn(30)) * time.Millisecond)
			after := mem.Crash(vfs.CrashOptions{TornTail: true, Seed: seed})
			wg.Wait()
			e.Close() // fails on the crashed FS; it must only stop goroutines

			cfg.FS = after
			e2 := mustOpen(t, cfg)
			defer e2.Close()
			for part := int32(0); part < 2; part++ {
				p := mustPartition(t, e2, "c", part)
				recs := checkAcked(t, p, acked[part], fmt.Sprintf("partition %d", part))
				if len(acked[part]) == 0 && seed == 1 {
					t.Logf("partition %d: nothing acked before the crash", part)
				}
				// The recovered log takes appends at its end.
				res := appendWait(t, p, valuesBatch("after", 1))
				if res.BaseOffset != int64(len(recs)) {
					t.Fatalf("append after recovery at %d, want %d", res.BaseOffset, len(recs))
				}
			}
		})
	}
}

// valuesBatch returns n records valued prefix/0 .. prefix/n-1.
func valuesBatch(prefix string, n int) []byte {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s/%d", prefix, i)
	}
	return batchtest.Values(vs...)
}

func flipByte(t *testing.T, fs vfs.FS, path string, pos int64) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, pos)
	b[0] ^= 0x40
	f.WriteAt(b, pos)
	f.Datasync()
}

func TestCorruptSealedSegmentFailsOpen(t *testing.T) {
	forEachIOPath(t, testCorruptSealedSegmentFailsOpen)
}

func testCorruptSealedSegmentFailsOpen(t *testing.T, mode string) {
	mem := crashableFS(t, mode)
	cfg := ioConfig("/data", mode)
	cfg.FS = mem
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	e.CreateTopic("s", 1, map[string]string{"segment.bytes": "1000"})
	p := mustPartition(t, e, "s", 0)
	for i := int64(0); i < 40; i++ {
		appendWait(t, p, batchOf(i, 1))
	}
	after := mem.Crash(vfs.CrashOptions{})
	e.Close()
	seg := filepath.Join("/data/s-0", segmentName(0, logSuffix))
	flipByte(t, after, seg, 200)
	// Without a checkpoint every segment is scanned, sealed ones included.
	// The roll's checkpoint is written in the background and may not have
	// happened before the crash.
	if err := after.Remove("/data/" + checkpointName); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	cfg.FS = after
	_, err := Open(cfg)
	if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "at byte ") {
		t.Fatalf("Open err %v, want ErrCorruptLog naming %s and a position", err, seg)
	}
	t.Log(err)
}

func TestCorruptBeforeRecoveryPointFailsOpen(t *testing.T) {
	forEachIOPath(t, testCorruptBeforeRecoveryPointFailsOpen)
}

func testCorruptBeforeRecoveryPointFailsOpen(t *testing.T, mode string) {
	dir := t.TempDir()
	e := mustOpen(t, ioConfig(dir, mode))
	checkIOPath(t, e, mode)
	e.CreateTopic("r", 1, nil)
	p := mustPartition(t, e, "r", 0)
	var sizes int64
	for i := int64(0); i < 10; i++ {
		b := batchOf(i, 1)
		sizes += int64(len(b))
		appendWait(t, p, b)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Simulate an unclean shutdown with a checkpoint covering everything.
	os.Remove(filepath.Join(dir, cleanMarkerName))
	seg := filepath.Join(dir, "r-0", segmentName(0, logSuffix))
	flipByte(t, vfs.Default, seg, sizes/2)
	_, err := Open(ioConfig(dir, mode))
	if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("Open err %v, want ErrCorruptLog naming %s", err, seg)
	}
	t.Log(err)
}

func TestTornTailIsTruncated(t *testing.T) {
	forEachIOPath(t, testTornTailIsTruncated)
}

func testTornTailIsTruncated(t *testing.T, mode string) {
	dir := t.TempDir()
	cfg := ioConfig(dir, mode)
	cfg.Fsync = FsyncNever
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	e.CreateTopic("tt", 1, nil)
	p := mustPartition(t, e, "tt", 0)
	for i := int64(0); i < 10; i++ {
		appendWait(t, p, batchOf(i, 1))
	}
	e.writeCheckpoint() // recovery point 0: nothing was flushed
	seg := filepath.Join(dir, "tt-0", segmentName(0, logSuffix))
	st, _ := os.Stat(seg)
	// Kill without Close, then add garbage after the last whole batch.
	e.closed.Store(true)
	f, _ := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("garbage that is not a batch header at all, 61 bytes or more........"))
	f.Close()
	e2 := mustOpen(t, cfg)
	defer e2.Close()
	p2 := mustPartition(t, e2, "tt", 0)
	if end := p2.Info().LogEndOffset; end != 10 {
		t.Fatalf("log end %d after truncation, want 10", end)
	}
	checkSequence(t, readAll(t, p2, 0), 0, val)
	if st2, _ := os.Stat(seg); st2.Size() != st.Size() {
		t.Fatalf("size %d after recovery, want %d", st2.Size(), st.Size())
	}
}
