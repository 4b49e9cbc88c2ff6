package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/codec"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/internal/vfs"
	"golang.org/x/sys/unix"
)

// kv is a keyed record for the compaction tests; tomb makes a null value.
type kv struct {
	key, value string
	tomb       bool
}

func tomb(key string) kv { return kv{key: key, tomb: true} }

// keyed encodes one plain batch of kvs stamped ts.
func keyed(ts int64, kvs ...kv) []byte {
	return keyedOpts(batchtest.Options{}, ts, kvs...)
}

func keyedOpts(opts batchtest.Options, ts int64, kvs ...kv) []byte {
	recs := make([]batchtest.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = batchtest.Record{Key: []byte(r.key), Value: []byte(r.value), Timestamp: ts}
		if r.tomb {
			recs[i].Value = nil
		}
	}
	return batchtest.Encode(opts, recs...)
}

// compressed re-encodes an uncompressed batch's records with c (snappy
// in the xerial framing with xerial).
func compressed(t testing.TB, b []byte, c codec.Codec, xerial bool) []byte {
	t.Helper()
	out := append([]byte(nil), b[:records.HeaderSize]...)
	var err error
	if xerial {
		out = codec.CompressXerial(out, b[records.HeaderSize:])
	} else if out, err = codec.Compress(c, out, b[records.HeaderSize:]); err != nil {
		t.Fatal(err)
	}
	be.PutUint16(out[records.OffAttributes:], be.Uint16(out[records.OffAttributes:])|uint16(c))
	be.PutUint32(out[records.OffBatchLength:], uint32(len(out)-records.LogOverhead))
	be.PutUint32(out[records.OffCRC:], records.CRC32C(out[records.OffAttributes:]))
	return out
}

// logRec is one record read back, with its batch.
type logRec struct {
	offset     int64
	key, value string
	tomb       bool
	batchBase  int64
}

// readLog reads p from its log start to its high watermark, checking each
// batch and decoding records of every codec. It returns the records and
// the raw batches by base offset.
func readLog(t testing.TB, p *Partition) ([]logRec, map[int64][]byte) {
	t.Helper()
	var recs []logRec
	batches := map[int64][]byte{}
	var buf []byte
	for off := p.Info().LogStartOffset; ; {
		res, err := p.Read(off, 1<<16, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if res.Data.Len() == 0 {
			res.Data.Release()
			if off < res.HighWatermark {
				t.Fatalf("empty read at %d below HW %d", off, res.HighWatermark)
			}
			return recs, batches
		}
		data := readRange(t, res.Data)
		for len(data) > 0 {
			h, err := checkBatch(data, 0)
			if err != nil {
				t.Fatalf("read back a bad batch at offset %d: %v", off, err)
			}
			b := data[:h.size]
			data = data[h.size:]
			batches[h.baseOffset] = bytes.Clone(b)
			if be.Uint16(b[records.OffAttributes:])&records.AttrControl == 0 {
				buf, err = eachRecord(b, buf, func(o int64, r record) error {
					if o >= off {
						recs = append(recs, logRec{offset: o, key: string(r.key), value: string(r.value), tomb: r.tombstone, batchBase: h.baseOffset})
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			off = h.lastOffset() + 1
		}
	}
}

// forceRoll seals the active segment.
func forceRoll(t testing.TB, p *Partition) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.roll(time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

// checkSubset checks that after's offsets grow and that each of its
// records is the one at that offset in before.
func checkSubset(t *testing.T, before, after []logRec) {
	t.Helper()
	orig := map[int64]logRec{}
	for _, r := range before {
		orig[r.offset] = r
	}
	last := int64(-1)
	for _, r := range after {
		if r.offset <= last {
			t.Fatalf("offset %d after %d", r.offset, last)
		}
		last = r.offset
		o, ok := orig[r.offset]
		if !ok || o.key != r.key || o.value != r.value || o.tomb != r.tomb {
			t.Fatalf("offset %d reads %+v, was %+v", r.offset, r, o)
		}
	}
}

// checkCompacted checks after against before for a cleaning that covered
// offsets below cleanEnd: after is a subset of before, below cleanEnd each
// key has exactly its latest record (none when it is a tombstone and
// goneTomb says so) and at or above it nothing changed.
func checkCompacted(t *testing.T, before, after []logRec, cleanEnd int64, goneTomb func(key string) bool) {
	t.Helper()
	checkSubset(t, before, after)
	orig := map[int64]logRec{}
	latest := map[string]int64{}
	for _, r := range before {
		orig[r.offset] = r
		if r.offset < cleanEnd {
			latest[r.key] = r.offset
		}
	}
	seen := map[string]int{}
	for _, r := range after {
		if r.offset < cleanEnd {
			if latest[r.key] != r.offset {
				t.Fatalf("offset %d: key %q kept, but its latest record is at %d", r.offset, r.key, latest[r.key])
			}
			seen[r.key]++
		}
	}
	for k, off := range latest {
		want := 1
		if orig[off].tomb && goneTomb != nil && goneTomb(k) {
			want = 0
		}
		if seen[k] != want {
			t.Fatalf("key %q: %d records below %d, want %d (latest at %d)", k, seen[k], cleanEnd, want, off)
		}
	}
	n := 0
	for _, r := range before {
		if r.offset >= cleanEnd {
			n++
		}
	}
	m := 0
	for _, r := range after {
		if r.offset >= cleanEnd {
			m++
		}
	}
	if n != m {
		t.Fatalf("%d records at or above the clean end %d, were %d", m, cleanEnd, n)
	}
}

// createPartition creates topic with one partition and config cfg on e,
// and returns the partition.
func createPartition(t *testing.T, e *Engine, topic string, cfg map[string]string) *Partition {
	t.Helper()
	if _, err := e.CreateTopic(topic, 1, cfg); err != nil {
		t.Fatal(err)
	}
	return mustPartition(t, e, topic, 0)
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	e := mustOpen(t, cfg)
	p := createPartition(t, e, "c", map[string]string{"cleanup.policy": "compact", "segment.bytes": "700", "index.interval.bytes": "150"})
	now := time.Now().UnixMilli()
	for i := range 120 {
		k := fmt.Sprintf("k%d", i%5)
		if i%7 == 3 {
			// A batch of three with the same key twice.
			appendWait(t, p, keyed(now, kv{k, fmt.Sprint("v", i), false}, kv{"k9", fmt.Sprint("w", i), false}, kv{k, fmt.Sprint("v", i, "b"), false}))
			continue
		}
		appendWait(t, p, keyed(now, kv{k, fmt.Sprint("v", i), false}))
	}
	info := p.Info()
	before, _ := readLog(t, p)
	segsBefore := len(p.segs)
	res, err := p.Compact()
	if err != nil {
		t.Fatal(err)
	}
	if res.SegmentsRewritten == 0 || res.BytesAfter >= res.BytesBefore || res.RecordsRemoved == 0 || res.CleanEnd != p.active().base {
		t.Fatalf("cleaning %+v (active segment at %d)", res, p.active().base)
	}
	if got := p.Info(); got != info || len(p.segs) != segsBefore {
		t.Fatalf("offsets %+v with %d segments after cleaning, were %+v with %d", got, len(p.segs), info, segsBefore)
	}
	after, _ := readLog(t, p)
	checkCompacted(t, before, after, res.CleanEnd, nil)
	t.Logf("%d records, %d kept; %d segments; %+v", len(before), len(after), segsBefore, res)
	if st := e.CleanerStats(); st.Passes != 1 || st.SegmentsRewritten != int64(res.SegmentsRewritten) || st.BytesBefore != res.BytesBefore || st.BytesAfter != res.BytesAfter {
		t.Fatalf("stats %+v after %+v", st, res)
	}
	// A second cleaning finds nothing to do.
	if res2, err := p.Compact(); err != nil || res2.SegmentsRewritten != 0 || res2.RecordsRemoved != 0 {
		t.Fatalf("second cleaning %+v %v", res2, err)
	}
	// Lookups by timestamp and the sparse index still work over the gaps.
	if off, _, err := p.OffsetForTimestamp(now); err != nil || off != after[0].offset {
		t.Fatalf("OffsetForTimestamp(now) = %d, %v; first record left at %d", off, err, after[0].offset)
	}
	for _, r := range after {
		res, err := p.Read(r.offset, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		b := readRange(t, res.Data)
		if h := parseHeader(b); h.baseOffset != r.batchBase {
			t.Fatalf("Read(%d) starts at batch %d, want %d", r.offset, h.baseOffset, r.batchBase)
		}
	}

	// A clean restart trusts the rewritten indexes; an unclean one scans
	// and checks every segment.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		if !clean {
			os.Remove(filepath.Join(dir, cleanMarkerName))
			os.Remove(filepath.Join(dir, checkpointName))
		}
		e2 := mustOpen(t, cfg)
		p2 := mustPartition(t, e2, "c", 0)
		if got := p2.Info(); got != info {
			t.Fatalf("clean=%v: offsets %+v after restart, were %+v", clean, got, info)
		}
		again, _ := readLog(t, p2)
		checkSubset(t, after, again)
		if len(again) != len(after) {
			t.Fatalf("clean=%v: %d records after restart, %d before", clean, len(again), len(after))
		}
		if !clean {
			if r := appendWait(t, p2, keyed(now, kv{"k1", "last", false})); r.BaseOffset != info.LogEndOffset {
				t.Fatalf("append after restart at %d, want %d", r.BaseOffset, info.LogEndOffset)
			}
		}
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompactTombstones(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	p := createPartition(t, e, "t", map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "3600000"})
	now := time.Now().UnixMilli()
	old := now - 2*3600*1000
	// Segment 1 (two hours old): a, b, a's tombstone, c.
	appendWait(t, p, keyed(old, kv{"a", "1", false}, kv{"b", "1", false}))
	appendWait(t, p, keyed(old, tomb("a"), kv{"c", "1", false}))
	forceRoll(t, p)
	// Segment 2 (now): b's tombstone, c updated, d's tombstone with no
	// value before it.
	appendWait(t, p, keyed(now, tomb("b"), kv{"c", "2", false}))
	appendWait(t, p, keyed(now, tomb("d")))
	forceRoll(t, p)
	appendWait(t, p, keyed(now, kv{"e", "1", false}))
	before, _ := readLog(t, p)

	cfg := p.topic.config()
	res, err := p.compact(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := readLog(t, p)
	got := map[string]string{}
	for _, r := range after {
		if r.tomb {
			got[r.key] = "<tombstone>"
		} else {
			got[r.key] = r.value
		}
	}
	// a's tombstone is past delete.retention.ms: a is gone entirely; b's
	// and d's are recent and stay.
	want := map[string]string{"b": "<tombstone>", "c": "2", "d": "<tombstone>", "e": "1"}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(after) != 4 {
		t.Fatalf("after cleaning %v (%d records), want %v", got, len(after), want)
	}
	checkCompacted(t, before, after, res.CleanEnd, func(k string) bool { return k == "a" })
	if wantDue := now + cfg.DeleteRetentionMs + 1; res.tombstoneDue != wantDue {
		t.Fatalf("tombstone due %d, want %d", res.tombstoneDue, wantDue)
	}
	// Two hours later the recent tombstones go too.
	res, err = p.compact(cfg, now+2*3600*1000)
	if err != nil {
		t.Fatal(err)
	}
	after2, _ := readLog(t, p)
	if len(after2) != 2 || after2[0].key != "c" || after2[1].key != "e" {
		t.Fatalf("after the tombstones' retention: %+v", after2)
	}
	checkCompacted(t, before, after2, res.CleanEnd, func(string) bool { return true })
	if res.tombstoneDue != 1<<63-1 {
		t.Fatalf("tombstone due %d with none left", res.tombstoneDue)
	}
	// The first segment is empty now; reads skip it.
	if p.segs[0].size != 0 {
		t.Fatalf("first segment holds %d bytes", p.segs[0].size)
	}
	if info := p.Info(); info.LogStartOffset != 0 {
		t.Fatalf("log start moved to %d", info.LogStartOffset)
	}
}

// producerKeyed is an idempotent (or transactional) keyed batch.
func producerKeyed(pid int64, seq int32, txn bool, ts int64, kvs ...kv) []byte {
	opts := batchtest.Options{Idempotent: true, ProducerID: pid, BaseSequence: seq}
	if txn {
		opts.Attributes = records.AttrTransactional
	}
	return keyedOpts(opts, ts, kvs...)
}

// Records of idempotent producers are compacted like plain ones, but their
// batch stays (as an empty header when every record went): its sequence
// numbers are the producer's dedupe state. Transactional batches and
// markers stay byte for byte, and a tombstone whose key is in one stays.
func TestCompactProducerBatches(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	p := createPartition(t, e, "p", map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "1000"})
	old := time.Now().UnixMilli() - 60000
	idem := producerKeyed(5, 0, false, old, kv{"a", "idem", false}, kv{"b", "idem", false})
	appendWait(t, p, keyed(old, kv{"a", "plain1", false}))                                                             // 0
	appendWait(t, p, bytes.Clone(idem))                                                                                // 1-2
	appendWait(t, p, keyed(old, kv{"a", "plain2", false}))                                                             // 3
	appendWait(t, p, keyed(old, tomb("b")))                                                                            // 4: b is in a transactional batch
	appendWait(t, p, producerKeyed(6, 0, true, old, kv{"c", "txn", false}, kv{"b", "txn", false}))                     // 5-6
	w, err := p.AppendMarker(producerstate.Marker{ProducerID: 6, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1}) // 7
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		t.Fatal(err)
	}
	appendWait(t, p, keyed(old, kv{"c", "plain", false}, tomb("d"))) // 8-9: d's tombstone may go
	forceRoll(t, p)
	// An open transaction holds the last stable offset: nothing at or
	// above it is cleaned.
	appendWait(t, p, producerKeyed(7, 0, true, old, kv{"e", "open", false})) // 10
	appendWait(t, p, keyed(old, kv{"a", "plain3", false}))                   // 11
	forceRoll(t, p)
	appendWait(t, p, keyed(old, kv{"z", "active", false})) // 12

	_, batchesBefore := readLog(t, p)
	// Later than the marker's timestamp (now) plus delete.retention.ms.
	res, err := p.compact(p.topic.config(), time.Now().UnixMilli()+5000)
	if err != nil {
		t.Fatal(err)
	}
	if res.CleanEnd != 10 || res.Segments != 1 {
		t.Fatalf("cleaning %+v with a transaction open at 10", res)
	}
	check := func(when string) {
		t.Helper()
		after, _ := readLog(t, p)
		batchesAfter := diskBatches(t, p)
		var offs []int64
		for _, r := range after {
			offs = append(offs, r.offset)
		}
		// Gone: 0 and 1 (a, superseded by 3), 2 (b, superseded by its
		// tombstone) and 9 (d's expired tombstone). b's tombstone stays for
		// the transactional b at 6.
		if fmt.Sprint(offs) != "[3 4 5 6 8 10 11 12]" {
			t.Fatalf("%s: offsets %v after cleaning", when, offs)
		}
		for _, base := range []int64{5, 7, 10} {
			if !bytes.Equal(batchesBefore[base], batchesAfter[base]) {
				t.Fatalf("%s: transactional batch or marker at %d changed", when, base)
			}
		}
		// The idempotent batch is an empty header with its producer fields.
		b := batchesAfter[1]
		if b == nil || len(b) != records.HeaderSize || be.Uint32(b[records.OffRecordCount:]) != 0 ||
			be.Uint32(b[records.OffLastOffsetDelta:]) != 1 || int64(be.Uint64(b[records.OffProducerID:])) != 5 ||
			!bytes.Equal(b[records.OffProducerID:records.OffRecordCount], idem[records.OffProducerID:records.OffRecordCount]) {
			t.Fatalf("%s: idempotent batch after cleaning: %x", when, b)
		}
		if b := batchesAfter[8]; be.Uint32(b[records.OffRecordCount:]) != 1 || be.Uint32(b[records.OffLastOffsetDelta:]) != 1 {
			t.Fatalf("%s: filtered batch: %d records, lastOffsetDelta %d", when, be.Uint32(b[records.OffRecordCount:]), be.Uint32(b[records.OffLastOffsetDelta:]))
		}
		if lso := p.LastStableOffset(); lso != 10 {
			t.Fatalf("%s: LSO %d, want 10", when, lso)
		}
		if ids := p.Producers(); len(ids) != 3 {
			t.Fatalf("%s: %d producers, want 3", when, len(ids))
		}
	}
	check("after cleaning")
	e.Close()
	// After a restart (producer state rebuilt from snapshots and the log)
	// the cleaned log reads the same, and a retry of the idempotent batch
	// is still recognised as a duplicate: nothing is appended.
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	p = mustPartition(t, e, "p", 0)
	check("after restart")
	end := p.LogEndOffset()
	res2 := appendWait(t, p, bytes.Clone(idem))
	if p.LogEndOffset() != end || res2.BaseOffset != 1 {
		t.Fatalf("retried idempotent batch: appended at %d (log end %d -> %d), want the duplicate of offset 1", res2.BaseOffset, end, p.LogEndOffset())
	}
}

func TestCompactCompressedBatches(t *testing.T) {
	type variant struct {
		name   string
		c      codec.Codec
		xerial bool
	}
	for _, v := range []variant{{"gzip", codec.Gzip, false}, {"snappy", codec.Snappy, false}, {"snappy-xerial", codec.Snappy, true},
		{"lz4", codec.LZ4, false}, {"zstd", codec.Zstd, false}} {
		t.Run(v.name, func(t *testing.T) {
			e := mustOpen(t, testConfig(t.TempDir()))
			defer e.Close()
			p := createPartition(t, e, "z", map[string]string{"cleanup.policy": "compact"})
			now := time.Now().UnixMilli()
			for i := range 20 {
				var kvs []kv
				for j := range 5 {
					kvs = append(kvs, kv{fmt.Sprint("k", (i+j)%3), fmt.Sprintf("v%d-%d-%s", i, j, strings.Repeat("x", 40)), false})
				}
				appendWait(t, p, compressed(t, keyed(now, kvs...), v.c, v.xerial))
			}
			forceRoll(t, p)
			appendWait(t, p, compressed(t, keyed(now, kv{"k0", "active", false}), v.c, v.xerial))
			before, batchesBefore := readLog(t, p)
			res, err := p.Compact()
			if err != nil {
				t.Fatal(err)
			}
			after, batchesAfter := readLog(t, p)
			checkCompacted(t, before, after, res.CleanEnd, nil)
			if len(after) != 4 || res.SegmentsRewritten != 1 {
				t.Fatalf("%d records after cleaning (%+v), want 3 keys + 1 active", len(after), res)
			}
			for base, b := range batchesAfter {
				ob := batchesBefore[base]
				if ob == nil {
					t.Fatalf("batch at %d was not there before", base)
				}
				if !bytes.Equal(b[:records.OffBatchLength], ob[:records.OffBatchLength]) || !bytes.Equal(b[records.OffLeaderEpoch:records.OffCRC], ob[records.OffLeaderEpoch:records.OffCRC]) ||
					!bytes.Equal(b[records.OffAttributes:records.OffRecordCount], ob[records.OffAttributes:records.OffRecordCount]) {
					t.Fatalf("batch at %d: header fields other than length, CRC and count changed", base)
				}
				if v.xerial != codec.IsXerial(b[records.HeaderSize:]) {
					t.Fatalf("batch at %d: xerial framing %v, want %v", base, !v.xerial, v.xerial)
				}
			}
		})
	}
}

func TestCompactReadersKeepOldBytes(t *testing.T) {
	cfg := testConfig(t.TempDir())
	e := mustOpen(t, cfg)
	defer e.Close()
	p := createPartition(t, e, "r", map[string]string{"cleanup.policy": "compact"})
	now := time.Now().UnixMilli()
	for i := range 50 {
		appendWait(t, p, keyed(now, kv{fmt.Sprint("k", i%2), fmt.Sprint("v", i), false}))
	}
	forceRoll(t, p)
	appendWait(t, p, keyed(now, kv{"k0", "active", false}))
	held, err := p.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	n := held.Data.Len()
	old := make([]byte, n)
	if _, err := held.Data.ReadAt(old, held.Data.Pos()); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Compact(); err != nil || res.SegmentsRewritten != 1 {
		t.Fatalf("cleaning %+v %v", res, err)
	}
	// The held range still reads the old file, through ReadAt and
	// through its descriptor (what sendfile uses).
	again := make([]byte, n)
	if _, err := held.Data.ReadAt(again, held.Data.Pos()); err != nil || !bytes.Equal(again, old) {
		t.Fatalf("held range changed under cleaning (%v)", err)
	}
	if fd := held.Data.Fd(); fd >= 0 {
		clear(again)
		if _, err := unix.Pread(fd, again, held.Data.Pos()); err != nil || !bytes.Equal(again, old) {
			t.Fatalf("held descriptor reads other bytes (%v)", err)
		}
	}
	held.Data.Release()
	fresh, err := p.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := readRange(t, fresh.Data); len(got) >= int(n) {
		t.Fatalf("a new read gets %d bytes, the old segment had %d", len(got), n)
	}
}

func TestCompactNullKeyRefused(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	for name, policy := range map[string]string{"cmp": "compact", "both": "delete,compact", "del": "delete"} {
		if _, err := e.CreateTopic(name, 1, map[string]string{"cleanup.policy": policy}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	nullKey := batchtest.Encode(batchtest.Options{}, batchtest.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: now}, batchtest.Record{Value: []byte("v"), Timestamp: now})
	for _, name := range []string{"cmp", "both"} {
		p := mustPartition(t, e, name, 0)
		if _, err := p.Append(bytes.Clone(nullKey)); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("%s: null key: %v, want ErrInvalidRecord", name, err)
		}
		for _, c := range []codec.Codec{codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd} {
			if _, err := p.Append(compressed(t, nullKey, c, false)); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("%s: null key in a %v batch: %v, want ErrInvalidRecord", name, c, err)
			}
			appendWait(t, p, compressed(t, keyed(now, kv{"k", "v", false}), c, false))
		}
		if p.LogEndOffset() != 4 {
			t.Fatalf("%s: log end %d", name, p.LogEndOffset())
		}
	}
	appendWait(t, mustPartition(t, e, "del", 0), nullKey)
}

func TestCleanupPolicyConfig(t *testing.T) {
	for in, want := range map[string]string{"delete": "delete", "compact": "compact", "compact,delete": "compact,delete", "delete, compact": "compact,delete"} {
		c, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{"cleanup.policy": in})
		if err != nil || c.CleanupPolicy != want {
			t.Fatalf("cleanup.policy %q: %q %v, want %q", in, c.CleanupPolicy, err, want)
		}
	}
	for _, bad := range []map[string]string{{"cleanup.policy": "compacted"}, {"cleanup.policy": ""}, {"delete.retention.ms": "-1"},
		{"min.cleanable.dirty.ratio": "1.5"}, {"min.cleanable.dirty.ratio": "x"}} {
		if _, err := ParseTopicConfig(DefaultTopicConfig(), bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%v: %v, want ErrInvalidConfig", bad, err)
		}
	}
	c, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{"delete.retention.ms": "5", "min.cleanable.dirty.ratio": "0.25"})
	if err != nil || c.DeleteRetentionMs != 5 || c.MinCleanableDirtyRatio != 0.25 {
		t.Fatalf("%+v %v", c, err)
	}
	entries := map[string]string{}
	for _, en := range c.Entries() {
		entries[en.Name] = en.Value
	}
	if entries["delete.retention.ms"] != "5" || entries["min.cleanable.dirty.ratio"] != "0.25" || entries["cleanup.policy"] != "delete" {
		t.Fatalf("entries %v", entries)
	}

	// Retention leaves compact-only topics alone and applies to
	// compact,delete ones.
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	old := time.Now().UnixMilli() - 3600000
	for name, policy := range map[string]string{"c": "compact", "cd": "compact,delete"} {
		if _, err := e.CreateTopic(name, 1, map[string]string{"cleanup.policy": policy, "retention.ms": "1000"}); err != nil {
			t.Fatal(err)
		}
		p := mustPartition(t, e, name, 0)
		appendWait(t, p, keyed(old, kv{"k", "v", false}))
		forceRoll(t, p)
		appendWait(t, p, keyed(old, kv{"k", "v2", false}))
	}
	e.RunRetention()
	if ls := mustPartition(t, e, "c", 0).Info().LogStartOffset; ls != 0 {
		t.Fatalf("compact-only topic: retention moved the log start to %d", ls)
	}
	if ls := mustPartition(t, e, "cd", 0).Info().LogStartOffset; ls != 1 {
		t.Fatalf("compact,delete topic: log start %d after retention, want 1", ls)
	}
}

func TestCleanerRunsInBackground(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.CleanerInterval = 10 * time.Millisecond
	e := mustOpen(t, cfg)
	defer e.Close()
	if _, err := e.CreateTopic("b", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("plain", 1, nil); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "b", 0)
	now := time.Now().UnixMilli()
	for i := range 30 {
		appendWait(t, p, keyed(now, kv{"k", fmt.Sprint("v", i), false}))
	}
	forceRoll(t, p)
	appendWait(t, p, keyed(now, kv{"k", "last", false}))
	if !testwait.Until(10*time.Second, func() bool { return e.CleanerStats().SegmentsRewritten > 0 }) {
		t.Fatalf("no cleaning after 10s: %+v", e.CleanerStats())
	}
	recs, _ := readLog(t, p)
	if len(recs) != 2 || recs[0].value != "v29" || recs[1].value != "last" {
		t.Fatalf("after background cleaning: %+v", recs)
	}
	// Nothing new sealed: the dirty ratio keeps it from cleaning again.
	// 100 ms is ten cleaner intervals: a pass it would run, it ran.
	passes := e.CleanerStats().Passes
	if !testwait.Holds(100*time.Millisecond, func() bool { return e.CleanerStats().Passes == passes }) {
		t.Fatalf("%d more cleanings of a clean log", e.CleanerStats().Passes-passes)
	}
	// A new sealed segment of the same size as the clean part makes it
	// dirty enough.
	for i := range 30 {
		appendWait(t, p, keyed(now, kv{"k", fmt.Sprint("again", i), false}))
	}
	forceRoll(t, p)
	testwait.For(t, 10*time.Second, "the dirty log cleaned again", func() bool { return e.CleanerStats().Passes != passes })
}

// openLeadFollower opens an engine on a new directory with two compacted
// single-partition topics of segBytes-byte segments: "lead", at leader
// epoch 1, and "foll".
func openLeadFollower(t *testing.T, segBytes string) (dir string, cfg Config, e *Engine, lead, foll *Partition) {
	t.Helper()
	dir = t.TempDir()
	cfg = testConfig(dir)
	e = mustOpen(t, cfg)
	for _, n := range []string{"lead", "foll"} {
		if _, err := e.CreateTopic(n, 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": segBytes}); err != nil {
			t.Fatal(err)
		}
	}
	lead, foll = mustPartition(t, e, "lead", 0), mustPartition(t, e, "foll", 0)
	if err := lead.AssignLeaderEpoch(1); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, e, lead, foll
}

// followerAfterUncleanRestart crash-closes e, removes its checkpoint from
// dir, reopens cfg (closed when t ends) and returns what "foll" reads then.
func followerAfterUncleanRestart(t *testing.T, e *Engine, dir string, cfg Config) []logRec {
	t.Helper()
	crashClose(e)
	os.Remove(filepath.Join(dir, checkpointName))
	e2 := mustOpen(t, cfg)
	t.Cleanup(func() { e2.Close() })
	got, _ := readLog(t, mustPartition(t, e2, "foll", 0))
	return got
}

// TestCompactReplicaGaps copies a cleaned leader log to a follower: the
// follower takes the gaps and reads the same records, also after an
// unclean restart.
func TestCompactReplicaGaps(t *testing.T) {
	dir, cfg, e, lead, foll := openLeadFollower(t, "500")
	now := time.Now().UnixMilli()
	for i := range 60 {
		appendWait(t, lead, keyed(now, kv{fmt.Sprint("k", i%4), fmt.Sprint("v", i), false}))
	}
	if _, err := lead.Compact(); err != nil {
		t.Fatal(err)
	}
	want, _ := readLog(t, lead)
	foll.SetReplicated(true)
	for off := int64(0); off < lead.LogEndOffset(); {
		res, err := lead.ReadReplica(off, 300)
		if err != nil {
			t.Fatal(err)
		}
		b := readRange(t, res.Data)
		hs, err := validateBatches(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		pend, err := foll.AppendReplicated(b)
		waitPending(t, pend, err)
		off = hs[len(hs)-1].lastOffset() + 1
	}
	foll.SetHighWatermark(foll.LogEndOffset())
	got, _ := readLog(t, foll)
	checkSubset(t, want, got)
	if len(got) != len(want) {
		t.Fatalf("follower reads %d records, leader %d", len(got), len(want))
	}
	got = followerAfterUncleanRestart(t, e, dir, cfg)
	if len(got) != len(want) {
		t.Fatalf("follower reads %d records after an unclean restart, leader %d", len(got), len(want))
	}
}

// crashSetup writes a compactable partition on a MemFS behind an ErrorFS,
// on write path mode.
func crashSetup(t *testing.T, mode string) (*vfs.MemFS, *vfs.ErrorFS, Config, *Engine, *Partition) {
	t.Helper()
	mem := crashableFS(t, mode)
	efs := vfs.Wrap(mem)
	cfg := ioConfig("/data", mode)
	cfg.FS = efs
	e := mustOpen(t, cfg)
	checkIOPath(t, e, mode)
	p := createPartition(t, e, "c", map[string]string{"cleanup.policy": "compact", "segment.bytes": "600", "delete.retention.ms": "0"})
	old := time.Now().UnixMilli() - 1000
	for i := range 40 {
		r := kv{fmt.Sprint("k", i%3), fmt.Sprint("v", i), false}
		if i%11 == 5 {
			r = tomb(r.key)
		}
		appendWait(t, p, keyed(old, r))
	}
	// Make the checkpoint cover everything, as it would after a while.
	if err := e.writeCheckpoint(); err != nil {
		t.Fatal(err)
	}
	return mem, efs, cfg, e, p
}

// latestValues maps each key to its latest value ("" for a tombstone or
// no record).
func latestValues(recs []logRec) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		m[r.key] = r.value
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// TestCompactCrashAtEachStep fails each file operation of a cleaning in
// turn, then crashes the file system there: the engine that saw the
// failure and the one recovered after the crash must both serve a valid
// log with the same latest value per key, made of the records that were
// at those offsets, and the recovered one must clean to the same result.
func TestCompactCrashAtEachStep(t *testing.T) {
	forEachIOPath(t, testCompactCrashAtEachStep)
}

func testCompactCrashAtEachStep(t *testing.T, mode string) {
	// The expected outcome, from an undisturbed cleaning.
	_, _, _, e0, p0 := crashSetup(t, mode)
	orig, _ := readLog(t, p0)
	res0, err := p0.Compact()
	if err != nil || res0.SegmentsRewritten < 2 {
		t.Fatalf("reference cleaning %+v %v", res0, err)
	}
	cleaned, _ := readLog(t, p0)
	e0.Close()
	wantLatest := latestValues(orig)

	check := func(t *testing.T, p *Partition, what string) []logRec {
		t.Helper()
		recs, _ := readLog(t, p)
		checkSubset(t, orig, recs)
		if got := latestValues(recs); fmt.Sprint(got) != fmt.Sprint(wantLatest) {
			t.Fatalf("%s: latest values %v, want %v", what, got, wantLatest)
		}
		return recs
	}
	ops := []struct {
		op   vfs.Op
		name string
	}{{vfs.OpRead, "read"}, {vfs.OpOpen, "open"}, {vfs.OpWrite, "write"}, {vfs.OpSync, "sync"}, {vfs.OpRemove, "remove"},
		{vfs.OpSyncDir, "syncdir"}, {vfs.OpRename, "rename"}, {vfs.OpClose, "close"}}
	cases, tolerated := 0, 0
	for _, o := range ops {
		for skip := 0; ; skip++ {
			mem, efs, cfg, e, p := crashSetup(t, mode)
			efs.Inject(vfs.Fault{Op: o.op, PathContains: "/c-0/", Skip: skip, Count: 1})
			_, cerr := p.Compact()
			fired := efs.Fired() > 0
			efs.Clear()
			if !fired {
				e.Close()
				break
			}
			cases++
			name := fmt.Sprintf("%s#%d", o.name, skip)
			if cerr == nil {
				// Writing the new indexes and closing files may fail
				// without failing the cleaning.
				tolerated++
			}
			check(t, p, name+" (no crash)")
			for _, torn := range []bool{false, true} {
				after := mem.Crash(vfs.CrashOptions{TornTail: torn, Seed: int64(skip)})
				cfg.FS = after
				e2, err := Open(cfg)
				if err != nil {
					t.Fatalf("%s: open after crash: %v", name, err)
				}
				p2 := mustPartition(t, e2, "c", 0)
				check(t, p2, name+" (after crash)")
				if _, err := p2.Compact(); err != nil {
					t.Fatalf("%s: cleaning after recovery: %v", name, err)
				}
				if recs := check(t, p2, name+" (cleaned after crash)"); len(recs) != len(cleaned) {
					t.Fatalf("%s: %d records after recovery and cleaning, %d without the crash", name, len(recs), len(cleaned))
				}
				names, _ := after.ReadDir("/data/c-0")
				for _, n := range names {
					if strings.HasSuffix(n, tmpSuffix) {
						t.Fatalf("%s: %s left after recovery", name, n)
					}
				}
				e2.Close()
			}
			e.closed.Store(true) // its file system crashed; stop it without flushing
			crashCloseQuiet(e)
		}
	}
	t.Logf("%d failure points, %d of them tolerated by the cleaning", cases, tolerated)
	if cases < 10 {
		t.Fatalf("only %d failure points", cases)
	}
}

// crashCloseQuiet stops an engine whose file system crashed.
func crashCloseQuiet(e *Engine) {
	close(e.stopBg)
	<-e.bgDone
	<-e.cleaner.done
	e.wq.close()
	e.releaseAll()
}

// TestCompactConcurrent cleans while one goroutine appends and another
// reads the whole log again and again (holding ranges across cleanings).
func TestCompactConcurrent(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	p := createPartition(t, e, "cc", map[string]string{"cleanup.policy": "compact", "segment.bytes": "800", "index.interval.bytes": "200"})
	const n = 600
	value := func(o int64) string { return fmt.Sprintf("k%d-%d", o%10, o) }
	done := make(chan struct{})
	// cleaned is closed, and replaced, as each cleaning of the third
	// goroutine ends.
	var cleanedMu sync.Mutex
	cleaned := make(chan struct{})
	nextCleaning := func() <-chan struct{} {
		cleanedMu.Lock()
		defer cleanedMu.Unlock()
		return cleaned
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		now := time.Now().UnixMilli()
		for o := int64(0); o < n; o++ {
			w, err := p.Append(keyed(now, kv{fmt.Sprint("k", o%10), value(o), false}))
			if err == nil {
				_, err = w.Result()
			}
			if err != nil {
				t.Errorf("append %d: %v", o, err)
				return
			}
		}
	})
	wg.Go(func() {
		var buf []byte
		for {
			select {
			case <-done:
				return
			default:
			}
			for off := int64(0); ; {
				res, err := p.Read(off, 500, true)
				if err != nil {
					t.Errorf("Read(%d): %v", off, err)
					return
				}
				if res.Data.Len() == 0 {
					res.Data.Release()
					break
				}
				// Hold the range across a whole cleaning (the end of the
				// one running now, then the end of the next), so that
				// cleanings swap segments under held ranges.
				for range 2 {
					select {
					case <-nextCleaning():
					case <-done:
					}
				}
				data := make([]byte, res.Data.Len())
				_, err = res.Data.ReadAt(data, res.Data.Pos())
				res.Data.Release()
				if err != nil {
					t.Errorf("reading a range: %v", err)
					return
				}
				for len(data) > 0 {
					h, err := checkBatch(data, 0)
					if err != nil {
						t.Errorf("bad batch at %d: %v", off, err)
						return
					}
					buf, err = eachRecord(data[:h.size], buf, func(o int64, r record) error {
						if string(r.value) != value(o) {
							return fmt.Errorf("offset %d reads %q", o, r.value)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					data = data[h.size:]
					off = h.lastOffset() + 1
				}
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			_, err := p.Compact()
			cleanedMu.Lock()
			close(cleaned)
			cleaned = make(chan struct{})
			cleanedMu.Unlock()
			if err != nil {
				t.Errorf("cleaning: %v", err)
				return
			}
		}
	})
	wg.Wait()
	forceRoll(t, p)
	if _, err := p.Compact(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readLog(t, p)
	if len(recs) != 10 {
		t.Fatalf("%d records after the last cleaning, want one per key", len(recs))
	}
	for i, r := range recs {
		if want := int64(n - 10 + i); r.offset != want || r.value != value(want) {
			t.Fatalf("record %d: %+v, want offset %d", i, r, want)
		}
	}
	t.Logf("cleaner %+v", e.CleanerStats())
}

// TestCompactRacesFollowerTruncation cleans a follower log while it
// appends, moves its high watermark and truncates its uncommitted tail:
// a truncation during a cleaning makes the cleaning give its copy up.
func TestCompactRacesFollowerTruncation(t *testing.T) {
	dir, cfg, e, lead, foll := openLeadFollower(t, "400")
	now := time.Now().UnixMilli()
	const n = 400
	for i := range n {
		appendWait(t, lead, keyed(now, kv{fmt.Sprint("k", i%7), fmt.Sprint("v", i), false}))
	}
	foll.SetReplicated(true)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		round, truncated := 0, int64(0)
		for off := int64(0); off < n; {
			res, err := lead.ReadReplica(off, 200)
			if err != nil {
				t.Error(err)
				return
			}
			b := make([]byte, res.Data.Len())
			res.Data.ReadAt(b, res.Data.Pos())
			res.Data.Release()
			pend, err := foll.AppendReplicated(b)
			if err == nil {
				<-pend.Done()
				err = pend.Err()
			}
			if err != nil {
				t.Error(err)
				return
			}
			end := foll.LogEndOffset()
			foll.SetHighWatermark(end - 6)
			off = end
			if round++; round%4 == 0 && end > truncated+3 {
				truncated = end
				// The uncommitted tail goes; the leader sends it again.
				if err := foll.TruncateTo(end - 3); err != nil {
					t.Error(err)
					return
				}
				off = foll.LogEndOffset()
			}
		}
		foll.SetHighWatermark(foll.LogEndOffset())
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := foll.Compact(); err != nil && !errors.Is(err, errCleanRaced) {
				t.Errorf("cleaning: %v", err)
				return
			}
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	if _, err := foll.Compact(); err != nil {
		t.Fatal(err)
	}
	want, _ := readLog(t, lead)
	got, _ := readLog(t, foll)
	checkSubset(t, want, got)
	if a, b := latestValues(want), latestValues(got); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("follower's latest values %v, leader's %v", b, a)
	}
	again := followerAfterUncleanRestart(t, e, dir, cfg)
	if len(again) != len(got) {
		t.Fatalf("%d records after an unclean restart, %d before", len(again), len(got))
	}
	t.Logf("%d of %d records left on the follower; cleaner %+v", len(got), n, e.CleanerStats())
}

// An emptied idempotent batch stays (as a header) only when it is its
// producer's last batch, as in Kafka: earlier ones carry no state a
// restart needs, and a log of empty batches would stall clients that
// read a response holding nothing else (librdkafka).
func TestCompactKeepsOnlyLastEmptiedProducerBatch(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testConfig(dir))
	p := createPartition(t, e, "q", map[string]string{"cleanup.policy": "compact"})
	old := time.Now().UnixMilli() - 60000
	last := producerKeyed(8, 2, false, old, kv{"y", "1", false})
	appendWait(t, p, producerKeyed(8, 0, false, old, kv{"x", "1", false})) // 0
	appendWait(t, p, producerKeyed(8, 1, false, old, kv{"x", "2", false})) // 1
	appendWait(t, p, bytes.Clone(last))                                    // 2
	appendWait(t, p, keyed(old, kv{"x", "3", false}, kv{"y", "2", false})) // 3-4
	forceRoll(t, p)
	appendWait(t, p, keyed(old, kv{"z", "active", false})) // 5
	if _, err := p.compact(p.topic.config(), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	recs, _ := readLog(t, p)
	batches := diskBatches(t, p)
	var offs, bases []int64
	for _, r := range recs {
		offs = append(offs, r.offset)
	}
	for b := range batches {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	if fmt.Sprint(offs) != "[3 4 5]" || fmt.Sprint(bases) != "[2 3 5]" {
		t.Fatalf("records %v in batches %v; want records [3 4 5] in batches [2 3 5] (2: the producer's last batch, emptied)", offs, bases)
	}
	if b := batches[2]; be.Uint32(b[records.OffRecordCount:]) != 0 || len(b) != records.HeaderSize {
		t.Fatalf("batch 2: %d records, %d bytes", be.Uint32(b[records.OffRecordCount:]), len(b))
	}
	// A read at the empty batch starts at the records after it.
	res, err := p.Read(2, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if h := parseHeader(readRange(t, res.Data)); h.baseOffset != 3 {
		t.Fatalf("Read(2) starts at batch %d, want 3 (the empty batch skipped)", h.baseOffset)
	}
	e.Close()
	e = mustOpen(t, testConfig(dir))
	defer e.Close()
	p = mustPartition(t, e, "q", 0)
	end := p.LogEndOffset()
	if res := appendWait(t, p, bytes.Clone(last)); res.BaseOffset != 2 || p.LogEndOffset() != end {
		t.Fatalf("retry of the producer's last batch after cleaning and restart: appended at %d, log end %d -> %d", res.BaseOffset, end, p.LogEndOffset())
	}
}

// diskBatches returns every batch in p's segment files by base offset
// (Read skips emptied producer batches that records follow).
func diskBatches(t *testing.T, p *Partition) map[int64][]byte {
	t.Helper()
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := map[int64][]byte{}
	for _, s := range p.segs {
		err := forEachBatch(s, s.size, func(_ int64, b []byte) error {
			out[int64(be.Uint64(b[records.OffBaseOffset:]))] = bytes.Clone(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// ListOffsets by timestamp answers with the exact record inside a
// compressed batch, and with the batch's time under LogAppendTime.
func TestOffsetForTimestampInsideBatches(t *testing.T) {
	e := mustOpen(t, testConfig(t.TempDir()))
	defer e.Close()
	e.CreateTopic("c", 1, nil)
	e.CreateTopic("la", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	p := mustPartition(t, e, "c", 0)
	plain := batchtest.Encode(batchtest.Options{},
		batchtest.Record{Value: []byte("a"), Timestamp: 10},
		batchtest.Record{Value: []byte("b"), Timestamp: 20},
		batchtest.Record{Value: []byte("c"), Timestamp: 30})
	appendWait(t, p, compressed(t, plain, codec.Zstd, false))
	for _, c := range []struct{ ts, off, at int64 }{{5, 0, 10}, {11, 1, 20}, {20, 1, 20}, {21, 2, 30}, {31, -1, -1}} {
		if off, at, err := p.OffsetForTimestamp(c.ts); err != nil || off != c.off || at != c.at {
			t.Errorf("zstd batch: OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", c.ts, off, at, err, c.off, c.at)
		}
	}
	la := mustPartition(t, e, "la", 0)
	before := time.Now().UnixMilli()
	appendWait(t, la, plain)
	off, at, err := la.OffsetForTimestamp(15)
	if err != nil || off != 0 || at < before {
		t.Fatalf("LogAppendTime: OffsetForTimestamp(15) = %d, %d, %v; want 0 at the append time (>= %d)", off, at, err, before)
	}
}
