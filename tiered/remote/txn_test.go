package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/internal/records"
)

// txnProducer appends transactional batches of one producer.
type txnProducer struct {
	f   *fixture
	pid int64
	seq int32
}

func (p *txnProducer) send(n int) int64 {
	p.f.t.Helper()
	var first int64 = -1
	for range n {
		b := batchtest.Encode(batchtest.Options{Attributes: records.AttrTransactional, Idempotent: true, ProducerID: p.pid, BaseSequence: p.seq},
			batchtest.Record{Value: make([]byte, 200), Timestamp: ts0})
		p.seq++
		res := p.f.append(b)
		if first < 0 {
			first = res.BaseOffset
		}
	}
	return first
}

func (p *txnProducer) end(commit bool) {
	p.f.t.Helper()
	w, err := p.f.part.AppendMarker(producerstate.Marker{ProducerID: p.pid, Commit: commit})
	if err != nil {
		p.f.t.Fatal(err)
	}
	if _, err := w.Result(); err != nil {
		p.f.t.Fatal(err)
	}
}

// read_committed reads of the remote tier list the aborted transactions
// the engine lists locally for the same range, including one that starts
// in a segment and is aborted several segments later, and one aborted in
// the local log only (the caller adds that from LocalAbortedTxns).
func TestAbortedTxnsAcrossSegments(t *testing.T) {
	f := newFixture(t, 4096, nil)
	a, b, c, d := &txnProducer{f: f, pid: 100}, &txnProducer{f: f, pid: 200}, &txnProducer{f: f, pid: 300}, &txnProducer{f: f, pid: 400}
	f.produce(10)
	aFirst := a.send(2) // aborted 3+ segments later
	b.send(1)           // committed
	f.produce(40)
	c.send(2) // aborted at once
	c.end(false)
	b.end(true)
	f.produce(30)
	a.send(1)
	a.end(false)
	f.produce(10)
	d.send(3) // aborted in the active segment: not uploaded
	f.produce(10)
	d.end(false)
	f.produce(3)
	end := f.upload()
	if len(f.segs) < 8 {
		t.Fatalf("only %d segments", len(f.segs))
	}
	ctx := context.Background()
	sawA, sawD := false, false
	for off := int64(0); off < end; off++ {
		res, aborted, err := f.reader.Read(ctx, f.tid, 0, off, 1<<20, true, true)
		if err != nil {
			t.Fatalf("read_committed at %d: %v", off, err)
		}
		res.Data.Release()
		loc, want, err := f.part.ReadCommitted(off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		loc.Data.Release()
		// Locally the list runs to the LSO; remotely to the segment's
		// end, with markers in the remote tier only.
		seg := f.segOf(off)
		want = slices.DeleteFunc(want, func(x producerstate.AbortedTxn) bool {
			return x.FirstOffset >= seg.NextOffset || x.LastOffset >= end
		})
		if !slices.Equal(aborted, want) {
			t.Fatalf("offset %d (segment [%d, %d)): aborted %v, want %v", off, seg.BaseOffset, seg.NextOffset, aborted, want)
		}
		for _, x := range aborted {
			sawA = sawA || x.ProducerID == a.pid && x.LastOffset >= seg.NextOffset
		}
		// With the local log's part the list is the engine's.
		all := mergeTest(aborted, f.part.LocalAbortedTxns(off, seg.NextOffset))
		_, local, _ := f.part.ReadCommitted(off, 1<<20, true)
		local = slices.DeleteFunc(local, func(x producerstate.AbortedTxn) bool { return x.FirstOffset >= seg.NextOffset })
		if !slices.Equal(all, local) {
			t.Fatalf("offset %d: remote+local %v, want %v", off, all, local)
		}
		for _, x := range all {
			sawD = sawD || x.ProducerID == d.pid
		}
	}
	if !sawA || !sawD {
		t.Fatalf("the cross-segment abort (seen %v) or the local-only abort (seen %v) never showed", sawA, sawD)
	}

	// Past the walk's bound the read fails rather than guess.
	f.reader.abortWalk = 1
	_, _, err := f.reader.Read(ctx, f.tid, 0, aFirst, 1<<20, true, true)
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "undecided") {
		t.Fatalf("walk past its bound: %v", err)
	}
	if _, _, err := f.reader.Read(ctx, f.tid, 0, aFirst, 1<<20, true, false); err != nil {
		t.Fatalf("read_uncommitted needs no walk: %v", err)
	}
}

func mergeTest(a, b []producerstate.AbortedTxn) []producerstate.AbortedTxn {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, func(x, y producerstate.AbortedTxn) int {
		if x.LastOffset != y.LastOffset {
			return int(x.LastOffset - y.LastOffset)
		}
		return int(x.ProducerID - y.ProducerID)
	})
	return slices.Compact(out)
}

// A damaged producer snapshot fails a read_committed read (the reader
// cannot tell which records were aborted) but not a read_uncommitted one.
func TestAbortedTxnsCorruptSnapshot(t *testing.T) {
	f := newFixture(t, 4096, nil)
	f.produce(40)
	f.upload()
	seg := f.segs[0]
	key := objectKey(&seg, "producers")
	if err := f.base.Put(context.Background(), key, bytesReader("RLPS garbage"), 12); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.reader.Read(context.Background(), f.tid, 0, seg.BaseOffset, 1<<20, true, true)
	if err == nil || !isStorage(err) || !contains(err.Error(), key) {
		t.Fatalf("read_committed over a corrupt snapshot: %v", err)
	}
	if got, err := f.read(seg.BaseOffset, 1<<20, true); err != nil || len(got) == 0 {
		t.Fatalf("read_uncommitted: %d bytes, %v", len(got), err)
	}
}

// OffsetForTimestamp agrees with the engine's local lookup wherever the
// answer lies in the remote tier, and finds nothing past it.
func TestOffsetForTimestamp(t *testing.T) {
	f := newFixture(t, 1000, nil)
	f.produce(120)
	end := f.upload()
	ctx := context.Background()
	for ts := int64(ts0 - 5); ts < ts0+10*130; ts += 3 {
		off, at, found, err := f.reader.OffsetForTimestamp(ctx, f.tid, 0, ts)
		if err != nil {
			t.Fatal(err)
		}
		wantOff, wantAt, err := f.part.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		where := fmt.Sprintf("ts %d: remote %d@%d found %v, local %d@%d (remote end %d)", ts, off, at, found, wantOff, wantAt, end)
		if wantOff >= 0 && wantOff < end {
			if !found || off != wantOff || at != wantAt {
				t.Fatal(where)
			}
		} else if found {
			t.Fatal(where)
		}
	}
	// Below the remote log start nothing is found.
	f.expire(f.segs[2].BaseOffset)
	off, _, found, err := f.reader.OffsetForTimestamp(ctx, f.tid, 0, ts0)
	if err != nil || !found || off != f.segs[2].BaseOffset {
		t.Fatalf("after remote retention: %d found %v (%v), want %d", off, found, err, f.segs[2].BaseOffset)
	}
}
