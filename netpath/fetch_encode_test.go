package netpath

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// memRange is an in-memory engine.FileRange for encoder tests.
type memRange struct{ data []byte }

func (m *memRange) Fd() int    { return -1 }
func (m *memRange) Pos() int64 { return 0 }
func (m *memRange) Len() int32 { return int32(len(m.data)) }
func (m *memRange) Release()   {}
func (m *memRange) ReadAt(p []byte, off int64) (int, error) {
	return copy(p, m.data[off:]), nil
}

// TestFetchEncodingMatchesKmsg decodes our hand-built Fetch responses with
// kmsg for every version we serve, so the encoder cannot drift from the
// protocol definition.
func TestFetchEncodingMatchesKmsg(t *testing.T) {
	topics := []fetchTopic{
		{name: "a", id: [16]byte{1}, partitions: []fetchPartition{
			{partition: 0, highWatermark: 10, lastStable: 10, logStart: 2, data: &memRange{bytes.Repeat([]byte{7}, 300)}},
			{partition: 1, errorCode: 6, highWatermark: -1, lastStable: -1, logStart: -1, hasLeader: true, currentLeader: 3, currentEpoch: 12},
			{partition: 2, highWatermark: 5, lastStable: 5, logStart: 0},
		}},
		{name: "topic-b", id: [16]byte{2}, partitions: []fetchPartition{
			{partition: 7, highWatermark: 99, lastStable: 98, logStart: 1, data: &memRange{bytes.Repeat([]byte{9}, 70000)}},
		}},
	}
	for v := int16(4); v <= handlers[1].max; v++ {
		for _, isolation := range []int8{0, 1} {
			var body []byte
			for _, p := range encodeFetchResponse(nil, v, isolation, 0, topics) {
				if p.file != nil {
					body = append(body, p.file.(*memRange).data...)
				} else {
					body = append(body, p.buf...)
				}
			}
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
			}
			if len(resp.Topics) != 2 || resp.Topics[1].Topic != "topic-b" || len(resp.Topics[0].Partitions) != 3 {
				t.Fatalf("v%d: topics decoded as %+v", v, resp.Topics)
			}
			p0 := resp.Topics[0].Partitions[0]
			if p0.HighWatermark != 10 || p0.LastStableOffset != 10 || (v >= 5 && p0.LogStartOffset != 2) || len(p0.RecordBatches) != 300 {
				t.Fatalf("v%d: partition 0 decoded as %+v", v, p0)
			}
			if (isolation == 1) != (p0.AbortedTransactions != nil) {
				t.Fatalf("v%d isolation %d: aborted transactions %v", v, isolation, p0.AbortedTransactions)
			}
			p1 := resp.Topics[0].Partitions[1]
			if v >= 12 && (p1.CurrentLeader.LeaderID != 3 || p1.CurrentLeader.LeaderEpoch != 12) {
				t.Fatalf("v%d: CurrentLeader decoded as %+v", v, p1.CurrentLeader)
			}
			if resp.Topics[0].Partitions[1].ErrorCode != 6 {
				t.Fatalf("v%d: error code lost", v)
			}
			pb := resp.Topics[1].Partitions[0]
			if pb.Partition != 7 || pb.LastStableOffset != 98 || len(pb.RecordBatches) != 70000 || pb.RecordBatches[69999] != 9 {
				t.Fatalf("v%d: topic-b partition decoded wrong", v)
			}
		}
	}
}

func TestParseRequestHeaderBounds(t *testing.T) {
	// Flexible header (Metadata v9) claiming a huge tagged field count.
	frame := []byte{0, 3, 0, 9, 0, 0, 0, 1, 0, 1, 'x', 0xff, 0xff, 0xff, 0x7f}
	if _, _, err := parseRequestHeader(frame, nil); err == nil {
		t.Fatal("huge tagged field count accepted")
	}
	// Client id longer than the frame.
	frame = []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 'x'}
	if _, _, err := parseRequestHeader(frame, nil); err == nil {
		t.Fatal("oversized client id accepted")
	}
	// A good flexible header with one tagged field.
	frame = []byte{0, 3, 0, 9, 0, 0, 0, 5, 0, 1, 'c', 1, 0, 2, 0xaa, 0xbb, 0x42}
	h, body, err := parseRequestHeader(frame, nil)
	if err != nil || h.correlationID != 5 || *h.clientID != "c" || !bytes.Equal(body, []byte{0x42}) {
		t.Fatalf("header %+v body %v err %v", h, body, err)
	}
}

func TestRegistryCoversEveryHandledKey(t *testing.T) {
	for _, key := range registeredKeys() {
		h := handlers[key]
		req := kmsg.RequestForKey(key)
		if h.max > req.MaxVersion() {
			t.Errorf("key %d: we advertise v%d but kmsg only knows v%d", key, h.max, req.MaxVersion())
		}
		if h.min > h.max {
			t.Errorf("key %d: min %d > max %d", key, h.min, h.max)
		}
	}
	// librdkafka requirements (NOTES.md): Produce v3 and Fetch v4 in range
	// for record batch v2, Produce v7/Fetch v10 for zstd, Produce min 0.
	need := map[int16][2]int16{0: {0, 7}, 1: {4, 10}, 3: {0, 4}, 18: {0, 3}}
	for key, r := range need {
		h := handlers[key]
		if h == nil || h.min > r[0] || h.max < r[1] {
			t.Errorf("key %d must cover v%d..v%d", key, r[0], r[1])
		}
	}
}

// A fetch state's encoding is reused from response to response: the
// second response takes the first one's frame buffer and parts list, the
// reset between them drops the file ranges the parts referred to, and a
// frame buffer grown past maxKeptEncoding is not kept.
func TestFetchEncodingReuse(t *testing.T) {
	var enc fetchEncoding
	data := &memRange{data: []byte("records")}
	topics := []fetchTopic{{name: "t", partitions: []fetchPartition{{partition: 0, data: data}}}}
	first := encodeFetchResponse(&enc, 12, 0, 0, topics)
	if len(first) != 3 || first[1].file != data {
		t.Fatalf("parts %+v", first)
	}
	buf0, parts0 := &enc.buf[:1][0], &enc.parts[:1][0]
	enc.reset()
	for _, p := range enc.parts[:cap(enc.parts)] {
		if p.file != nil || p.buf != nil {
			t.Fatal("reset kept a part")
		}
	}
	second := encodeFetchResponse(&enc, 12, 0, 0, topics)
	if &second[0].buf[0] != buf0 || &second[0] != parts0 {
		t.Fatal("the second response did not reuse the encoding")
	}
	enc.buf = make([]byte, 0, maxKeptEncoding+1)
	enc.reset()
	if enc.buf != nil {
		t.Fatal("an oversized frame buffer was kept")
	}
}
