package loadgen

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testFrame is a finished one-partition frame with n records.
func testFrame(t *testing.T, partition int32, n int, corr int32) *produceFrame {
	t.Helper()
	f := &produceFrame{}
	f.reset(7, -1, 30000, "topic-a", partition, CodecNone)
	for i := range n {
		f.appendRecord(1000+int64(i), []byte("k"), []byte("head-of-value"), []byte("tail"), int64(i))
	}
	if err := f.finish(corr); err != nil {
		t.Fatal(err)
	}
	return f
}

// decodeRequests parses the bytes of reqs as Produce v7 requests.
func decodeRequests(t *testing.T, reqs []*request) []*kmsg.ProduceRequest {
	t.Helper()
	var wire []byte
	for _, rq := range reqs {
		for _, b := range rq.appendBuffers(nil) {
			wire = append(wire, b...)
		}
	}
	var out []*kmsg.ProduceRequest
	for len(wire) > 0 {
		size := int(binary.BigEndian.Uint32(wire))
		msg := wire[4 : 4+size]
		wire = wire[4+size:]
		// key, version, correlation id, client id
		clientLen := int(binary.BigEndian.Uint16(msg[8:]))
		req := kmsg.NewPtrProduceRequest()
		req.Version = 7
		if err := req.ReadFrom(msg[10+clientLen:]); err != nil {
			t.Fatalf("request %d does not decode: %v", len(out), err)
		}
		out = append(out, req)
	}
	return out
}

// TestGroupFrames: frames of distinct partitions travel as one Produce
// request with one entry per partition, byte for byte their batches; a
// second frame of a partition starts a new request (order kept), and so
// does the size bound.
func TestGroupFrames(t *testing.T) {
	frames := []*produceFrame{testFrame(t, 0, 3, 11), testFrame(t, 5, 1, 12), testFrame(t, 2, 2, 13), testFrame(t, 5, 4, 14), testFrame(t, 1, 1, 15)}
	reqs := groupFrames(nil, frames, 1<<20)
	if len(reqs) != 2 || len(reqs[0].frames) != 3 || len(reqs[1].frames) != 2 {
		t.Fatalf("requests of %v frames, want 3 then 2 (partition 5 twice)", func() (n []int) {
			for _, rq := range reqs {
				n = append(n, len(rq.frames))
			}
			return n
		}())
	}
	if reqs[0].corr() != 11 || reqs[1].corr() != 14 {
		t.Fatalf("correlation ids %d, %d: want the first frame's", reqs[0].corr(), reqs[1].corr())
	}
	decoded := decodeRequests(t, reqs)
	if len(decoded) != 2 {
		t.Fatalf("%d requests on the wire", len(decoded))
	}
	i := 0
	for r, req := range decoded {
		if req.Acks != -1 || req.TimeoutMillis != 30000 || len(req.Topics) != 1 || req.Topics[0].Topic != "topic-a" {
			t.Fatalf("request %d header: %+v", r, req)
		}
		for _, p := range req.Topics[0].Partitions {
			f := frames[i]
			if p.Partition != f.partition || !bytes.Equal(p.Records, f.buf[f.batchAt:]) {
				t.Fatalf("request %d entry for partition %d: want frame %d (partition %d) and its batch", r, p.Partition, i, f.partition)
			}
			i++
		}
	}
	if i != len(frames) {
		t.Fatalf("%d of %d frames on the wire", i, len(frames))
	}
	// One frame alone is sent as built; the size bound splits.
	one := groupFrames(nil, frames[:1], 1<<20)
	if bufs := one[0].appendBuffers(nil); len(one) != 1 || len(bufs) != 1 || !bytes.Equal(bufs[0], frames[0].buf) {
		t.Fatal("a single frame is not sent as built")
	}
	if split := groupFrames(nil, frames[:3], len(frames[0].buf)+10); len(split) != 3 {
		t.Fatalf("size bound: %d requests, want 3", len(split))
	}
}
