package peer

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionLeader is a fake leader with KIP-227 sessions: a full request
// with epoch 0 opens one (when give), an incremental one must carry the
// session id and the next epoch, lists the partitions whose fetch state
// changed and forgets others; it answers only the partitions listed.
// Every partition has high watermark 100+partition.
type sessionLeader struct {
	mu       sync.Mutex
	give     bool
	id       int32
	epoch    int32           // last epoch accepted
	parts    map[int32]int64 // session: partition -> fetch offset
	reqs     []*kmsg.FetchRequest
	failNext int16 // top-level error for the next request
	records  []byte
}

func (l *sessionLeader) respond(c net.Conn, corr int32, frame []byte) bool {
	// Request header v2: key, version, correlation id, client id, tags.
	n := int(binary.BigEndian.Uint16(frame[8:10]))
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	if err := req.ReadFrom(frame[10+n+1:]); err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	answer := func(topic string, p int32) {
		if len(resp.Topics) == 0 || resp.Topics[len(resp.Topics)-1].Topic != topic {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LogStartOffset, rp.RecordBatches = p, 100+int64(p), 0, l.records
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	switch {
	case l.failNext != 0:
		resp.ErrorCode, l.failNext = l.failNext, 0
	case req.SessionID == 0:
		if l.give && req.SessionEpoch == 0 {
			l.id++
			l.epoch, l.parts = 0, map[int32]int64{}
			resp.SessionID = l.id
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if resp.SessionID != 0 {
					l.parts[p.Partition] = p.FetchOffset
				}
				answer(t.Topic, p.Partition)
			}
		}
	case req.SessionID != l.id:
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
	case req.SessionEpoch != l.epoch+1:
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
	default:
		l.epoch++
		resp.SessionID = l.id
		for _, t := range req.ForgottenTopics {
			for _, p := range t.Partitions {
				delete(l.parts, p)
			}
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				l.parts[p.Partition] = p.FetchOffset
				answer(t.Topic, p.Partition)
			}
		}
	}
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	body = append(body, 0)
	body = resp.AppendTo(body)
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	return true
}

func (l *sessionLeader) last() *kmsg.FetchRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reqs[len(l.reqs)-1]
}

func listed(r *kmsg.FetchRequest) (out []int32) {
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.Partition)
		}
	}
	slices.Sort(out)
	return out
}

func forgotten(r *kmsg.FetchRequest) (out []int32) {
	for _, t := range r.ForgottenTopics {
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

func sessReq(offsets ...int64) *replication.FetchRequest {
	req := &replication.FetchRequest{ReplicaID: 2, MaxWait: 100 * time.Millisecond, MaxBytes: 1 << 20}
	for i, off := range offsets {
		if off < 0 {
			continue
		}
		req.Partitions = append(req.Partitions, replication.FetchPartition{
			TopicPartition: replication.TopicPartition{Topic: "t", Partition: int32(i)},
			FetchOffset:    off, MaxBytes: 1 << 20,
		})
	}
	return req
}

// answers returns partition -> high watermark of a response.
func answers(t *testing.T, resp *replication.FetchResponse) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for _, p := range resp.Partitions {
		if p.Err != nil {
			t.Fatalf("partition %d: %v", p.Partition, p.Err)
		}
		out[p.Partition] = p.HighWatermark
	}
	return out
}

// The client opens a session with a full request, then lists only the
// partitions whose fetch state changed and forgets the ones no longer
// asked for; replication gets the leader's answers alone (quiet
// partitions are not filled in); a lost session is restarted with a full
// request in the same call.
func TestFetchSessionIncremental(t *testing.T) {
	l := &sessionLeader{give: true}
	cl := startFakeBrokerReq(t, l.respond).client(t)
	ctx := context.Background()
	fetch := func(req *replication.FetchRequest) map[int32]int64 {
		t.Helper()
		resp, err := cl.Fetch(ctx, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		got := answers(t, resp)
		resp.Release() // hands back resp as well
		return got
	}
	check := func(step string, r *kmsg.FetchRequest, id, epoch int32, list, forget []int32) {
		t.Helper()
		if r.SessionID != id || r.SessionEpoch != epoch || !slices.Equal(listed(r), list) || !slices.Equal(forgotten(r), forget) {
			t.Fatalf("%s: session %d epoch %d listing %v forgetting %v; want %d %d %v %v",
				step, r.SessionID, r.SessionEpoch, listed(r), forgotten(r), id, epoch, list, forget)
		}
	}
	want2 := map[int32]int64{0: 100, 1: 101}
	if got := fetch(sessReq(0, 0)); !maps2Equal(got, want2) {
		t.Fatalf("full: %v", got)
	}
	check("full", l.last(), 0, 0, []int32{0, 1}, nil)
	// Nothing changed: an empty incremental request, and no answers.
	if got := fetch(sessReq(0, 0)); len(got) != 0 {
		t.Fatalf("quiet incremental: %v", got)
	}
	check("quiet", l.last(), 1, 1, nil, nil)
	if got := fetch(sessReq(0, 5)); !maps2Equal(got, map[int32]int64{1: 101}) {
		t.Fatalf("incremental: %v", got)
	}
	check("one moved", l.last(), 1, 2, []int32{1}, nil)
	if got := fetch(sessReq(0, -1)); len(got) != 0 {
		t.Fatalf("after removing 1: %v", got)
	}
	check("one removed", l.last(), 1, 3, nil, []int32{1})
	if !maps2Equal(l.parts, map[int32]int64{0: 0}) {
		t.Fatalf("leader's session %v", l.parts)
	}
	// Re-added, then the leader loses the session: the same call
	// starts a new one with a full request.
	fetch(sessReq(0, 5))
	check("re-added", l.last(), 1, 4, []int32{1}, nil)
	l.mu.Lock()
	l.failNext = kerr.FetchSessionIDNotFound.Code
	l.mu.Unlock()
	if got := fetch(sessReq(0, 6)); !maps2Equal(got, want2) {
		t.Fatalf("after the session was lost: %v", got)
	}
	check("restarted", l.last(), 0, 0, []int32{0, 1}, nil)
	fetch(sessReq(0, 6))
	check("new session", l.last(), 2, 1, nil, nil)
	// A network failure (here a cancelled request) leaves the session's
	// state at the leader unknown: the next request is full.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cl.Fetch(cctx, 1, sessReq(0, 7)); err == nil {
		t.Fatal("cancelled fetch succeeded")
	}
	fetch(sessReq(0, 7))
	check("after a failure", l.last(), 0, 0, []int32{0, 1}, nil)
}

func maps2Equal(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A leader that keeps no session (today's server answers session id 0)
// gets full requests every time; with sessions disabled the client does
// not ask for one (epoch -1).
func TestFetchSessionNotGiven(t *testing.T) {
	l := &sessionLeader{}
	cl := startFakeBrokerReq(t, l.respond).client(t)
	for i := range 3 {
		resp, err := cl.Fetch(context.Background(), 1, sessReq(int64(i), 0))
		if err != nil {
			t.Fatal(err)
		}
		if got := answers(t, resp); len(got) != 2 {
			t.Fatalf("answers %v", got)
		}
		if r := l.last(); r.SessionID != 0 || r.SessionEpoch != 0 || len(listed(r)) != 2 {
			t.Fatalf("request %d: session %d epoch %d listing %v", i, r.SessionID, r.SessionEpoch, listed(r))
		}
	}
	off := startFakeBrokerReq(t, l.respond).client(t)
	off.cfg.DisableFetchSessions = true
	if _, err := off.Fetch(context.Background(), 1, sessReq(0, 0)); err != nil {
		t.Fatal(err)
	}
	if r := l.last(); r.SessionID != 0 || r.SessionEpoch != -1 {
		t.Fatalf("sessions off: session %d epoch %d", r.SessionID, r.SessionEpoch)
	}
}

// A released response buffer carries the next response; one not released
// is never reused (the engine may still be writing its records).
func TestFetchBufferReuse(t *testing.T) {
	l := &sessionLeader{records: make([]byte, 4096)}
	cl := startFakeBrokerReq(t, l.respond).client(t)
	fetch := func() *replication.FetchResponse {
		t.Helper()
		resp, err := cl.Fetch(context.Background(), 1, sessReq(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Partitions) != 1 || len(resp.Partitions[0].Records) != 4096 {
			t.Fatalf("response %+v", resp.Partitions)
		}
		return resp
	}
	addr := func(r *replication.FetchResponse) *byte { return &r.Partitions[0].Records[0] }
	a := fetch()
	b := fetch()
	if addr(a) == addr(b) {
		t.Fatal("an unreleased buffer was reused")
	}
	bAddr := addr(b)
	b.Release()
	if c := fetch(); addr(c) != bAddr {
		t.Fatal("the released buffer was not reused")
	} else {
		c.Release()
	}
	cl.cfg.DisableBufferReuse = true
	c := fetch()
	cAddr := addr(c) // before Release, which hands back the response too
	c.Release()
	if d := fetch(); addr(d) == cAddr {
		t.Fatal("buffer reused with DisableBufferReuse")
	}
	// Oversized buffers are not kept.
	cl.putFetchBuf(make([]byte, 0, maxPooledBuf+1))
	if got := cl.fetchBuf(10); cap(got) > maxPooledBuf {
		t.Fatalf("pooled a %d-byte buffer", cap(got))
	}
}

// A partition answered with records (or an error) is listed in the next
// request even when its fetch state did not change (the fetcher dropped
// a stale answer): the leader learns our real position again.
func TestFetchSessionRelistsAnswered(t *testing.T) {
	l := &sessionLeader{give: true, records: []byte("batch")}
	cl := startFakeBrokerReq(t, l.respond).client(t)
	for i := range 3 {
		resp, err := cl.Fetch(context.Background(), 1, sessReq(0))
		if err != nil {
			t.Fatal(err)
		}
		resp.Release()
		if r := l.last(); i > 0 && (r.SessionEpoch != int32(i) || !slices.Equal(listed(r), []int32{0})) {
			t.Fatalf("fetch %d: epoch %d listing %v, want %d [0]", i, r.SessionEpoch, listed(r), i)
		}
	}
}

// BenchmarkFetchQuiet256 is one follower fetch of 256 partitions none of
// which has news, with and without a session (the leader is the fake on
// loopback, so most of the time is the exchange): with a session the
// request lists nothing and the answer is empty.
func BenchmarkFetchQuiet256(b *testing.B) {
	for _, sessions := range []bool{false, true} {
		b.Run(fmt.Sprintf("sessions=%v", sessions), func(b *testing.B) {
			l := &sessionLeader{give: true}
			var reqBytes atomic.Int64
			cl := startFakeBrokerReq(b, func(c net.Conn, corr int32, frame []byte) bool {
				reqBytes.Add(int64(len(frame)))
				return l.respond(c, corr, frame)
			}).client(b)
			cl.cfg.DisableFetchSessions = !sessions
			req := sessReq(make([]int64, 256)...)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				resp, err := cl.Fetch(ctx, 1, req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Release()
			}
			b.ReportMetric(float64(reqBytes.Load())/float64(b.N), "req-bytes/op")
		})
	}
}

// topicIndex finds every topic added, past its scanned slots too, and
// nothing else.
func TestTopicIndex(t *testing.T) {
	var x topicIndex
	for i := range 9 {
		x.add(fmt.Sprintf("t%d", i), i*10)
	}
	for i := range 9 {
		if got, ok := x.find(fmt.Sprintf("t%d", i)); !ok || got != i*10 {
			t.Errorf("find(t%d) = %d, %v; want %d", i, got, ok, i*10)
		}
	}
	if _, ok := x.find("t9"); ok {
		t.Error("found a topic never added")
	}
}

// A released answer is filled again by the next fetch of the session, an
// unreleased one never is; its topic names are the request's own strings,
// not views of the pooled response buffer a later response overwrites.
func TestFetchAnswerReuse(t *testing.T) {
	l := &sessionLeader{records: []byte("batch")}
	cl := startFakeBrokerReq(t, l.respond).client(t)
	req := sessReq(0)
	fetch := func() *replication.FetchResponse {
		t.Helper()
		resp, err := cl.Fetch(context.Background(), 1, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Partitions) != 1 {
			t.Fatalf("response %+v", resp.Partitions)
		}
		if got, want := unsafe.StringData(resp.Partitions[0].Topic), unsafe.StringData(req.Partitions[0].Topic); got != want {
			t.Fatal("the answer's topic name is not the request's string")
		}
		return resp
	}
	a := fetch()
	b := fetch()
	if a == b {
		t.Fatal("an unreleased answer was filled again")
	}
	b.Release()
	if c := fetch(); c != b {
		t.Fatal("the released answer was not reused")
	}
}
