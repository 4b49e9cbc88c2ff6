package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/s3test"
)

func TestS3Multipart(t *testing.T) {
	st, srv := newS3(t, func(c *objstore.S3Config) { c.PartSize = 5 << 20 })
	ctx := ctxT(t)
	data := randBytes(7, 20<<20+12345) // 5 parts, the last one short
	put(t, st, "big/seg.log", data)
	if p := srv.Stats().PartUploads; p != 5 {
		t.Fatalf("%d part uploads, want 5", p)
	}
	fi, err := st.Stat(ctx, "big/seg.log")
	if err != nil || fi.Size != int64(len(data)) {
		t.Fatalf("stat: %+v, %v", fi, err)
	}
	got, err := getRange(st, ctx, "big/seg.log", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("whole object: %d bytes, %v", len(got), err)
	}
	// A range across a part boundary.
	got, err = getRange(st, ctx, "big/seg.log", 5<<20-100, 200)
	if err != nil || !bytes.Equal(got, data[5<<20-100:5<<20+100]) {
		t.Fatalf("range across parts: %v", err)
	}
}

// TestS3StopRestart is the outage the integration test drives: calls fail
// with ErrUnavailable within their ctx timeout while the store is down,
// and work again, data intact, once it is back on the same address.
func TestS3StopRestart(t *testing.T) {
	st, srv := newS3(t)
	put(t, st, "k", []byte("kept across the outage"))
	srv.Stop()
	if srv.Running() {
		t.Fatal("running after Stop")
	}
	for name, op := range map[string]func(ctx context.Context) error{
		"get":    func(ctx context.Context) error { _, err := getRange(st, ctx, "k", 0, -1); return err },
		"put":    func(ctx context.Context) error { return st.Put(ctx, "k2", strings.NewReader("x"), 1) },
		"stat":   func(ctx context.Context) error { _, err := st.Stat(ctx, "k"); return err },
		"list":   func(ctx context.Context) error { _, err := st.List(ctx, ""); return err },
		"delete": func(ctx context.Context) error { return st.Delete(ctx, "k") },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		err := op(ctx)
		cancel()
		if !errors.Is(err, objstore.ErrUnavailable) {
			t.Fatalf("%s while stopped: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s took %v while stopped, ctx allowed 2s", name, d)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	got, err := getRange(st, ctxT(t), "k", 0, -1)
	if err != nil || string(got) != "kept across the outage" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	put(t, st, "k2", []byte("new"))
}

// TestS3StopMidBody: a server that goes away while a body streams gives
// ErrUnavailable from Read, not a silently short object.
func TestS3StopMidBody(t *testing.T) {
	st, srv := newS3(t)
	data := randBytes(3, 8<<20)
	put(t, st, "k", data)
	rc, err := st.GetRange(ctxT(t), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err = io.Copy(io.Discard, rc)
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("read after stop: %v, want ErrUnavailable", err)
	}
}

// corruptingProxy flips one payload byte of every PUT body on its way
// to the server, as a bad NIC or proxy would.
func corruptingProxy(t *testing.T, target string) string {
	t.Helper()
	u, _ := url.Parse("http://" + target)
	rp := httputil.NewSingleHostReverseProxy(u)
	var flipped atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			// The payload is all 'A'; chunk framing is not, so this hits
			// data bytes under either signing mode.
			if i := bytes.Index(body, bytes.Repeat([]byte("A"), 64)); i >= 0 {
				body[i+32] = 'B'
				flipped.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		rp.ServeHTTP(w, r)
	})
	ps := httptest.NewServer(h)
	t.Cleanup(ps.Close)
	t.Cleanup(func() {
		if flipped.Load() == 0 {
			t.Error("proxy corrupted nothing")
		}
	})
	return strings.TrimPrefix(ps.URL, "http://")
}

func TestS3CorruptUploadRejected(t *testing.T) {
	srv := s3test.Start(t)
	ak, sk := srv.Credentials()
	for _, size := range []int{100_000, 6 << 20} { // single PUT; multipart
		st, err := objstore.NewS3(context.Background(), objstore.S3Config{
			Endpoint: corruptingProxy(t, srv.Endpoint()), Bucket: srv.Bucket(), AccessKey: ak, SecretKey: sk, PartSize: 5 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("A"), size)
		err = st.Put(ctxT(t), "corrupt", bytes.NewReader(data), int64(len(data)))
		if !errors.Is(err, objstore.ErrCorrupt) {
			t.Fatalf("size %d: put through a corrupting proxy: %v, want ErrCorrupt", size, err)
		}
		if _, err := st.Stat(ctxT(t), "corrupt"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("size %d: rejected upload left an object: %v", size, err)
		}
	}
}

// TestS3ErrorMapping drives the client against canned answers for the
// cases the test server cannot produce.
func TestS3ErrorMapping(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"slowdown", 503, `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`, objstore.ErrUnavailable},
		{"internal", 500, `<Error><Code>InternalError</Code><Message>oops</Message></Error>`, objstore.ErrUnavailable},
		{"bare 502", 502, ``, objstore.ErrUnavailable},
		{"nosuchkey", 404, `<Error><Code>NoSuchKey</Code><Message>no</Message></Error>`, objstore.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}))
			defer hs.Close()
			st, err := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: hs.URL, Bucket: "bkt", AccessKey: "AKID", SecretKey: "very-secret-key"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.GetRange(ctxT(t), "k", 0, 10)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if strings.Contains(err.Error(), "very-secret-key") {
				t.Fatalf("credentials in error: %v", err)
			}
			// The uploader owns retries: the store makes one attempt.
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d requests, want 1 (no retries inside the Store)", n)
			}
		})
	}
	// Access denied is neither: retrying will not help, and it must not
	// look like an outage.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(403)
		io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
	}))
	defer hs.Close()
	st, _ := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: hs.URL, Bucket: "bkt", AccessKey: "a", SecretKey: "s"})
	err := st.Delete(ctxT(t), "k")
	if err == nil || errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("access denied: %v", err)
	}
}

// A store that answers a range with fewer bytes than asked (the object
// is shorter than the metadata says) is ErrCorrupt.
func TestS3ShortRangeIsCorrupt(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", `"5d41402abc4b2a76b9719d911017c592"`)
		w.Header().Set("Content-Range", "bytes 0-4/5")
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, "hello")
	}))
	defer hs.Close()
	st, _ := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: hs.URL, Bucket: "bkt", AccessKey: "a", SecretKey: "s"})
	if _, err := st.GetRange(ctxT(t), "k", 0, 10); !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatalf("short range: %v, want ErrCorrupt", err)
	}
}

func TestS3Config(t *testing.T) {
	for _, c := range []objstore.S3Config{
		{Bucket: "bkt"},
		{Endpoint: "h:1"},
		{Endpoint: "h:1", Bucket: "bkt", PartSize: 1 << 20},
		{Endpoint: "ftp://h:1", Bucket: "bkt"},
		{Endpoint: "http://h:1/path", Bucket: "bkt"},
		{Endpoint: "h:1", Bucket: "bkt", AccessKey: "a"},
	} {
		if _, err := objstore.NewS3(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: "https://h:1", Bucket: "bkt", CAFile: "/nonexistent"}); err == nil {
		t.Error("missing CA file: no error")
	}
	// Credentials from the environment; NewS3 does no I/O without
	// CreateBucket, so an unreachable endpoint is fine here.
	t.Setenv("AWS_ACCESS_KEY_ID", "env-id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	if _, err := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: "127.0.0.1:1", Bucket: "bkt"}); err != nil {
		t.Fatal(err)
	}
}

func TestS3CreateBucket(t *testing.T) {
	srv := s3test.Start(t)
	ak, sk := srv.Credentials()
	cfg := objstore.S3Config{Endpoint: srv.URL(), Bucket: "fresh", AccessKey: ak, SecretKey: sk}
	st, err := objstore.NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctxT(t), "k", strings.NewReader("v"), 1); err == nil || errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("put to a missing bucket: %v, want a configuration error", err)
	}
	cfg.CreateBucket = true
	for i := 0; i < 2; i++ { // the second finds it existing
		if st, err = objstore.NewS3(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	put(t, st, "k", []byte("v"))
	if _, err := os.Stat(srv.Dir()); err != nil {
		t.Fatal(err)
	}
}

// TestS3ListPaginates: more keys than one ListObjectsV2 page (1000).
func TestS3ListPaginates(t *testing.T) {
	st, _ := newS3(t)
	ctx := ctxT(t)
	const n = 1003
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("p/%05d", n-1-i) // put out of order
		if err := st.Put(ctx, key, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	put(t, st, "q/other", []byte("y"))
	list, err := st.List(ctx, "p/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("listed %d, want %d", len(list), n)
	}
	for i, o := range list {
		if want := fmt.Sprintf("p/%05d", i); o.Key != want || o.Size != 1 {
			t.Fatalf("list[%d] = %+v, want %s", i, o, want)
		}
	}
}

// TestS3HungServer: a store that accepts connections and never answers
// (a stopped process, a black-holed route) fails each call at its ctx
// deadline with ErrUnavailable.
func TestS3HungServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // read nothing, answer nothing
		}
	}()
	defer func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	}()
	st, err := objstore.NewS3(context.Background(), objstore.S3Config{Endpoint: ln.Addr().String(), Bucket: "bkt", AccessKey: "a", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func(ctx context.Context) error{
		"get": func(ctx context.Context) error { _, err := st.GetRange(ctx, "k", 0, 10); return err },
		"put": func(ctx context.Context) error { return st.Put(ctx, "k", strings.NewReader("x"), 1) },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := op(ctx)
		cancel()
		if !errors.Is(err, objstore.ErrUnavailable) {
			t.Fatalf("%s: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s took %v, ctx allowed 200ms", name, d)
		}
	}
}
