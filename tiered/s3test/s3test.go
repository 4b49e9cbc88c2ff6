// Package s3test runs an S3-compatible server on loopback for tests: the
// object-store client's tests, the uploader's, and the 3-broker
// integration test (which runs it as its own process, cmd/s3test, so that
// kill -9 of a broker does not touch it).
//
// # Which server, and why
//
// The server is gofakes3 (github.com/johannesboyne/gofakes3, pure Go,
// in-process) over a small on-disk backend of our own (dirbackend.go).
// The alternative was SeaweedFS's weed: its module is a 64 MB download
// (146 MB unpacked, 3,361 Go files, ~490 requirements in go.mod), so
// building weed on the 2-core CI machine costs many minutes per cold
// cache, and it runs as several cooperating servers (master, volume,
// filer, S3 gateway) that a test must start, wait for and tear down.
// gofakes3 adds one small module to go.mod, starts in milliseconds in the
// test process, and covers what the remote tier uses: range GETs
// (206/Content-Range, 416 InvalidRange), HEAD, ListObjectsV2 with
// prefixes and pagination, DeleteObject(s), multipart uploads, Content-MD5
// verification on PutObject and UploadPart (BadDigest), and S3's XML
// error codes (NoSuchKey, NoSuchBucket). Where it is less faithful than
// S3: it does not check request signatures (any credentials work), it
// holds the parts of a multipart upload in memory until completion (so
// memory grows with the segments being uploaded at once), and it has no
// server-side throttling (503 SlowDown); the fault wrapper in objstore
// covers the failure cases the server cannot produce.
//
// Objects are files under a data directory (t.TempDir() by default), so
// Stop/Restart, and a restart of the cmd/s3test process on the same
// directory, keep every object.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// Credentials the server hands out. gofakes3 does not verify signatures;
// clients still sign, so they need some.
const (
	AccessKey = "ringlog-test"
	SecretKey = "ringlog-test-secret"
	// DefaultBucket is created at start unless Config.Bucket names another.
	DefaultBucket = "ringlog"
)

// Config configures a server.
type Config struct {
	// Addr to listen on; default "127.0.0.1:0" (a random loopback port).
	Addr string
	// Dir holds the objects; required (Start defaults it to t.TempDir()).
	Dir string
	// Bucket is created at start if missing; default DefaultBucket.
	Bucket string
}

// Option changes the Config that Start uses.
type Option func(*Config)

// WithDir keeps the objects in dir (for example to reuse them across
// servers); the default is a fresh t.TempDir().
func WithDir(dir string) Option { return func(c *Config) { c.Dir = dir } }

// WithBucket names the bucket created at start.
func WithBucket(name string) Option { return func(c *Config) { c.Bucket = name } }

// WithAddr listens on addr instead of a random loopback port.
func WithAddr(addr string) Option { return func(c *Config) { c.Addr = addr } }

// Server is a running (or stopped) S3-compatible server. Its methods are
// safe for concurrent use.
type Server struct {
	cfg     Config
	handler http.Handler

	reqs, parts atomic.Int64

	mu   sync.Mutex
	addr string       // fixed after the first listen, so Restart reuses it
	srv  *http.Server // nil while stopped
	done chan struct{}
}

// TB is the part of testing.TB that Start uses; a *testing.T or
// *testing.B is one. Not importing package testing keeps it out of a
// binary that embeds the server (a `ringlog dev s3` subcommand).
type TB interface {
	Helper()
	TempDir() string
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Start starts a server for the test and stops it at cleanup. It fails
// the test if the server cannot start.
func Start(t TB, opts ...Option) *Server {
	t.Helper()
	cfg := Config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// New starts a server outside a test: cmd/s3test, and what a
// `ringlog dev s3` subcommand would call. Stop it with Stop.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Dir == "" {
		return nil, errors.New("s3test: Config.Dir is required")
	}
	be, err := newDirBackend(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("s3test: data dir: %w", err)
	}
	if ok, err := be.BucketExists(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("s3test: data dir: %w", err)
	} else if !ok {
		if err := be.CreateBucket(cfg.Bucket); err != nil {
			return nil, fmt.Errorf("s3test: create bucket %q: %w", cfg.Bucket, err)
		}
	}
	fake := gofakes3.New(be, gofakes3.WithIntegrityCheck(true), gofakes3.WithoutVersioning())
	s := &Server{cfg: cfg, addr: cfg.Addr}
	inner := fake.Server()
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reqs.Add(1)
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			s.parts.Add(1)
			// gofakes3 decodes aws-chunked bodies on PutObject only; on
			// UploadPart it would store the chunk framing as data. Refuse
			// instead of corrupting silently.
			if strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
				w.WriteHeader(http.StatusNotImplemented)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>s3test: aws-chunked UploadPart bodies are not supported</Message></Error>`)
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	if err := s.listen(); err != nil {
		return nil, err
	}
	return s, nil
}

// listen binds s.addr and serves on it. Lock must not be held.
func (s *Server) listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("s3test: listen %s: %w", s.addr, err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// gofakes3 writes a second header on some errors; net/http's
		// complaint about it is noise in test logs.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns ErrServerClosed on Stop
	}()
	s.srv, s.done = srv, done
	return nil
}

// Endpoint is the server's host:port (what objstore.S3Config.Endpoint
// takes); it stays the same across Stop/Restart.
func (s *Server) Endpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL is the endpoint as an http URL, for clients that want one.
func (s *Server) URL() string { return "http://" + s.Endpoint() }

// Bucket is the bucket created at start.
func (s *Server) Bucket() string { return s.cfg.Bucket }

// Dir is the data directory.
func (s *Server) Dir() string { return s.cfg.Dir }

// Credentials returns an access key and secret key clients can sign with.
func (s *Server) Credentials() (accessKey, secretKey string) { return AccessKey, SecretKey }

// Stop closes the listener and every live connection, so clients get
// connection refused (new calls) or a reset (calls in flight), as when
// an object store goes away. It waits for the serve loop to exit; it is
// a no-op on a stopped server. Objects stay on disk.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv, s.done = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-done
}

// Restart serves again on the same address with the same objects; it is
// a no-op on a running server. Binding can fail if another process took
// the port meanwhile.
func (s *Server) Restart() error { return s.listen() }

// Stats counts the requests the server received.
type Stats struct {
	Requests int64
	// PartUploads counts UploadPart requests (multipart uploads).
	PartUploads int64
}

// Stats returns the request counts since start.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.reqs.Load(), PartUploads: s.parts.Load()}
}

// Running reports whether the server is serving.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv != nil
}

// Serve runs a server until ctx is done: the body of cmd/s3test and of a
// future `ringlog dev s3`. ready is called once with the running server
// (to print its endpoint).
func Serve(ctx context.Context, cfg Config, ready func(*Server)) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(s)
	}
	<-ctx.Done()
	s.Stop()
	return nil
}
