package netpath

import (
	"testing"
	"time"
)

// benchFetch times fetches of 64 partitions with nothing new (max_wait
// 0): the per-request cost of a long poll's read, sessionless or as an
// incremental session fetch that names no partition.
func benchFetch(b *testing.B, incremental bool) {
	const parts = 64
	srv, _ := clusterServer(b, nil, parts, "b")
	offsets := map[int32]int64{}
	for p := range int32(parts) {
		offsets[p] = 0
	}
	done := make(chan struct{})
	full := sessionFetch("b", 0, -1, offsets)
	var id, epoch int32
	if incremental {
		full.SessionEpoch = 0
		resp := srv.fetch(full, time.Now(), done, nil, new(time.Duration))
		resp.releaseAll()
		id, epoch = srv.sessionIDForBench(), 1
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req := full
		if incremental {
			req = sessionFetch("b", id, epoch, nil)
			epoch++
		}
		resp := srv.fetch(req, time.Now(), done, nil, new(time.Duration))
		resp.releaseAll()
	}
}

func BenchmarkFetchIdle64(b *testing.B)            { benchFetch(b, false) }
func BenchmarkFetchIdle64Incremental(b *testing.B) { benchFetch(b, true) }

// sessionIDForBench returns the id of the only cached session.
func (s *Server) sessionIDForBench() int32 {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	for id := range s.sessions.byID {
		return id
	}
	return 0
}
