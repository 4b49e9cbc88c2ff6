package netpath

import (
	"encoding/binary"
)

// The Fetch response is encoded here rather than by kmsg because record
// data must stay in files: the encoder emits byte parts for everything it
// writes and a file part wherever a partition's records go, with the
// records length prefix computed from the file range. A test decodes the
// result with kmsg to keep this in step with the protocol definition.

// encodeFetchResponse encodes into enc's buffers, which the response's
// parts then use until it is released; a nil enc allocates them.
func encodeFetchResponse(enc *fetchEncoding, version int16, isolation int8, sessionID int32, topics []fetchTopic) []responsePart {
	flex := version >= 12
	// Sized for the headers of every partition (about 50 bytes each,
	// without aborted transactions), so the frame grows at most rarely,
	// and the parts list for every file range: both allocated once.
	size, files := 64, 0
	for i := range topics {
		size += 16 + len(topics[i].name) + 56*len(topics[i].partitions)
		for _, p := range topics[i].partitions {
			if p.data != nil && p.data.Len() > 0 {
				files++
			}
		}
	}
	if enc == nil {
		enc = &fetchEncoding{}
	}
	parts, b := enc.take(2*files+1, size)
	b = appendInt32(b, 0) // throttle_time_ms (v1+)
	if version >= 7 {
		b = appendInt16(b, 0)         // error_code
		b = appendInt32(b, sessionID) // 0: no session (fetch_sessions.go)
	}
	b = appendArrayLen(b, len(topics), flex)
	for _, t := range topics {
		if version >= 13 {
			b = append(b, t.id[:]...)
		} else {
			b = appendString(b, t.name, flex)
		}
		b = appendArrayLen(b, len(t.partitions), flex)
		for _, p := range t.partitions {
			b = appendInt32(b, p.partition)
			b = appendInt16(b, p.errorCode)
			b = appendInt64(b, p.highWatermark)
			b = appendInt64(b, p.lastStable) // v4+
			if version >= 5 {
				b = appendInt64(b, p.logStart)
			}
			// aborted_transactions (v4+): null for read_uncommitted.
			if isolation == 1 {
				b = appendArrayLen(b, len(p.aborted), flex)
				for _, a := range p.aborted {
					b = appendInt64(b, a.ProducerID)
					b = appendInt64(b, a.FirstOffset)
					if flex {
						b = append(b, 0)
					}
				}
			} else {
				b = appendNullArray(b, flex)
			}
			if version >= 11 {
				b = appendInt32(b, -1) // preferred_read_replica
			}
			var n int
			if p.data != nil {
				n = int(p.data.Len())
			}
			b = appendBytesLen(b, n, flex)
			if n > 0 {
				parts = append(parts, responsePart{buf: b}, responsePart{file: p.data})
				b = b[len(b):] // the rest of the frame's buffer, after this part

			}
			if flex {
				// Partition tagged fields, ascending: tag 0 DivergingEpoch
				// (epoch, end offset, empty tags: 13 bytes), tag 1
				// CurrentLeader (leader id, epoch, empty tags: 9 bytes).
				tags := byte(0)
				if p.diverging != nil {
					tags++
				}
				if p.hasLeader {
					tags++
				}
				b = append(b, tags)
				if d := p.diverging; d != nil {
					b = append(b, 0, 13)
					b = appendInt32(b, d.Epoch)
					b = appendInt64(b, d.EndOffset)
					b = append(b, 0)
				}
				if p.hasLeader {
					b = append(b, 1, 9)
					b = appendInt32(b, p.currentLeader)
					b = appendInt32(b, p.currentEpoch)
					b = append(b, 0)
				}
			}
		}
		if flex {
			b = append(b, 0) // topic tagged fields
		}
	}
	if flex {
		b = append(b, 0) // response tagged fields
	}
	return append(parts, responsePart{buf: b})
}

// fetchEncoding holds a fetch response's encoded frame and parts list
// between fetches (fetchState keeps one): a new pair per response cost
// two allocations on every replica fetch.
type fetchEncoding struct {
	parts []responsePart
	buf   []byte
}

// maxKeptEncoding bounds the frame buffer kept for the next response.
const maxKeptEncoding = 64 << 10

// take returns the parts list and frame buffer, empty, with room for
// nParts parts and size bytes.
func (e *fetchEncoding) take(nParts, size int) ([]responsePart, []byte) {
	if cap(e.parts) < nParts {
		e.parts = make([]responsePart, 0, nParts)
	}
	if cap(e.buf) < size {
		e.buf = make([]byte, 0, size)
	}
	return e.parts[:0], e.buf[:0]
}

// reset drops the file ranges the parts list refers to, and a frame
// buffer too large to keep.
func (e *fetchEncoding) reset() {
	clear(e.parts[:cap(e.parts)])
	if cap(e.buf) > maxKeptEncoding {
		e.buf = nil
	}
}

// encodeFetchError is a response with only a top-level error (v7+).
func encodeFetchError(version int16, code int16) []byte {
	flex := version >= 12
	b := appendInt32(nil, 0)
	b = appendInt16(b, code)
	b = appendInt32(b, 0)
	b = appendArrayLen(b, 0, flex)
	if flex {
		b = append(b, 0)
	}
	return b
}

func appendInt16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func appendArrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return appendInt32(b, int32(n))
}

func appendNullArray(b []byte, flex bool) []byte {
	if flex {
		return append(b, 0)
	}
	return appendInt32(b, -1)
}

func appendString(b []byte, s string, flex bool) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = appendInt16(b, int16(len(s)))
	}
	return append(b, s...)
}

func appendBytesLen(b []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return appendInt32(b, int32(n))
}
