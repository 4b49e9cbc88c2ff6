package s3test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
)

func do(t *testing.T, method, url string, body []byte) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func TestStopRefusesRestartKeeps(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.Endpoint(), "127.0.0.1:") || s.Bucket() != DefaultBucket {
		t.Fatalf("endpoint %s bucket %s", s.Endpoint(), s.Bucket())
	}
	obj := s.URL() + "/" + s.Bucket() + "/dir/key"
	if code, _, err := do(t, "PUT", obj, []byte("payload")); err != nil || code != 200 {
		t.Fatalf("put: %d %v", code, err)
	}
	// A live keep-alive connection, open across Stop.
	live, err := net.Dial("tcp", s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	addr := s.Endpoint()
	s.Stop()
	s.Stop() // idempotent
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("dial succeeded while stopped")
	}
	live.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := live.Read(make([]byte, 1)); err == nil {
		t.Fatal("live connection still open after Stop")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Endpoint() != addr {
		t.Fatalf("restarted on %s, was %s", s.Endpoint(), addr)
	}
	code, body, err := do(t, "GET", obj, nil)
	if err != nil || code != 200 || string(body) != "payload" {
		t.Fatalf("after restart: %d %q %v", code, body, err)
	}
	// A new server over the same directory (what a restarted cmd/s3test
	// process is) sees the same objects.
	s.Stop()
	s2 := Start(t, WithDir(s.Dir()), WithAddr(addr))
	code, body, err = do(t, "GET", s2.URL()+"/"+s2.Bucket()+"/dir/key", nil)
	if err != nil || code != 200 || string(body) != "payload" {
		t.Fatalf("new server on the same dir: %d %q %v", code, body, err)
	}
}

func TestRangeAndErrors(t *testing.T) {
	s := Start(t, WithBucket("other"))
	obj := s.URL() + "/other/k"
	if code, _, err := do(t, "PUT", obj, []byte("0123456789")); err != nil || code != 200 {
		t.Fatalf("put: %d %v", code, err)
	}
	req, _ := http.NewRequest("GET", obj, nil)
	req.Header.Set("Range", "bytes=3-5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(b) != "345" || resp.Header.Get("Content-Range") != "bytes 3-5/10" {
		t.Fatalf("range: %d %q %q", resp.StatusCode, b, resp.Header.Get("Content-Range"))
	}
	req.Header.Set("Range", "bytes=10-")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("range past the end: %d", resp.StatusCode)
	}
	code, body, _ := do(t, "GET", s.URL()+"/other/missing", nil)
	if code != 404 || !bytes.Contains(body, []byte("NoSuchKey")) {
		t.Fatalf("missing key: %d %s", code, body)
	}
	// Content-MD5 mismatch: rejected, the old object kept.
	req, _ = http.NewRequest("PUT", obj, strings.NewReader("tampered!!"))
	req.Header.Set("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==") // MD5 of ""
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !bytes.Contains(b, []byte("BadDigest")) {
		t.Fatalf("bad digest: %d %s", resp.StatusCode, b)
	}
	if _, body, _ := do(t, "GET", obj, nil); string(body) != "0123456789" {
		t.Fatalf("after a rejected put: %q", body)
	}
}

func TestDirBackendList(t *testing.T) {
	be, err := newDirBackend(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := be.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a/1", "a/2", "a/3", "b/x y%z", "b/ünï", "c"}
	for _, k := range keys {
		if _, err := be.PutObject("b", k, nil, strings.NewReader(k), int64(len(k)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Paginate two at a time; every key exactly once, in order.
	var got []string
	page := gofakes3.ListBucketPage{MaxKeys: 2}
	for i := 0; i < 10; i++ {
		l, err := be.ListBucket("b", nil, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Contents {
			got = append(got, c.Key)
			if c.Size != int64(len(c.Key)) {
				t.Fatalf("%s: size %d", c.Key, c.Size)
			}
		}
		if !l.IsTruncated {
			break
		}
		page = gofakes3.ListBucketPage{MaxKeys: 2, Marker: l.NextMarker, HasMarker: true}
	}
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("listed %q, want %q", got, keys)
	}
	// Delimiter: common prefixes.
	pfx := gofakes3.NewFolderPrefix("")
	l, err := be.ListBucket("b", &pfx, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.CommonPrefixes) != 2 || len(l.Contents) != 1 || l.Contents[0].Key != "c" {
		t.Fatalf("folder listing: %+v %+v", l.CommonPrefixes, l.Contents)
	}
	// A damaged object file is an error, not a panic or a wild allocation.
	if err := os.WriteFile(be.objPath("b", "c"), []byte{0xff, 0xff, 0xff, 0xff, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := be.GetObject("b", "c", nil); err == nil {
		t.Fatal("damaged object: no error")
	}
	if err := os.WriteFile(be.objPath("b", "c"), []byte{1}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := be.HeadObject("b", "c"); err == nil {
		t.Fatal("truncated object file: no error")
	}
	if _, err := be.ListBucket("b", nil, gofakes3.ListBucketPage{}); err == nil {
		t.Fatal("listing over a damaged object file: no error")
	}
	if _, err := be.PutObject("b", "c", nil, strings.NewReader("c"), 1, nil); err != nil {
		t.Fatal(err)
	}
	// Temp files of Puts in flight are not objects.
	if err := os.WriteFile(filepath.Join(be.bucketDir("b"), ".put-123"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := be.ListBucket("b", nil, gofakes3.ListBucketPage{}); err != nil || len(l.Contents) != len(keys) {
		t.Fatalf("listing with a temp file present: %v", err)
	}
}

// TestServeReady exercises the entry point cmd/s3test (and a future
// `ringlog dev s3`) runs.
func TestServeReady(t *testing.T) {
	ctx, cancel := contextWithCancel()
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		done <- Serve(ctx, Config{Dir: t.TempDir()}, func(s *Server) { ready <- s.Endpoint() })
	}()
	var addr string
	select {
	case addr = <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "HEAD /ringlog HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if !strings.Contains(line, "200") {
		t.Fatalf("HEAD bucket: %q", line)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("still listening after ctx done")
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without Dir: no error")
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func TestDirBackendMultipart(t *testing.T) {
	be, err := newDirBackend(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := be.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	id, err := be.CreateMultipartUpload("b", "k", map[string]string{"X-Amz-Meta-A": "1"})
	if err != nil {
		t.Fatal(err)
	}
	p1 := bytes.Repeat([]byte{1}, minPart)
	p2 := []byte("tail")
	e1, err := be.UploadPart("b", "k", id, 1, int64(len(p1)), bytes.NewReader(p1))
	if err != nil {
		t.Fatal(err)
	}
	// Part 2 sent twice: the second replaces the first.
	if _, err := be.UploadPart("b", "k", id, 2, 3, strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	e2, err := be.UploadPart("b", "k", id, 2, int64(len(p2)), bytes.NewReader(p2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.UploadPart("b", "k", id, 3, 10, strings.NewReader("short")); err == nil {
		t.Fatal("part shorter than its Content-Length: no error")
	}
	lp, err := be.ListParts("b", "k", id, 0, 1000)
	if err != nil || len(lp.Parts) != 2 || lp.Parts[1].Size != 4 {
		t.Fatalf("list parts: %+v, %v", lp, err)
	}
	lu, err := be.ListMultipartUploads("b", nil, gofakes3.Prefix{}, 1000)
	if err != nil || len(lu.Uploads) != 1 || lu.Uploads[0].UploadID != id {
		t.Fatalf("list uploads: %+v, %v", lu, err)
	}
	bad := []gofakes3.CompletedPart{{PartNumber: 2, ETag: e2}, {PartNumber: 1, ETag: e1}}
	if _, _, err := be.CompleteMultipartUpload("b", "k", id, &gofakes3.CompleteMultipartUploadRequest{Parts: bad}); err == nil {
		t.Fatal("parts out of order: no error")
	}
	bad = []gofakes3.CompletedPart{{PartNumber: 1, ETag: e2}, {PartNumber: 2, ETag: e2}}
	if _, _, err := be.CompleteMultipartUpload("b", "k", id, &gofakes3.CompleteMultipartUploadRequest{Parts: bad}); err == nil {
		t.Fatal("wrong ETag: no error")
	}
	// A wrong bucket or key, or an id that is not ours, is NoSuchUpload.
	for _, c := range []struct {
		bucket, key string
		id          gofakes3.UploadID
	}{{"b", "other", id}, {"c", "k", id}, {"b", "k", "../../etc"}, {"b", "k", gofakes3.UploadID(strings.Repeat("0", 32))}} {
		if _, err := be.UploadPart(c.bucket, c.key, c.id, 1, 1, strings.NewReader("x")); !gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchUpload) {
			t.Fatalf("%+v: %v, want NoSuchUpload", c, err)
		}
	}
	good := []gofakes3.CompletedPart{{PartNumber: 1, ETag: e1}, {PartNumber: 2, ETag: e2}}
	_, etag, err := be.CompleteMultipartUpload("b", "k", id, &gofakes3.CompleteMultipartUploadRequest{Parts: good})
	if err != nil || !strings.HasSuffix(etag, `-2"`) {
		t.Fatalf("complete: %q, %v", etag, err)
	}
	obj, err := be.GetObject("b", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if !bytes.Equal(got, append(p1, p2...)) || obj.Metadata["X-Amz-Meta-A"] != "1" {
		t.Fatalf("completed object: %d bytes, meta %v", len(got), obj.Metadata)
	}
	if _, err := be.ListParts("b", "k", id, 0, 1000); err == nil {
		t.Fatal("upload still there after completion")
	}

	// A small part before the last is refused, as S3 does; abort removes.
	id, _ = be.CreateMultipartUpload("b", "k2", nil)
	e1, _ = be.UploadPart("b", "k2", id, 1, 1, strings.NewReader("a"))
	e2, _ = be.UploadPart("b", "k2", id, 2, 1, strings.NewReader("b"))
	small := []gofakes3.CompletedPart{{PartNumber: 1, ETag: e1}, {PartNumber: 2, ETag: e2}}
	if _, _, err := be.CompleteMultipartUpload("b", "k2", id, &gofakes3.CompleteMultipartUploadRequest{Parts: small}); err == nil {
		t.Fatal("1-byte first part: no error")
	}
	if err := be.AbortMultipartUpload("b", "k2", id); err != nil {
		t.Fatal(err)
	}
	if _, err := be.HeadObject("b", "k2"); !gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
		t.Fatalf("aborted upload made an object: %v", err)
	}
	if bs, _ := be.ListBuckets(); len(bs) != 1 || bs[0].Name != "b" {
		t.Fatalf("buckets: %+v", bs)
	}
}

func TestReadyLine(t *testing.T) {
	s := Start(t, WithDir(filepath.Join(t.TempDir(), "with space")))
	r, ok := ParseReady(FormatReady(s) + "\n")
	if !ok || r.Endpoint != s.Endpoint() || r.Bucket != s.Bucket() || r.AccessKey != AccessKey || r.SecretKey != SecretKey || r.Dir != s.Dir() {
		t.Fatalf("round trip: %+v %v", r, ok)
	}
	for _, l := range []string{"", "listening", "s3test bucket=b"} {
		if _, ok := ParseReady(l); ok {
			t.Fatalf("%q parsed as ready", l)
		}
	}
}
