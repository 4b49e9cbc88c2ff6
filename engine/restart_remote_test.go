package engine

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/vfs"
)

// remoteSource builds the remote tier's view of a leader's log: a
// partition with idempotent producers' batches, its producer snapshot at
// the log end and its producers, as the uploader would have stored them.
func remoteSource(t *testing.T, e *Engine) (offset int64, snap []byte, producers []producerstate.ProducerInfo) {
	t.Helper()
	if _, err := e.CreateTopic("src", 1, nil); err != nil {
		t.Fatal(err)
	}
	src := mustPartition(t, e, "src", 0)
	appendWait(t, src, idem(7, 0, 0, false, 3))
	appendWait(t, src, idem(8, 2, 0, false, 1))
	appendWait(t, src, idem(7, 0, 3, false, 2))
	src.mu.RLock()
	snap = src.ps.Snapshot()
	src.mu.RUnlock()
	return src.LogEndOffset(), snap, src.Producers()
}

// remoteEpochs is a history with an entry at the restart offset (which
// says nothing about the restarted log) and equal start offsets (an epoch
// that wrote nothing).
func remoteEpochs(offset int64) []epochcache.Entry {
	return []epochcache.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 2}, {Epoch: 4, StartOffset: 2}, {Epoch: 6, StartOffset: offset}}
}

func TestRestartFromRemote(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	offset, snap, producers := remoteSource(t, e)
	if _, err := e.CreateTopic("foll", 1, map[string]string{"segment.bytes": "200"}); err != nil {
		t.Fatal(err)
	}
	foll := mustPartition(t, e, "foll", 0)
	for i := range 3 {
		appendWait(t, foll, valuesBatch(fmt.Sprint("old", i), 2))
	}
	wantUnchanged := func(what string) {
		t.Helper()
		if foll.LogStartOffset() != 0 || foll.LogEndOffset() != 6 || len(readAll(t, foll, 0)) != 6 {
			t.Fatalf("%s changed the log: start %d end %d", what, foll.LogStartOffset(), foll.LogEndOffset())
		}
	}
	// Refusals change nothing.
	if err := foll.RestartFromRemote(offset, []byte("garbage"), nil); !errors.Is(err, producerstate.ErrCorruptSnapshot) {
		t.Fatalf("garbage snapshot: %v", err)
	}
	wantUnchanged("garbage snapshot")
	if err := foll.RestartFromRemote(offset+1, snap, nil); err == nil {
		t.Fatal("snapshot of another offset accepted")
	}
	wantUnchanged("snapshot of another offset")
	if err := foll.RestartFromRemote(offset, snap, []epochcache.Entry{{Epoch: 3, StartOffset: 0}, {Epoch: 2, StartOffset: 1}}); err == nil {
		t.Fatal("epochs out of order accepted")
	}
	wantUnchanged("epochs out of order")

	if err := foll.RestartFromRemote(offset, snap, remoteEpochs(offset)); err != nil {
		t.Fatal(err)
	}
	check := func(what string, p *Partition, end int64) {
		t.Helper()
		if p.LocalLogStartOffset() != offset || p.LogStartOffset() != offset || p.LogEndOffset() != end || p.HighWatermark() != end {
			t.Fatalf("%s: local start %d start %d end %d hw %d, want start %d end %d", what, p.LocalLogStartOffset(), p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(), offset, end)
		}
		if got, want := p.EpochEntries(), []epochcache.Entry{{Epoch: 4, StartOffset: offset}}; !slices.Equal(got, want) {
			t.Fatalf("%s: epochs %v, want %v", what, got, want)
		}
	}
	check("after restart", foll, offset)
	if got := foll.Producers(); !reflect.DeepEqual(got, producers) {
		t.Fatalf("producers %+v, want %+v", got, producers)
	}
	if _, err := foll.Read(offset-1, 1<<10, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the restart: %v", err)
	}
	// The remote tier below the restart point still counts for the whole
	// log's start.
	if err := foll.SetRemoteState(RemoteState{Enabled: true, LogStart: 0, UploadedNext: offset}); err != nil {
		t.Fatal(err)
	}
	if foll.LogStartOffset() != 0 || foll.LocalLogStartOffset() != offset {
		t.Fatalf("with the remote tier: start %d local start %d", foll.LogStartOffset(), foll.LocalLogStartOffset())
	}
	// The restored state deduplicates: a retry of producer 7's last batch
	// gets its original offsets, its next batch the next offset.
	if res := appendWait(t, foll, idem(7, 0, 3, false, 2)); res.BaseOffset != 4 || res.LastOffset != 5 {
		t.Fatalf("retry answered at [%d, %d], want [4, 5]", res.BaseOffset, res.LastOffset)
	}
	if res := appendWait(t, foll, idem(7, 0, 5, false, 1)); res.BaseOffset != offset {
		t.Fatalf("next batch at %d, want %d", res.BaseOffset, offset)
	}
	wantProducers := foll.Producers()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := mustOpen(t, testConfig(dir))
	defer e2.Close()
	p2 := mustPartition(t, e2, "foll", 0)
	check("after reopen", p2, offset+1)
	if got := p2.Producers(); !reflect.DeepEqual(got, wantProducers) {
		t.Fatalf("producers after reopen %+v, want %+v", got, wantProducers)
	}
}

// TestRestartFromRemoteCrash fails each file operation of a restart in
// turn, crashes the file system there and reopens: the log must be a
// prefix of the old one (possibly empty) or the restarted one with its
// producer state, never a mix, and a second restart must then succeed.
func TestRestartFromRemoteCrash(t *testing.T) {
	ops := []struct {
		op   vfs.Op
		name string
	}{{vfs.OpRemove, "remove"}, {vfs.OpSyncDir, "syncdir"}, {vfs.OpOpen, "open"}, {vfs.OpWrite, "write"}, {vfs.OpSync, "sync"}, {vfs.OpRename, "rename"}}
	for _, o := range ops {
		for skip := 0; ; skip++ {
			if skip > 200 {
				t.Fatalf("%s: fault never left the restart alone", o.name)
			}
			if !crashDuringRestart(t, fmt.Sprintf("%s#%d", o.name, skip), vfs.Fault{Op: o.op, PathContains: "foll-0", Skip: skip, Count: 1}) {
				break
			}
		}
	}
}

// crashDuringRestart runs one case and reports whether the fault fired.
func crashDuringRestart(t *testing.T, name string, fault vfs.Fault) bool {
	t.Helper()
	mem := vfs.NewMem()
	cfg := ioConfig("/data", "sync")
	cfg.FS = mem
	e := mustOpen(t, cfg)
	offset, snap, producers := remoteSource(t, e)
	if _, err := e.CreateTopic("foll", 1, map[string]string{"segment.bytes": "200"}); err != nil {
		t.Fatal(err)
	}
	foll := mustPartition(t, e, "foll", 0)
	// The old log has epochs and producers of its own, which must come
	// back whole or not at all.
	if err := foll.AssignLeaderEpoch(2); err != nil {
		t.Fatal(err)
	}
	const oldRecords = 24
	for i := range oldRecords / 2 {
		appendWait(t, foll, valuesBatch(fmt.Sprint("old", i), 2))
	}
	oldEpochs := foll.EpochEntries()
	if len(oldEpochs) != 1 {
		t.Fatalf("old epochs %v", oldEpochs)
	}
	if n := len(foll.segs); n < 3 {
		t.Fatalf("old log has %d segments, want several", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	efs := vfs.Wrap(mem)
	cfg.FS = efs
	e = mustOpen(t, cfg)
	foll = mustPartition(t, e, "foll", 0)
	efs.Inject(fault)
	rerr := foll.RestartFromRemote(offset, snap, remoteEpochs(offset))
	fired := efs.Fired() > 0
	if fired == (rerr == nil) {
		t.Fatalf("%s: fault fired %v, restart error %v", name, fired, rerr)
	}
	after := mem.Crash(vfs.CrashOptions{TornTail: true, Seed: int64(len(name))})
	e.Close() // fails on the crashed FS; it only stops goroutines

	cfg.FS = after
	e2, err := Open(cfg)
	if err != nil {
		t.Fatalf("%s: reopen: %v", name, err)
	}
	defer e2.Close()
	p := mustPartition(t, e2, "foll", 0)
	start, end := p.LogStartOffset(), p.LogEndOffset()
	t.Logf("%s: restart error %v; reopened [%d, %d)", name, rerr, start, end)
	switch {
	case start == offset && end == offset:
		if got := p.Producers(); !reflect.DeepEqual(got, producers) {
			t.Fatalf("%s: restarted log with producers %+v, want %+v", name, got, producers)
		}
		// Open trims an empty log's epochs; nothing of the old log's may
		// be there.
		if got := p.EpochEntries(); len(got) > 0 && !slices.Equal(got, []epochcache.Entry{{Epoch: 4, StartOffset: offset}}) {
			t.Fatalf("%s: restarted log with epochs %v", name, got)
		}
	case start == 0 && end <= oldRecords:
		recs := readAll(t, p, 0)
		if int64(len(recs)) != end {
			t.Fatalf("%s: old log [0, %d) reads %d records", name, end, len(recs))
		}
		for i, r := range recs {
			if want := fmt.Sprintf("old%d/%d", i/2, i%2); string(r.Value) != want {
				t.Fatalf("%s: offset %d holds %q, want %q", name, i, r.Value, want)
			}
		}
		if ps := p.Producers(); len(ps) != 0 {
			t.Fatalf("%s: old log with the remote producers %+v", name, ps)
		}
		if want := oldEpochs[:min(end, 1)]; !slices.Equal(p.EpochEntries(), want) {
			t.Fatalf("%s: old log [0, %d) with epochs %v, want %v", name, end, p.EpochEntries(), want)
		}
	default:
		t.Fatalf("%s: reopened log [%d, %d) is neither the old one nor the restarted one at %d", name, start, end, offset)
	}
	if !fired {
		return false
	}
	if err := p.RestartFromRemote(offset, snap, remoteEpochs(offset)); err != nil {
		t.Fatalf("%s: restart after the crash: %v", name, err)
	}
	if got := p.Producers(); p.LogStartOffset() != offset || !reflect.DeepEqual(got, producers) {
		t.Fatalf("%s: second restart: start %d producers %+v", name, p.LogStartOffset(), got)
	}
	return true
}
