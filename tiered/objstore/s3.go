package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// S3Config configures the S3 client. Every field is documented with its
// default; DefaultS3Config fills them, Validate checks them.
type S3Config struct {
	// Endpoint is host:port of the S3 API, or an http:// or https:// URL
	// (the scheme then sets Secure). Required.
	Endpoint string
	// Bucket holds every object of this store. Required.
	Bucket string
	// Region is signed into requests; S3-compatible servers accept any.
	// Default "us-east-1" (also what avoids a GetBucketLocation call).
	Region string
	// AccessKey and SecretKey sign requests. When both are empty they are
	// read from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
	// AWS_SESSION_TOKEN into SessionToken) at NewS3.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// Secure selects TLS.
	Secure bool
	// CAFile is a PEM file of extra root certificates for TLS (a private
	// CA in front of an on-premises store). Empty: system roots only.
	CAFile string
	// VirtualHostStyle addresses the bucket as a host name
	// (bucket.endpoint); the default false uses path style
	// (endpoint/bucket), which every S3-compatible server supports.
	VirtualHostStyle bool
	// CreateBucket creates the bucket at NewS3 if it does not exist. Off:
	// NewS3 does no network I/O at all, so a broker starts while the
	// store is down.
	CreateBucket bool
	// PartSize is the multipart part size; objects larger than it are
	// uploaded in parts (segments are up to 1 GiB). Default 16 MiB;
	// S3's minimum is 5 MiB.
	PartSize int64
}

// S3 limits that Validate enforces.
const (
	minPartSize     = 5 << 20
	maxPartSize     = 5 << 30
	defaultPartSize = 16 << 20
)

// DefaultS3Config returns a config with every default filled in; the
// caller sets Endpoint, Bucket and (or the environment provides)
// credentials.
func DefaultS3Config() S3Config {
	return S3Config{Region: "us-east-1", PartSize: defaultPartSize}
}

// Validate checks the config; it does not contact the store.
func (c S3Config) Validate() error {
	if c.Endpoint == "" {
		return errors.New("objstore: S3 endpoint is empty")
	}
	if c.Bucket == "" {
		return errors.New("objstore: S3 bucket is empty")
	}
	if err := s3utils.CheckValidBucketName(c.Bucket); err != nil {
		return fmt.Errorf("objstore: S3 bucket %q: %w", c.Bucket, err)
	}
	if c.PartSize < minPartSize || c.PartSize > maxPartSize {
		return fmt.Errorf("objstore: S3 part size %d outside [%d, %d]", c.PartSize, minPartSize, maxPartSize)
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("objstore: S3 access key and secret key must be set together")
	}
	if c.Endpoint != "" && strings.Contains(c.Endpoint, "://") {
		u, err := url.Parse(c.Endpoint)
		if err != nil {
			return fmt.Errorf("objstore: S3 endpoint: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("objstore: S3 endpoint scheme %q, want http or https", u.Scheme)
		}
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("objstore: S3 endpoint %q has a path; give host:port", c.Endpoint)
		}
	}
	return nil
}

// s3Store is the Store over an S3-compatible API.
//
// It never retries (minio-go's own retries are off): the uploader owns
// retry and backoff, and a store that retried inside would hide an
// outage behind long calls. Per-call deadlines come from ctx.
type s3Store struct {
	cl       *minio.Client
	core     minio.Core
	bucket   string
	partSize int64
}

// NewS3 returns a Store over the bucket of an S3-compatible service. It
// contacts the store only when cfg.CreateBucket is set. Zero fields of
// cfg take their defaults from DefaultS3Config.
func NewS3(ctx context.Context, cfg S3Config) (Store, error) {
	def := DefaultS3Config()
	if cfg.Region == "" {
		cfg.Region = def.Region
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = def.PartSize
	}
	if cfg.AccessKey == "" && cfg.SecretKey == "" {
		cfg.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
		cfg.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
		if cfg.SessionToken == "" {
			cfg.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host := cfg.Endpoint
	if strings.Contains(host, "://") {
		u, _ := url.Parse(host) // Validate parsed it
		cfg.Secure = u.Scheme == "https"
		host = u.Host
	}
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 transport: %w", err)
	}
	if cfg.Secure && cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("objstore: S3 CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("objstore: S3 CA file %s: no PEM certificates", cfg.CAFile)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	lookup := minio.BucketLookupPath
	if cfg.VirtualHostStyle {
		lookup = minio.BucketLookupDNS
	}
	cl, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       cfg.Secure,
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   1, // one attempt: see s3Store
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 client for %s: %w", host, err)
	}
	s := &s3Store{cl: cl, core: minio.Core{Client: cl}, bucket: cfg.Bucket, partSize: cfg.PartSize}
	if cfg.CreateBucket {
		if err := s.createBucket(ctx, cfg.Region); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *s3Store) createBucket(ctx context.Context, region string) error {
	ok, err := s.cl.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.mapErr("create bucket", "", err)
	}
	if ok {
		return nil
	}
	err = s.cl.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if code := errCode(err); code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
		return nil // created concurrently, by another broker
	}
	return s.mapErr("create bucket", "", err)
}

// exactReader passes through exactly n bytes and records whether the
// source ended early, so Put can tell the caller's short reader from a
// network failure.
type exactReader struct {
	r     io.Reader
	left  int64
	short bool
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		e.short = true
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if size < 0 {
		return fmt.Errorf("objstore: put %s: negative size %d", key, size)
	}
	er := &exactReader{r: r, left: size}
	// Multipart uploads buffer one part (PartSize) at a time: minio-go
	// reads parts by offset only without Content-MD5, and the MD5 is
	// worth more than the copy.
	info, err := s.cl.PutObject(ctx, s.bucket, key, er, size, minio.PutObjectOptions{
		// Content-MD5 on the object (or on every part) makes the server
		// reject bytes damaged on the way (BadDigest -> ErrCorrupt).
		SendContentMd5: true,
		PartSize:       uint64(s.partSize),
		ContentType:    "application/octet-stream",
		// Unsigned payload: the signed Content-MD5 header already guards
		// the bytes, SHA-256 over every segment would cost CPU for
		// nothing, and minio-go's streaming signature (aws-chunked) sends
		// an empty body without Content-Length (S3 answers 411) and is not
		// decoded on UploadPart by every S3-compatible server.
		DisableContentSha256: true,
	})
	if er.short {
		return fmt.Errorf("objstore: put %s: reader ended before %d bytes: %w", key, size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return s.mapErr("put", key, err)
	}
	if info.Size != size {
		return fmt.Errorf("%w: put %s: store acknowledged %d bytes of %d", ErrCorrupt, key, info.Size, size)
	}
	return nil
}

func (s *s3Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("objstore: get %s: negative offset %d", key, off)
	}
	if n == 0 {
		// S3 cannot express an empty range; still report a missing key.
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	opts := minio.GetObjectOptions{}
	whole := off == 0 && n < 0
	if !whole {
		end := int64(0) // SetRange(off, 0) means "from off to the end"
		if n > 0 {
			end = off + n - 1
		}
		if err := opts.SetRange(off, end); err != nil {
			return nil, fmt.Errorf("objstore: get %s: %w", key, err)
		}
	}
	body, info, hdr, err := s.core.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		if errCode(err) == "InvalidRange" {
			return nil, fmt.Errorf("%w: get %s: range at %d past the object's end", ErrCorrupt, key, off)
		}
		return nil, s.mapErr("get", key, err)
	}
	// The body's length must be exactly what was asked: a shorter answer
	// means the object is shorter than the metadata that pointed here.
	want := n
	if n < 0 {
		total := info.Size // whole object: Content-Length
		if !whole {
			t, ok := rangeTotal(hdr.Get("Content-Range"))
			if !ok {
				body.Close()
				return nil, fmt.Errorf("%w: get %s: bad Content-Range %q", ErrUnavailable, key, hdr.Get("Content-Range"))
			}
			total = t
		}
		want = total - off
	}
	if info.Size != want {
		body.Close()
		return nil, fmt.Errorf("%w: get %s: asked %d bytes at %d, store has %d", ErrCorrupt, key, want, off, info.Size)
	}
	return &checkedBody{rc: body, key: key, left: want}, nil
}

// rangeTotal parses the total size out of "bytes a-b/total".
func rangeTotal(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 {
		return 0, false
	}
	t, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return t, err == nil && t >= 0
}

// checkedBody maps errors while the body streams: a connection lost
// mid-body is ErrUnavailable (the bytes so far are good, the rest did
// not arrive), and the body may not end before the promised length.
type checkedBody struct {
	rc   io.ReadCloser
	key  string
	left int64
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF && b.left == 0:
		return n, io.EOF
	case errors.Is(err, context.Canceled):
		return n, fmt.Errorf("objstore: get %s: %w", b.key, err)
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("%w: get %s: body ended %d bytes early", ErrUnavailable, b.key, b.left)
	default:
		return n, fmt.Errorf("%w: get %s: %w", ErrUnavailable, b.key, err)
	}
}

func (b *checkedBody) Close() error { return b.rc.Close() }

func (s *s3Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	info, err := s.cl.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s.mapErr("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: info.Size}, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	err := s.cl.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && errCode(err) == "NoSuchKey" {
		return nil // S3 itself answers 204; some compatible servers 404
	}
	return s.mapErr("delete", key, err)
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine on an early return
	var out []ObjectInfo
	for o := range s.cl.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.mapErr("list", prefix, o.Err)
		}
		out = append(out, ObjectInfo{Key: o.Key, Size: o.Size})
	}
	if err := ctx.Err(); err != nil {
		// minio-go closes the channel on cancellation without an error.
		return nil, s.mapErr("list", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// mapErr maps a client error to the package's errors. Messages name the
// operation, bucket and key, never credentials (minio-go's errors carry
// none either).
func (s *s3Store) mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("%s s3://%s/%s", op, s.bucket, key)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("objstore: %s: %w", what, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	var resp minio.ErrorResponse
	errors.As(err, &resp)
	switch resp.Code {
	case "NoSuchKey":
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	case "BadDigest", "InvalidDigest", "IncompleteBody", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch", "InvalidRange":
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, what, resp.Code)
	case "NoSuchBucket":
		// Configuration, not an outage: retrying will not create it.
		return fmt.Errorf("objstore: %s: bucket %q does not exist", what, s.bucket)
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "RequestTimeTooSkewed":
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, what, resp.Code)
	}
	if resp.StatusCode == http.StatusNotFound && op != "list" {
		return fmt.Errorf("%w: %s", ErrNotFound, what) // HEAD answers carry no code
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return fmt.Errorf("%w: %s: HTTP %d %s", ErrUnavailable, what, resp.StatusCode, resp.Code)
	}
	if resp.StatusCode != 0 {
		return fmt.Errorf("objstore: %s: HTTP %d %s: %s", what, resp.StatusCode, resp.Code, resp.Message)
	}
	// No HTTP answer at all: the transport failed.
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	return fmt.Errorf("objstore: %s: %w", what, err)
}

// errCode is the S3 error code in err's chain, or "".
func errCode(err error) string {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp.Code
	}
	return ""
}
