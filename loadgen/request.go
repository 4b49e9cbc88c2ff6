package loadgen

import (
	"encoding/binary"
	"net"
	"sync"
)

// maxRequestBytes bounds a Produce request built from several frames
// (Kafka's producer default max.request.size); one frame larger than it
// (--batch-bytes) still goes alone.
const maxRequestBytes = 1 << 20

// request is one Produce request on a lean connection: one frame (sent as
// built), or several frames of distinct partitions of the topic behind
// one header. A frame is a complete one-partition request
// (produceFrame): its partition entry starts 8 bytes before its batch
// (partition int32, records length int32), and everything before that,
// the header up to and including the partition count, is the same for
// every frame of a connection except size and correlation id. So a
// multi-partition request is a copy of the first frame's header, with
// size and partition count patched, followed by each frame's partition
// entry, written straight from the frames (writev). The first frame's
// correlation id is the request's.
type request struct {
	frames []*produceFrame
	hdr    []byte // multi-frame requests only
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

// partEntryBack is how far before a frame's batch its partition entry
// starts: partition int32 and records length int32.
const partEntryBack = 8

// groupFrames appends to reqs the requests carrying frames, in order: a
// request takes frames while their partitions are distinct and its size
// stays within maxBytes, so the frames of one partition stay in order
// across requests.
func groupFrames(reqs []*request, frames []*produceFrame, maxBytes int) []*request {
	var cur *request
	size := 0
	for _, f := range frames {
		entry := len(f.buf) - (f.batchAt - partEntryBack)
		if cur != nil && (size+entry > maxBytes || cur.has(f.partition)) {
			cur = nil
		}
		if cur == nil {
			cur = requestPool.Get().(*request)
			reqs = append(reqs, cur)
			size = f.batchAt - partEntryBack
		}
		cur.frames = append(cur.frames, f)
		size += entry
	}
	for _, rq := range reqs {
		rq.seal()
	}
	return reqs
}

func (rq *request) has(partition int32) bool {
	for _, f := range rq.frames {
		if f.partition == partition {
			return true
		}
	}
	return false
}

// seal builds the header of a multi-frame request.
func (rq *request) seal() {
	if len(rq.frames) < 2 {
		return
	}
	first := rq.frames[0]
	hdrLen := first.batchAt - partEntryBack
	rq.hdr = append(rq.hdr[:0], first.buf[:hdrLen]...)
	size := hdrLen - 4
	for _, f := range rq.frames {
		size += len(f.buf) - (f.batchAt - partEntryBack)
	}
	binary.BigEndian.PutUint32(rq.hdr[0:], uint32(size))
	binary.BigEndian.PutUint32(rq.hdr[hdrLen-4:], uint32(len(rq.frames)))
}

// appendBuffers adds the request's bytes to bufs.
func (rq *request) appendBuffers(bufs net.Buffers) net.Buffers {
	if len(rq.frames) == 1 {
		return append(bufs, rq.frames[0].buf)
	}
	bufs = append(bufs, rq.hdr)
	for _, f := range rq.frames {
		bufs = append(bufs, f.buf[f.batchAt-partEntryBack:])
	}
	return bufs
}

// corr is the request's correlation id.
func (rq *request) corr() int32 {
	f := rq.frames[0]
	return int32(binary.BigEndian.Uint32(f.buf[f.corrAt:]))
}

// release returns rq to the pool once its frames are handed on.
func (rq *request) release() {
	clear(rq.frames)
	rq.frames = rq.frames[:0]
	requestPool.Put(rq)
}
