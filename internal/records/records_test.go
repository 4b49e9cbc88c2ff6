package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// The layout is written out here by hand, independently of the package's
// constants, so a wrong constant cannot pass its own round trip.
func TestHeaderLayout(t *testing.T) {
	h := Header{
		BaseOffset: 0x0102030405060708, PartitionLeaderEpoch: 9, Attributes: AttrTransactional | 3,
		LastOffsetDelta: 2, BaseTimestamp: 1000, MaxTimestamp: 2000,
		ProducerID: 77, ProducerEpoch: 5, BaseSequence: 11,
	}
	b := Encode(h, Record{Value: []byte("a")}, Record{OffsetDelta: 1, Value: []byte("b")}, Record{OffsetDelta: 2, Value: []byte("c")})
	be := binary.BigEndian
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"baseOffset", be.Uint64(b[0:]), 0x0102030405060708},
		{"batchLength", uint64(be.Uint32(b[8:])), uint64(len(b) - 12)},
		{"leaderEpoch", uint64(be.Uint32(b[12:])), 9},
		{"magic", uint64(b[16]), 2},
		{"crc", uint64(be.Uint32(b[17:])), uint64(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))},
		{"attributes", uint64(be.Uint16(b[21:])), 0x13},
		{"lastOffsetDelta", uint64(be.Uint32(b[23:])), 2},
		{"baseTimestamp", be.Uint64(b[27:]), 1000},
		{"maxTimestamp", be.Uint64(b[35:]), 2000},
		{"producerId", be.Uint64(b[43:]), 77},
		{"producerEpoch", uint64(be.Uint16(b[51:])), 5},
		{"baseSequence", uint64(be.Uint32(b[53:])), 11},
		{"recordCount", uint64(be.Uint32(b[57:])), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
	// The first record starts at byte 61: length 7 (zigzag 14), attrs 0,
	// tsDelta 0, offsetDelta 0, null key (-1 -> 1), value length 1, "a",
	// 0 headers.
	if want := []byte{14, 0, 0, 0, 1, 2, 'a', 0}; !bytes.Equal(b[61:61+len(want)], want) {
		t.Fatalf("first record % x, want % x", b[61:61+len(want)], want)
	}
}

func TestEncodeParseRoundTrip(t *testing.T) {
	recs := []Record{
		{TimestampDelta: 0, OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0"),
			Headers: []RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "n", Value: nil}}},
		{TimestampDelta: -5, OffsetDelta: 1, Key: nil, Value: nil},
		{TimestampDelta: 1 << 40, OffsetDelta: 2, Key: []byte{}, Value: bytes.Repeat([]byte("z"), 300)},
	}
	h := Plain(0, 10, 20)
	h.BaseOffset, h.PartitionLeaderEpoch = 100, 3
	b := Encode(h, recs...)
	bt, err := Parse(append(b, 0xff, 0xff)) // trailing bytes are not the batch's
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.Raw) != len(b) || bt.Size() != int64(len(b)) || !bt.CRCValid() || bt.Magic != Magic {
		t.Fatalf("batch: %d bytes (size %d), crc ok %v, magic %d; encoded %d", len(bt.Raw), bt.Size(), bt.CRCValid(), bt.Magic, len(b))
	}
	if bt.BaseOffset != 100 || bt.PartitionLeaderEpoch != 3 || bt.LastOffset() != 102 || bt.RecordCount != 3 ||
		bt.HasProducer() || bt.IsTransactional() || bt.IsControl() || bt.ProducerEpoch != -1 || bt.BaseSequence != -1 {
		t.Fatalf("header %+v", bt.Header)
	}
	rest := bt.Body()
	for i, want := range recs {
		r, next, err := NextRecord(rest)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		rest = next
		if r.TimestampDelta != want.TimestampDelta || r.OffsetDelta != want.OffsetDelta ||
			!bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) ||
			!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) {
			t.Fatalf("record %d: %+v, want %+v", i, r, want)
		}
		hs, err := r.ParseHeaders()
		if err != nil || len(hs) != len(want.Headers) {
			t.Fatalf("record %d headers %v, %v", i, hs, err)
		}
		for j := range hs {
			if hs[j].Key != want.Headers[j].Key || !bytes.Equal(hs[j].Value, want.Headers[j].Value) || (hs[j].Value == nil) != (want.Headers[j].Value == nil) {
				t.Fatalf("record %d header %d: %+v", i, j, hs[j])
			}
		}
		if !bytes.Equal(AppendRecord(nil, want), r.Raw) {
			t.Fatalf("record %d: raw bytes differ from its encoding", i)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the last record", len(rest))
	}
}

func TestProducerAndMarkerBatches(t *testing.T) {
	h := Header{Attributes: AttrTransactional, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, BaseTimestamp: 1, MaxTimestamp: 1}
	bt, err := Parse(Encode(h, Record{Value: []byte("v")}))
	if err != nil || !bt.HasProducer() || !bt.IsTransactional() || bt.IsControl() || bt.ProducerID != 42 || bt.ProducerEpoch != 3 || bt.BaseSequence != 7 {
		t.Fatalf("producer batch %+v, %v", bt.Header, err)
	}
	if _, err := bt.Control(); err == nil {
		t.Fatal("a data record parsed as a control record")
	}

	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		m, err := Parse(EncodeMarker(Marker{ProducerID: 9, ProducerEpoch: 2, Type: typ, CoordinatorEpoch: 17, Timestamp: 55}))
		if err != nil || !m.CRCValid() {
			t.Fatalf("marker: %v", err)
		}
		if !m.IsControl() || !m.IsTransactional() || m.Codec() != 0 || m.RecordCount != 1 || m.LastOffsetDelta != 0 ||
			m.ProducerID != 9 || m.ProducerEpoch != 2 || m.BaseSequence != -1 || m.PartitionLeaderEpoch != -1 || m.MaxTimestamp != 55 {
			t.Fatalf("marker header %+v", m.Header)
		}
		c, err := m.Control()
		if err != nil || c.Type != typ || c.CoordinatorEpoch != 17 {
			t.Fatalf("control record %+v, %v", c, err)
		}
	}
	// A control value shorter than a marker's leaves the epoch 0; a key
	// shorter than version+type is refused.
	if c, err := ParseControlKey([]byte{0, 0, 0, 1}, []byte{0}); err != nil || c.Type != ControlCommit || c.CoordinatorEpoch != 0 {
		t.Fatalf("short value: %+v, %v", c, err)
	}
	if _, err := ParseControlKey([]byte{0, 0, 1}, nil); !errors.Is(err, ErrBadControl) {
		t.Fatalf("short key: %v", err)
	}
}

func TestSettersKeepCRC(t *testing.T) {
	b := Encode(Plain(0, 5, 6), Record{Value: []byte("x")})
	bt, _ := Parse(b)
	bt.SetBaseOffset(1 << 33)
	bt.SetPartitionLeaderEpoch(12)
	if !bt.CRCValid() {
		t.Fatal("offset and epoch are outside the CRC")
	}
	again, _ := Parse(b)
	if again.BaseOffset != 1<<33 || again.PartitionLeaderEpoch != 12 {
		t.Fatalf("in place: %+v", again.Header)
	}
	bt.SetLogAppendTime(999)
	again, _ = Parse(b)
	if !again.CRCValid() || !again.IsLogAppendTime() || again.MaxTimestamp != 999 || again.BaseTimestamp != 5 || bt.Header != again.Header {
		t.Fatalf("log append time: %+v (view %+v)", again.Header, bt.Header)
	}
	b[len(b)-1] ^= 1
	if again, _ = Parse(b); again.CRCValid() {
		t.Fatal("a flipped record byte kept the CRC valid")
	}
}

func TestFraming(t *testing.T) {
	one := Encode(Plain(0, 1, 1), Record{Value: []byte("a")})
	two := append(append([]byte(nil), one...), one...)
	if s := ParseSet(two); s.Err != nil || len(s.Batches) != 2 || &s.Batches[1].Raw[0] != &two[len(one)] {
		t.Fatalf("two batches: %d, %v", len(s.Batches), s.Err)
	}
	var fe *FramingError
	// Truncated inside the second header, then inside its records.
	for _, cut := range []int{len(one) + 10, len(two) - 1} {
		s := ParseSet(two[:cut])
		if len(s.Batches) != 1 || !errors.As(s.Err, &fe) || s.ErrPos != len(one) {
			t.Fatalf("cut at %d: %d batches, %v at %d", cut, len(s.Batches), s.Err, s.ErrPos)
		}
	}
	if _, err := Parse(one[:HeaderSize-1]); !errors.As(err, &fe) || fe.Error() != "60 bytes is shorter than a batch header" {
		t.Fatalf("short header: %v", err)
	}
	// batchLength beyond the input, negative, and below a header.
	for _, l := range []int32{int32(len(one)), -1, HeaderSize - LogOverhead - 1, 1<<31 - 1} {
		b := append([]byte(nil), one...)
		binary.BigEndian.PutUint32(b[OffBatchLength:], uint32(l))
		if _, err := Parse(b); !errors.As(err, &fe) || fe.BatchLength != l {
			t.Fatalf("batchLength %d: %v", l, err)
		}
	}
	// A truncated transactional batch still counts as transactional.
	txn := Encode(Header{Attributes: AttrTransactional, ProducerID: 1}, Record{Value: []byte("a")})
	if s := ParseSet(txn[:HeaderSize+1]); len(s.Batches) != 0 || !s.HasTransactional() {
		t.Fatal("truncated transactional batch not seen")
	}
	if s := ParseSet(two); s.HasTransactional() {
		t.Fatal("plain batches reported transactional")
	}
	n := 0
	Walk(append(two, 1, 2, 3), func(Batch) bool { n++; return true })
	if n != 2 {
		t.Fatalf("walk saw %d batches", n)
	}
}

func TestRecordBounds(t *testing.T) {
	full := AppendRecord(nil, Record{Key: []byte("key"), Value: []byte("value"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}})
	for cut := range len(full) {
		if _, _, err := NextRecord(full[:cut]); err == nil {
			t.Fatalf("record cut to %d of %d bytes parsed", cut, len(full))
		}
	}
	// Lengths that claim more than the record holds: the key's, then the
	// record's own.
	bad := append([]byte(nil), full...)
	bad[4] = 0x7e // key length 63
	if _, _, err := NextRecord(bad); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("oversized key: %v", err)
	}
	huge := binary.AppendVarint(nil, 1<<40)
	if _, _, err := NextRecord(append(huge, full[1:]...)); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("oversized record: %v", err)
	}
	// Header count beyond the bytes left.
	r, _, err := NextRecord(AppendRecord(nil, Record{Value: []byte("v")}))
	if err != nil {
		t.Fatal(err)
	}
	r.headers = binary.AppendVarint(nil, 1000)
	if _, err := r.ParseHeaders(); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("header count: %v", err)
	}
	split := AppendSplitRecord(nil, 3, 4, nil, []byte("he"), []byte("ad"))
	if want := AppendRecord(nil, Record{TimestampDelta: 3, OffsetDelta: 4, Value: []byte("head")}); !bytes.Equal(split, want) {
		t.Fatalf("split record % x, want % x", split, want)
	}
}

func FuzzParse(f *testing.F) {
	good := Encode(Plain(0, 1, 2), Record{Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{{Key: "a"}}})
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add(good[:len(good)-1])
	f.Add(EncodeMarker(Marker{ProducerID: 1, Type: ControlCommit}))
	f.Add(bytes.Repeat([]byte{0xff}, 80))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := ParseSet(in)
		pos := 0
		for _, bt := range s.Batches {
			if &bt.Raw[0] != &in[pos] || bt.Size() != int64(len(bt.Raw)) || len(bt.Raw) < HeaderSize {
				t.Fatalf("batch at %d: %d bytes, size %d", pos, len(bt.Raw), bt.Size())
			}
			pos += len(bt.Raw)
			rest := bt.Body()
			for range min(bt.RecordCount, 1000) {
				r, next, err := NextRecord(rest)
				if err != nil {
					break
				}
				if len(next) >= len(rest) || len(r.Raw) != len(rest)-len(next) {
					t.Fatal("a record consumed nothing or miscounted its bytes")
				}
				r.ParseHeaders()
				rest = next
			}
			if bt.IsControl() {
				bt.Control()
			}
			// Re-encoding what was parsed of a CRC-valid uncompressed batch
			// must reproduce it when its records parse back exactly.
			if bt.CRCValid() && bt.Codec() == 0 {
				resealed := append([]byte(nil), bt.Raw...)
				Seal(resealed, bt.Header)
				if !bytes.Equal(resealed[:HeaderSize], bt.Raw[:HeaderSize]) && bt.Magic == Magic {
					t.Fatalf("Seal changed a valid header: % x -> % x", bt.Raw[:HeaderSize], resealed[:HeaderSize])
				}
			}
		}
		if s.Err == nil && pos != len(in) {
			t.Fatalf("set covers %d of %d bytes without an error", pos, len(in))
		}
		if s.Err != nil && s.ErrPos != pos {
			t.Fatalf("error at %d after %d parsed bytes", s.ErrPos, pos)
		}
	})
}

// BenchmarkParse measures framing a produce partition's records (one
// batch of 100 records of 100 bytes, as a batching producer sends) and
// the CRC check the engine adds.
func BenchmarkParse(b *testing.B) {
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	batch := Encode(Plain(0, 1, 1), recs...)
	b.Run("set", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			if s := ParseSet(batch); len(s.Batches) != 1 {
				b.Fatal(s.Err)
			}
		}
	})
	b.Run("set+crc", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			if s := ParseSet(batch); !s.Batches[0].CRCValid() {
				b.Fatal("crc")
			}
		}
	})
	b.Run("records", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		bt, _ := Parse(batch)
		for b.Loop() {
			rest := bt.Body()
			for range bt.RecordCount {
				var err error
				if _, rest, err = NextRecord(rest); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
