package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/vfs"
)

func TestRemoteConfigDefaultsAndParse(t *testing.T) {
	d := DefaultTopicConfig()
	if d.RemoteStorageEnable || d.LocalRetentionMs != -2 || d.LocalRetentionBytes != -2 {
		t.Fatalf("defaults: remote %v local ms %d bytes %d", d.RemoteStorageEnable, d.LocalRetentionMs, d.LocalRetentionBytes)
	}
	if ms, b := d.LocalRetention(); ms != d.RetentionMs || b != d.RetentionBytes {
		t.Fatalf("-2 resolves to %d/%d, want retention.* %d/%d", ms, b, d.RetentionMs, d.RetentionBytes)
	}
	c, err := ParseTopicConfig(d, map[string]string{"remote.storage.enable": "true", "local.retention.ms": "60000", "local.retention.bytes": "-2", "retention.bytes": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if ms, b := c.LocalRetention(); !c.RemoteStorageEnable || ms != 60000 || b != 5000 {
		t.Fatalf("parsed: remote %v local %d/%d", c.RemoteStorageEnable, ms, b)
	}
	got := map[string]ConfigEntry{}
	for _, e := range c.Entries() {
		got[e.Name] = e
	}
	for k, want := range map[string]string{"remote.storage.enable": "true", "local.retention.ms": "60000", "local.retention.bytes": "-2"} {
		if e, ok := got[k]; !ok || e.Value != want || e.IsDefault {
			t.Fatalf("Entries %s: %+v (present %v), want %q set on the topic", k, e, ok, want)
		}
	}
	if e := DefaultTopicConfig().Entries(); !strings.Contains(entryNames(e), "local.retention.bytes") {
		t.Fatalf("default Entries lack local.retention.bytes: %s", entryNames(e))
	}

	bad := []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"remote.storage.enable": "yes"}, "true or false"},
		{map[string]string{"local.retention.ms": "-3"}, "out of range"},
		{map[string]string{"local.retention.bytes": "x"}, "local.retention.bytes"},
		{map[string]string{"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, "local.retention.ms=2000 is more than retention.ms=1000"},
		{map[string]string{"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-1"}, "local.retention.ms=-1"},
		{map[string]string{"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "1001"}, "local.retention.bytes=1001 is more than retention.bytes=1000"},
		{map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}, "compacted"},
	}
	for _, b := range bad {
		_, err := ParseTopicConfig(d, b.kv)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), b.want) {
			t.Fatalf("%v: %v, want ErrInvalidConfig naming %q", b.kv, err, b.want)
		}
	}
	ok := []map[string]string{
		// An unlimited total allows any window, -1 included.
		{"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "-1"},
		{"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "99999999999"},
		{"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "1000"},
		// Kafka checks the windows only with remote storage on.
		{"retention.ms": "1000", "local.retention.ms": "2000"},
	}
	for _, kv := range ok {
		if _, err := ParseTopicConfig(d, kv); err != nil {
			t.Fatalf("%v: %v", kv, err)
		}
	}
}

func entryNames(es []ConfigEntry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Name)
	}
	return strings.Join(s, ",")
}

func TestRemoteConfigChangeAndDynamicDefaults(t *testing.T) {
	off := DefaultTopicConfig()
	on, err := ParseTopicConfig(off, map[string]string{"remote.storage.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConfigChange(on, off); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot be turned off") {
		t.Fatalf("turning remote storage off: %v", err)
	}
	if err := CheckConfigChange(off, on); err != nil {
		t.Fatalf("turning it on: %v", err)
	}
	if err := CheckConfigChange(on, on); err != nil {
		t.Fatalf("keeping it on: %v", err)
	}

	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	if _, err := e.CreateTopic("tiered", 1, map[string]string{"remote.storage.enable": "true", "retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("own", 1, map[string]string{"remote.storage.enable": "true", "local.retention.ms": "5"}); err != nil {
		t.Fatal(err)
	}
	kv, err := BrokerDefaults(map[string]string{"log.local.retention.ms": "3600000", "log.local.retention.bytes": "1048576"})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := e.SetDynamicDefaults(kv); err != nil || !changed {
		t.Fatalf("SetDynamicDefaults: %v changed=%v", err, changed)
	}
	tiered, _ := e.Topic("tiered")
	own, _ := e.Topic("own")
	if tiered.Config.LocalRetentionMs != 3600000 || tiered.Config.LocalRetentionBytes != 1048576 || own.Config.LocalRetentionMs != 5 {
		t.Fatalf("after dynamic defaults: tiered %d/%d, own %d", tiered.Config.LocalRetentionMs, tiered.Config.LocalRetentionBytes, own.Config.LocalRetentionMs)
	}
	if bk, ok := BrokerKeyFor(LocalRetentionMsKey); !ok || bk != "log.local.retention.ms" {
		t.Fatalf("BrokerKeyFor(local.retention.ms) = %q %v", bk, ok)
	}
}

// fillSegments appends n one-record batches to a topic with 500-byte
// segments (several records per segment) and returns the partition.
func fillSegments(t *testing.T, e *Engine, topic string, n int, configs map[string]string) *Partition {
	t.Helper()
	kv := map[string]string{"segment.bytes": "500", "index.interval.bytes": "0"}
	for k, v := range configs {
		kv[k] = v
	}
	if _, err := e.CreateTopic(topic, 1, kv); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, topic, 0)
	for i := range int64(n) {
		appendWait(t, p, batchOf(i, 1))
	}
	return p
}

func segBases(p *Partition) []int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []int64
	for _, s := range p.segs {
		out = append(out, s.base)
	}
	return out
}

func releaseAll(infos []SegmentInfo) {
	for i := range infos {
		infos[i].Release()
	}
}

func TestUploadableSegments(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	p := fillSegments(t, e, "t", 40, map[string]string{"remote.storage.enable": "true"})
	bases := segBases(p)
	if len(bases) < 5 {
		t.Fatalf("want at least 5 segments, have %v", bases)
	}
	infos := p.UploadableSegments(-1)
	defer releaseAll(infos)
	if len(infos) != len(bases)-1 {
		t.Fatalf("%d uploadable of %d segments, want all but the active one", len(infos), len(bases))
	}
	for i, si := range infos {
		if si.BaseOffset != bases[i] || si.NextOffset != bases[i+1] || si.Size <= 0 || si.MaxTimestamp <= 0 {
			t.Fatalf("info %d: %+v, segment bases %v", i, si, bases)
		}
	}
	// after: only segments ending above it.
	later := p.UploadableSegments(infos[1].NextOffset)
	if len(later) != len(infos)-2 || later[0].BaseOffset != infos[2].BaseOffset {
		t.Fatalf("after %d: %d infos from %d", infos[1].NextOffset, len(later), later[0].BaseOffset)
	}
	releaseAll(later)
	// A segment ending exactly at "after" is out; one ending past it in.
	if got := p.UploadableSegments(infos[0].NextOffset - 1); len(got) != len(infos) {
		t.Fatalf("after next-1: %d infos, want %d", len(got), len(infos))
	} else {
		releaseAll(got)
	}

	// The files read back as the segment was, even after DeleteRecords
	// removed it (the pin keeps the open file).
	want := make([]byte, infos[0].Size)
	if _, err := io.ReadFull(infos[0].Log(), want); err != nil {
		t.Fatal(err)
	}
	if recs, err := batchtest.Decode(want); err != nil || len(recs) == 0 || string(recs[0].Records[0].Value) != val(0) {
		t.Fatalf("segment 0 decodes to %d records (%v)", len(recs), err)
	}
	if _, err := p.AdvanceLogStart(infos[1].NextOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(infos[0].seg.path(logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("segment file still there after DeleteRecords: %v", err)
	}
	if segBases(p)[0] != infos[2].BaseOffset {
		t.Fatalf("segments after DeleteRecords: %v", segBases(p))
	}
	got, err := io.ReadAll(infos[0].Log())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pinned log after deletion: %d bytes (%v), want %d equal bytes", len(got), err, len(want))
	}
	ib, tb, err := infos[0].Indexes()
	if err != nil || len(ib) == 0 || len(ib)%indexEntrySize != 0 || len(tb) == 0 || len(tb)%timeIndexEntSize != 0 {
		t.Fatalf("indexes after deletion: %d, %d bytes (%v)", len(ib), len(tb), err)
	}
	// index.interval.bytes=0 indexes every batch: one entry per record
	// here, relative offsets 0, 1, ...
	if n := int64(len(ib) / indexEntrySize); n != infos[0].NextOffset-infos[0].BaseOffset || binary.BigEndian.Uint32(ib[8:]) != 1 {
		t.Fatalf("index of %d entries for %d offsets", n, infos[0].NextOffset-infos[0].BaseOffset)
	}
	// The time index ends with the segment's largest timestamp.
	if ts := int64(binary.BigEndian.Uint64(tb[len(tb)-timeIndexEntSize:])); ts != infos[0].MaxTimestamp {
		t.Fatalf("last time index entry %d, want max timestamp %d", ts, infos[0].MaxTimestamp)
	}
}

// Every segment's producer snapshot (taken at roll) stays until the
// segment is uploaded, beyond the usual three; the leader epochs split
// at epoch changes.
func TestUploadableSegmentsSnapshotsAndEpochs(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, map[string]string{"segment.bytes": "500", "remote.storage.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	if err := p.AssignLeaderEpoch(3); err != nil {
		t.Fatal(err)
	}
	var epoch5At int64 = -1
	for i := range int64(60) {
		if i == 25 {
			if err := p.AssignLeaderEpoch(5); err != nil {
				t.Fatal(err)
			}
			epoch5At = p.LogEndOffset()
		}
		appendWait(t, p, idem(7, 0, int32(i), false, 1))
	}
	infos := p.UploadableSegments(-1)
	defer releaseAll(infos)
	if len(infos) <= snapshotsKept+1 {
		t.Fatalf("only %d sealed segments", len(infos))
	}
	for _, si := range infos {
		b, err := si.ProducerSnapshot()
		if err != nil {
			t.Fatalf("segment [%d, %d): %v", si.BaseOffset, si.NextOffset, err)
		}
		st, _ := producerstate.New(producerstate.DefaultConfig())
		if err := st.Restore(b); err != nil || st.MapEndOffset() != si.NextOffset {
			t.Fatalf("snapshot of [%d, %d): map end %d (%v)", si.BaseOffset, si.NextOffset, st.MapEndOffset(), err)
		}
		var want []epochcache.Entry
		switch {
		case si.NextOffset <= epoch5At:
			want = []epochcache.Entry{{Epoch: 3, StartOffset: si.BaseOffset}}
		case si.BaseOffset >= epoch5At:
			want = []epochcache.Entry{{Epoch: 5, StartOffset: si.BaseOffset}}
		default:
			want = []epochcache.Entry{{Epoch: 3, StartOffset: si.BaseOffset}, {Epoch: 5, StartOffset: epoch5At}}
		}
		if !equalEpochs(si.Epochs, want) {
			t.Fatalf("segment [%d, %d) epochs %v, want %v", si.BaseOffset, si.NextOffset, si.Epochs, want)
		}
	}
	// Once uploaded (and the watermark known), old snapshots are pruned
	// again at the next roll.
	if err := p.SetRemoteState(RemoteState{Enabled: true, UploadedNext: infos[len(infos)-1].NextOffset, LogStart: 0}); err != nil {
		t.Fatal(err)
	}
	for i := range int64(10) {
		appendWait(t, p, idem(7, 0, int32(60+i), false, 1))
	}
	p.mu.RLock()
	n := len(p.listSnapshots())
	p.mu.RUnlock()
	if n > snapshotsKept {
		t.Fatalf("%d snapshots after upload, want at most %d", n, snapshotsKept)
	}
	if _, err := infos[0].ProducerSnapshot(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pruned snapshot: %v, want os.ErrNotExist", err)
	}
}

func equalEpochs(a, b []epochcache.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Nothing above the last stable offset (an open transaction) or the
// high watermark is uploadable; a truncation invalidates a listing.
func TestUploadableSegmentsStopAtLSOAndHW(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	p := fillSegments(t, e, "t", 12, map[string]string{"remote.storage.enable": "true"})
	appendWait(t, p, idem(10, 0, 0, true, 1)) // open transaction
	txnAt := p.LogEndOffset() - 1
	for i := range int64(30) {
		appendWait(t, p, batchOf(100+i, 1))
	}
	infos := p.UploadableSegments(-1)
	for _, si := range infos {
		if si.NextOffset > txnAt {
			t.Fatalf("segment [%d, %d) past the open transaction at %d is uploadable", si.BaseOffset, si.NextOffset, txnAt)
		}
	}
	n := len(infos)
	releaseAll(infos)
	w, err := p.AppendMarker(producerstate.Marker{ProducerID: 10, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
	infos = p.UploadableSegments(-1)
	defer releaseAll(infos)
	if len(infos) <= n {
		t.Fatalf("after the commit %d uploadable, before %d", len(infos), n)
	}

	// With replication owning the HW, segments above it wait.
	p.SetReplicated(true)
	p.SetHighWatermark(infos[1].NextOffset)
	if got := p.UploadableSegments(-1); len(got) != 2 {
		t.Fatalf("HW %d: %d uploadable, want 2", infos[1].NextOffset, len(got))
	} else {
		releaseAll(got)
	}
	// Truncating (a follower's divergence) makes the listing stale.
	if err := p.TruncateTo(infos[2].BaseOffset + 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := infos[3].Indexes(); !errors.Is(err, ErrSegmentChanged) {
		t.Fatalf("Indexes after truncation: %v, want ErrSegmentChanged", err)
	}
}

// remoteRetention opens an engine with a remote-storage topic that keeps
// about two segments locally and four in all, and a plain topic with
// the same retention.bytes.
func remoteRetention(t *testing.T, cfg Config) (*Engine, *Partition, *Partition) {
	t.Helper()
	e := mustOpen(t, cfg)
	tiered := fillSegments(t, e, "tiered", 40, map[string]string{"remote.storage.enable": "true", "retention.bytes": "2000", "local.retention.bytes": "1000"})
	plain := fillSegments(t, e, "plain", 40, map[string]string{"retention.bytes": "1000"})
	return e, tiered, plain
}

func TestRemoteGatesLocalDeletion(t *testing.T) {
	e, tp, plain := remoteRetention(t, testConfig(t.TempDir()))
	defer e.Close()
	bases := segBases(tp)
	plainBefore := len(segBases(plain))
	// The watermark is unknown: the plain topic is trimmed, the tiered
	// one keeps everything and counts what it holds back.
	e.RunRetention()
	if got := segBases(tp); len(got) != len(bases) {
		t.Fatalf("tiered segments %v before SetRemoteState, want all of %v", got, bases)
	}
	if n := len(segBases(plain)); n >= plainBefore || n > 3 {
		t.Fatalf("plain topic: %d segments of %d after retention", n, plainBefore)
	}
	if plain.UploadHeldBackBytes() != 0 || tp.UploadHeldBackBytes() <= 0 || e.UploadHeldBackBytes() != tp.UploadHeldBackBytes() {
		t.Fatalf("held back: plain %d, tiered %d, engine %d", plain.UploadHeldBackBytes(), tp.UploadHeldBackBytes(), e.UploadHeldBackBytes())
	}
	heldAll := tp.UploadHeldBackBytes()

	// Two segments uploaded: exactly those go.
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[2], LogStart: 0}); err != nil {
		t.Fatal(err)
	}
	e.RunRetention()
	if got := segBases(tp); got[0] != bases[2] {
		t.Fatalf("segments %v after uploading up to %d", got, bases[2])
	}
	if h := tp.UploadHeldBackBytes(); h <= 0 || h >= heldAll {
		t.Fatalf("held back %d after partial upload, before %d", h, heldAll)
	}
	// Everything uploaded: local retention (not the larger total)
	// decides, and nothing is held back.
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: tp.HighWatermark(), LogStart: 0}); err != nil {
		t.Fatal(err)
	}
	e.RunRetention()
	if n := len(segBases(tp)); n > 3 || tp.UploadHeldBackBytes() != 0 || tp.Size() > 1000+500 {
		t.Fatalf("after full upload: %d segments, %d bytes, held back %d", n, tp.Size(), tp.UploadHeldBackBytes())
	}
	if tp.LogStartOffset() != 0 || tp.LocalLogStartOffset() == 0 {
		t.Fatalf("log start %d, local %d", tp.LogStartOffset(), tp.LocalLogStartOffset())
	}
}

// The watermark is never persisted: after a restart (clean or kill -9)
// nothing is deleted locally until the broker sets it again.
func TestRemoteRestartKeepsSafeDefault(t *testing.T) {
	for _, crash := range []bool{false, true} {
		dir := t.TempDir()
		e, tp, _ := remoteRetention(t, testConfig(dir))
		bases := segBases(tp)
		if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[1], LogStart: 0}); err != nil {
			t.Fatal(err)
		}
		e.RunRetention()
		if got := segBases(tp); got[0] != bases[1] {
			t.Fatalf("segments %v", got)
		}
		if crash {
			crashClose(e)
		} else if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		e = mustOpen(t, testConfig(dir))
		tp = mustPartition(t, e, "tiered", 0)
		if _, known := tp.RemoteState(); known {
			t.Fatal("remote state known after restart")
		}
		e.RunRetention()
		if got := segBases(tp); got[0] != bases[1] || len(got) != len(bases)-1 {
			t.Fatalf("crash=%v: segments %v after restart and retention, want from %d on", crash, got, bases[1])
		}
		if tp.LogStartOffset() != bases[1] {
			t.Fatalf("log start %d before the remote state is known, want the local %d", tp.LogStartOffset(), bases[1])
		}
		if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[3], LogStart: 0}); err != nil {
			t.Fatal(err)
		}
		e.RunRetention()
		if got := segBases(tp); got[0] != bases[3] {
			t.Fatalf("segments %v after the watermark came back", got)
		}
		e.Close()
	}
}

func TestRemoteLogStartsAndErrOffsetRemote(t *testing.T) {
	e, tp, plain := remoteRetention(t, testConfig(t.TempDir()))
	defer e.Close()
	bases := segBases(tp)
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[3], LogStart: 0}); err != nil {
		t.Fatal(err)
	}
	e.RunRetention()
	local := tp.LocalLogStartOffset()
	if local != bases[3] || tp.LogStartOffset() != 0 || tp.Info().LogStartOffset != 0 {
		t.Fatalf("local start %d (want %d), start %d, info %d", local, bases[3], tp.LogStartOffset(), tp.Info().LogStartOffset)
	}
	if off, _, _ := tp.OffsetForTimestamp(TimestampEarliest); off != 0 {
		t.Fatalf("earliest %d, want 0", off)
	}
	if off, _, _ := tp.OffsetForTimestamp(TimestampEarliestLocal); off != local {
		t.Fatalf("earliest local %d, want %d", off, local)
	}
	for name, read := range map[string]func(int64) (ReadResult, error){
		"Read":        func(o int64) (ReadResult, error) { return tp.Read(o, 1<<20, true) },
		"ReadReplica": func(o int64) (ReadResult, error) { return tp.ReadReplica(o, 1<<20) },
		"ReadCommitted": func(o int64) (ReadResult, error) {
			r, _, err := tp.ReadCommitted(o, 1<<20, true)
			return r, err
		},
	} {
		res, err := read(1)
		var re *OffsetRemoteError
		if !errors.Is(err, ErrOffsetRemote) || !errors.As(err, &re) || re.LocalLogStart != local || re.Offset != 1 || errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("%s(1): %v, want ErrOffsetRemote with local start %d", name, err, local)
		}
		if res.LogStartOffset != 0 || res.Data == nil || res.Data.Len() != 0 {
			t.Fatalf("%s(1): result %+v", name, res)
		}
		if res, err := read(local); err != nil || res.Data.Len() == 0 || res.LogStartOffset != 0 {
			t.Fatalf("%s(local start): %v, %d bytes", name, err, res.Data.Len())
		} else {
			res.Data.Release()
		}
	}
	// A plain topic's reads below its start stay out of range.
	if _, err := plain.Read(0, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("plain read below start: %v", err)
	}
	if plain.LogStartOffset() != plain.LocalLogStartOffset() {
		t.Fatal("plain topic: log start differs from the local one")
	}

	// Remote retention moved the remote start: below it is out of range.
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[3], LogStart: bases[1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Read(bases[1]-1, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below the remote start: %v", err)
	}
	if _, err := tp.Read(bases[1], 1<<20, true); !errors.Is(err, ErrOffsetRemote) {
		t.Fatalf("at the remote start: %v", err)
	}
	// DeleteRecords inside the remote range raises the start clients
	// see; the local log is untouched.
	if start, err := tp.AdvanceLogStart(bases[2]); err != nil || start != bases[2] {
		t.Fatalf("AdvanceLogStart into the remote range: %d, %v", start, err)
	}
	if tp.LogStartOffset() != bases[2] || tp.LocalLogStartOffset() != local {
		t.Fatalf("after DeleteRecords: start %d, local %d", tp.LogStartOffset(), tp.LocalLogStartOffset())
	}
	if _, err := tp.Read(bases[2]-1, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below the DeleteRecords start: %v", err)
	}
	// A remote range that does not reach the local log leaves a gap: the
	// local start is the log's.
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[2], LogStart: 0}); err != nil {
		t.Fatal(err)
	}
	if tp.LogStartOffset() != local {
		t.Fatalf("with a gap before the local log: start %d, want %d", tp.LogStartOffset(), local)
	}
	for _, bad := range []RemoteState{{Enabled: true, UploadedNext: -2}, {Enabled: true, UploadedNext: 5, LogStart: 6}, {LogStart: -7}} {
		if err := tp.SetRemoteState(bad); err == nil {
			t.Fatalf("SetRemoteState(%+v) accepted", bad)
		}
	}
}

// Remote retention past segments still held locally deletes them (when
// uploaded) even though the local window would keep them.
func TestRemoteStartAboveLocalDeletes(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	tp := fillSegments(t, e, "t", 40, map[string]string{"remote.storage.enable": "true", "retention.bytes": "-1"})
	bases := segBases(tp)
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[3], LogStart: bases[2]}); err != nil {
		t.Fatal(err)
	}
	if tp.LogStartOffset() != bases[2] {
		t.Fatalf("start %d, want the remote start %d", tp.LogStartOffset(), bases[2])
	}
	if _, err := tp.Read(0, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("local offset below the remote start: %v", err)
	}
	e.RunRetention()
	if got := segBases(tp); got[0] != bases[2] {
		t.Fatalf("segments %v, want from %d", got, bases[2])
	}
}

// A failed unlink of an uploaded segment behaves as it does for any
// segment today: logged, the segment leaves the log, the rest continues.
func TestRemoteDeleteFaultAsToday(t *testing.T) {
	efs := vfs.Wrap(vfs.Default)
	cfg := testConfig(t.TempDir())
	cfg.FS = efs
	e, tp, plain := remoteRetention(t, cfg)
	defer e.Close()
	bases, plainBases := segBases(tp), segBases(plain)
	if err := tp.SetRemoteState(RemoteState{Enabled: true, UploadedNext: bases[2], LogStart: 0}); err != nil {
		t.Fatal(err)
	}
	efs.Inject(vfs.Fault{Op: vfs.OpRemove, PathContains: ".log", Count: 1000, Err: errors.New("EIO")})
	e.RunRetention()
	if efs.Fired() == 0 {
		t.Fatal("no remove fault fired")
	}
	efs.Clear()
	if got := segBases(tp); got[0] != bases[2] {
		t.Fatalf("tiered segments %v after failed unlinks, want from %d", got, bases[2])
	}
	if got := segBases(plain); got[0] == plainBases[0] {
		t.Fatalf("plain segments %v after failed unlinks", got)
	}
	if _, err := tp.Read(bases[2], 1<<20, true); err != nil {
		t.Fatalf("read after failed unlinks: %v", err)
	}
	if tp.Failed() != nil {
		t.Fatalf("partition offline: %v", tp.Failed())
	}
}

func TestLocalBytesFrom(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	p := fillSegments(t, e, "t", 40, map[string]string{"remote.storage.enable": "true"})
	bases := segBases(p)
	if got := p.LocalBytesFrom(-1); got != p.Size() || got <= 0 {
		t.Fatalf("LocalBytesFrom(-1) = %d, Size %d", got, p.Size())
	}
	infos := p.UploadableSegments(-1)
	defer releaseAll(infos)
	// From the second segment's base: everything but the first; from
	// inside it: the straddling segment is left out too.
	if got, want := p.LocalBytesFrom(bases[1]), p.Size()-infos[0].Size; got != want {
		t.Fatalf("from %d: %d, want %d", bases[1], got, want)
	}
	if got, want := p.LocalBytesFrom(bases[1]+1), p.Size()-infos[0].Size-infos[1].Size; got != want {
		t.Fatalf("from %d: %d, want %d", bases[1]+1, got, want)
	}
	if got := p.LocalBytesFrom(p.LogEndOffset() + 1); got != 0 {
		t.Fatalf("past the end: %d", got)
	}
}
