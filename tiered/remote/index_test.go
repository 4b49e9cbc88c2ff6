package remote

import (
	"encoding/binary"
	"testing"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/internal/records"
)

// Whatever bytes an index object holds, parsing either refuses them or
// yields entries inside the segment, strictly increasing, whose lookups
// stay inside it; it never panics.
func FuzzParseIndexes(f *testing.F) {
	seg := &rlm.Segment{BaseOffset: 1000, NextOffset: 1100, SizeBytes: 50_000}
	good := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0), 0)
	good = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(good, 10), 4096)
	f.Add(good)
	f.Add([]byte{1, 2, 3})
	f.Add(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 200), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if entries, err := parseOffsetIndex(b, seg); err == nil {
			ix := offsetIndex(entries)
			for i, e := range ix {
				if e.offset < seg.BaseOffset || e.offset >= seg.NextOffset || e.pos < 0 || e.pos+records.HeaderSize > seg.SizeBytes ||
					i > 0 && (e.offset <= ix[i-1].offset || e.pos <= ix[i-1].pos) {
					t.Fatalf("entry %d %+v accepted", i, e)
				}
			}
			for _, off := range []int64{-1, 0, 1000, 1050, 1 << 40} {
				if p := ix.lookup(off); p < 0 || p >= seg.SizeBytes {
					t.Fatalf("lookup(%d) = %d", off, p)
				}
			}
		}
		if tix, err := parseTimeIndex(b, seg); err == nil {
			for i, e := range tix {
				if e.offset < seg.BaseOffset || e.offset >= seg.NextOffset || i > 0 && (e.ts < tix[i-1].ts || e.offset < tix[i-1].offset) {
					t.Fatalf("time entry %d %+v accepted", i, e)
				}
			}
		}
	})
}
