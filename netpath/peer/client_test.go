package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/replication"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker accepts connections on loopback and answers each request
// frame with whatever respond writes (nothing, when it returns false, to
// leave the client waiting). It counts accepted connections, so tests see
// whether the client reused or redialed one.
type fakeBroker struct {
	ln       net.Listener
	accepted atomic.Int32
}

func startFakeBroker(t testing.TB, respond func(c net.Conn, corr int32) bool) *fakeBroker {
	t.Helper()
	return startFakeBrokerReq(t, func(c net.Conn, corr int32, _ []byte) bool { return respond(c, corr) })
}

// startFakeBrokerReq is startFakeBroker whose respond also gets the
// request frame (after the size).
func startFakeBrokerReq(t testing.TB, respond func(c net.Conn, corr int32, frame []byte) bool) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fb.accepted.Add(1)
			go func() {
				defer c.Close()
				for {
					var size [4]byte
					if _, err := io.ReadFull(c, size[:]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(size[:])
					if n < 8 || n > 1<<20 {
						return
					}
					body := make([]byte, n)
					if _, err := io.ReadFull(c, body); err != nil {
						return
					}
					// key(2) version(2) correlation id(4) ...
					if !respond(c, int32(binary.BigEndian.Uint32(body[4:8])), body) {
						io.Copy(io.Discard, c) // hold the connection open, silent
						return
					}
				}
			}()
		}
	}()
	return fb
}

// startAnsweringBroker is a fake broker that answers every fetch with
// high watermark hw, counting the requests in n (when not nil).
func startAnsweringBroker(t testing.TB, hw int64, n *atomic.Int32) *fakeBroker {
	t.Helper()
	return startFakeBroker(t, func(c net.Conn, corr int32) bool {
		if n != nil {
			n.Add(1)
		}
		c.Write(fetchResponse(corr, 0, hw))
		return true
	})
}

// client returns a Client whose metadata image places broker 1 at fb.
func (fb *fakeBroker) client(t testing.TB) *Client {
	t.Helper()
	im := fb.image(t)
	c := New(Config{Image: func() *metadata.Image { return im }})
	t.Cleanup(c.Close)
	return c
}

// image is a metadata image that places broker 1 at fb.
func (fb *fakeBroker) image(t testing.TB) *metadata.Image {
	t.Helper()
	addr := fb.ln.Addr().(*net.TCPAddr)
	im, res := metadata.EmptyImage().Apply(1, metadata.Command{InitCluster: &metadata.InitCluster{ClusterID: "c1"}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	im, res = im.Apply(2, metadata.Command{RegisterBroker: &metadata.RegisterBroker{
		ClusterID: "c1", ID: 1, Incarnation: metadata.NewUUID(),
		Endpoints: []metadata.Endpoint{{Listener: "PLAINTEXT", Host: "127.0.0.1", Port: int32(addr.Port)}},
	}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return im
}

// A broker that moves is reached at its new address from the first
// request after the image says so: the client keeps addresses per image,
// not per broker id.
func TestFetchFollowsBrokerToNewAddress(t *testing.T) {
	var first, second atomic.Int32
	fb1, fb2 := startAnsweringBroker(t, 42, &first), startAnsweringBroker(t, 42, &second)
	var cur atomic.Pointer[metadata.Image]
	cur.Store(fb1.image(t))
	cl := New(Config{Image: func() *metadata.Image { return cur.Load() }})
	t.Cleanup(cl.Close)
	for i := 0; i < 2; i++ {
		resp, err := cl.Fetch(context.Background(), 1, fetchReq())
		if err != nil {
			t.Fatal(err)
		}
		resp.Release()
	}
	cur.Store(fb2.image(t))
	resp, err := cl.Fetch(context.Background(), 1, fetchReq())
	if err != nil {
		t.Fatal(err)
	}
	resp.Release()
	if first.Load() != 2 || second.Load() != 1 {
		t.Fatalf("requests at the old address %d, at the new one %d; want 2 and 1", first.Load(), second.Load())
	}
}

// fetchResponse is a v12 fetch response frame for corr with one partition
// of topic "t" answering code.
func fetchResponse(corr int32, code int16, hw int64) []byte {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	tp := kmsg.NewFetchResponseTopic()
	tp.Topic = "t"
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition = 0
	p.ErrorCode = code
	p.HighWatermark = hw
	tp.Partitions = append(tp.Partitions, p)
	resp.Topics = append(resp.Topics, tp)
	// Response header v1: correlation id, then an empty tag section.
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	body = append(body, 0)
	body = resp.AppendTo(body)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func fetchReq() *replication.FetchRequest {
	return &replication.FetchRequest{
		ReplicaID: 2, MaxWait: 100 * time.Millisecond, MaxBytes: 1 << 20,
		Partitions: []replication.FetchPartition{{TopicPartition: replication.TopicPartition{Topic: "t", Partition: 0}, MaxBytes: 1 << 20}},
	}
}

// A well-formed exchange decodes into replication's terms (codes become
// replication errors) and the connection is kept for the next request.
func TestFetchDecodesAndReusesConnection(t *testing.T) {
	var n atomic.Int32
	fb := startFakeBroker(t, func(c net.Conn, corr int32) bool {
		code := int16(0)
		if n.Add(1) == 2 {
			code = kerr.NotLeaderForPartition.Code
		}
		c.Write(fetchResponse(corr, code, 42))
		return true
	})
	cl := fb.client(t)
	ctx := context.Background()
	resp, err := cl.Fetch(ctx, 1, fetchReq())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Partitions) != 1 || resp.Partitions[0].HighWatermark != 42 || resp.Partitions[0].Err != nil {
		t.Fatalf("first fetch: %+v", resp.Partitions)
	}
	resp, err = cl.Fetch(ctx, 1, fetchReq())
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(resp.Partitions[0].Err, replication.ErrNotLeaderOrFollower) {
		t.Fatalf("second fetch: partition error %v, want replication.ErrNotLeaderOrFollower", resp.Partitions[0].Err)
	}
	if got := fb.accepted.Load(); got != 1 {
		t.Fatalf("%d connections for two sequential fetches, want 1 (pooled)", got)
	}
}

// A response for another request (wrong correlation id) fails the
// exchange and the connection is dropped, not reused: the next request
// dials afresh.
func TestCorrelationMismatchDropsConnection(t *testing.T) {
	var n atomic.Int32
	fb := startFakeBroker(t, func(c net.Conn, corr int32) bool {
		if n.Add(1) == 1 {
			corr++
		}
		c.Write(fetchResponse(corr, 0, 7))
		return true
	})
	cl := fb.client(t)
	_, err := cl.Fetch(context.Background(), 1, fetchReq())
	if err == nil || !strings.Contains(err.Error(), "correlation id") {
		t.Fatalf("err %v, want a correlation id mismatch", err)
	}
	if _, err := cl.Fetch(context.Background(), 1, fetchReq()); err != nil {
		t.Fatalf("fetch after the mismatch: %v", err)
	}
	if got := fb.accepted.Load(); got != 2 {
		t.Fatalf("%d connections, want 2 (the mismatched one dropped)", got)
	}
}

// A size prefix above the bound is refused before anything is allocated
// or read for it, so a broken or hostile peer cannot make us buffer it.
func TestOversizedResponseRefused(t *testing.T) {
	fb := startFakeBroker(t, func(c net.Conn, corr int32) bool {
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[:], maxFetchResponse+1)
		binary.BigEndian.PutUint32(hdr[4:], uint32(corr))
		c.Write(hdr[:]) // and no body: the client must not wait for one
		return false
	})
	cl := fb.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cl.Fetch(ctx, 1, fetchReq())
	if err == nil || !strings.Contains(err.Error(), "response size") {
		t.Fatalf("err %v, want the response size refused", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the client waited for the body of a refused response")
	}
	for _, size := range []uint32{0, 3, 1 << 31} {
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[:], size)
		binary.BigEndian.PutUint32(hdr[4:], 1)
		fb2 := startFakeBroker(t, func(c net.Conn, corr int32) bool {
			binary.BigEndian.PutUint32(hdr[4:], uint32(corr))
			c.Write(hdr[:])
			return false
		})
		if _, err := fb2.client(t).Fetch(ctx, 1, fetchReq()); err == nil || !strings.Contains(err.Error(), "response size") {
			t.Fatalf("size %d: err %v, want the response size refused", size, err)
		}
	}
}

// A peer that never answers holds the request only until the caller's
// context ends.
func TestSilentPeerBoundedByContext(t *testing.T) {
	fb := startFakeBroker(t, func(net.Conn, int32) bool { return false })
	cl := fb.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cl.Fetch(ctx, 1, fetchReq())
	if err == nil {
		t.Fatal("fetch from a silent peer succeeded")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("fetch returned after %v; the context ended after 300ms", d)
	}
}

// A broker missing from the image, or without a plaintext endpoint, is an
// error before any dial.
func TestUnknownBroker(t *testing.T) {
	fb := startFakeBroker(t, func(net.Conn, int32) bool { return false })
	if _, err := fb.client(t).Fetch(context.Background(), 9, fetchReq()); err == nil || !strings.Contains(err.Error(), "broker 9") {
		t.Fatalf("err %v, want broker 9 unknown", err)
	}
	if got := fb.accepted.Load(); got != 0 {
		t.Fatalf("%d connections to the wrong broker", got)
	}
}

// A fetch cancelled while the leader long-polls (the fetcher taking in a
// new partition) returns at once and drops its connection, whose answer
// would otherwise arrive for a later request: the next fetch dials a
// fresh one and succeeds.
func TestCancelledFetchDropsConnection(t *testing.T) {
	var n atomic.Int32
	fb := startFakeBroker(t, func(c net.Conn, corr int32) bool {
		if n.Add(1) == 1 {
			return false // the long poll: no answer
		}
		c.Write(fetchResponse(corr, 0, 5))
		return true
	})
	cl := fb.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Fetch(ctx, 1, fetchReq())
		errc <- err
	}()
	testwait.For(t, 10*time.Second, "the fetch to reach the server", func() bool { return n.Load() > 0 })
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("cancelled fetch succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled fetch did not return")
	}
	resp, err := cl.Fetch(context.Background(), 1, fetchReq())
	if err != nil || resp.Partitions[0].HighWatermark != 5 {
		t.Fatalf("fetch after the cancellation: %v %+v", err, resp)
	}
	if got := fb.accepted.Load(); got != 2 {
		t.Fatalf("%d connections, want 2 (the cancelled one dropped)", got)
	}
}

// Rounds made with one context reuse one connection, and its cancellation
// hook with it. Cancelling that context while the connection is pooled
// cuts it: the next call, under another context, gets a fresh connection
// and succeeds, with no error from the cut one.
func TestContextCancelledWhilePooled(t *testing.T) {
	fb := startAnsweringBroker(t, 7, nil)
	cl := fb.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 3; i++ {
		resp, err := cl.Fetch(ctx, 1, fetchReq())
		if err != nil {
			t.Fatal(err)
		}
		resp.Release()
	}
	if got := fb.accepted.Load(); got != 1 {
		t.Fatalf("%d connections for three rounds under one context, want 1", got)
	}
	cancel()
	resp, err := cl.Fetch(context.Background(), 1, fetchReq())
	if err != nil || resp.Partitions[0].HighWatermark != 7 {
		t.Fatalf("fetch after the pooled connection's context ended: %v %+v", err, resp)
	}
	resp.Release()
	if got := fb.accepted.Load(); got != 2 {
		t.Fatalf("%d connections, want 2 (the cut one replaced)", got)
	}
}

// A call under its own context (the marker writer's, the share-state
// client's) leaves no hook behind: cancelling that context after the call
// returned does not cut the pooled connection, which serves the next call.
func TestPerCallContextKeepsConnection(t *testing.T) {
	fb := startAnsweringBroker(t, 3, nil)
	cl := fb.client(t)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		_, err := cl.roundTrip(ctx, 1, replicaFormatter, req, maxFetchResponse, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := fb.accepted.Load(); got != 1 {
		t.Fatalf("%d connections for three calls, each under a context cancelled after it; want 1", got)
	}
}
