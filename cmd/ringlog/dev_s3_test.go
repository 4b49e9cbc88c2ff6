package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/s3test"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestServeObjectStoreFlags: the tiered storage flags reach
// broker.Config.Tiered, the secret key also from AWS_SECRET_ACCESS_KEY,
// and without an endpoint tiered storage stays off.
func TestServeObjectStoreFlags(t *testing.T) {
	unsetServeEnv(t)
	args := []string{"serve", "--data-dir", "/tmp/d",
		"--object-store-endpoint", "s3.example:9000", "--object-store-bucket", "logs", "--object-store-region", "eu-west-1",
		"--object-store-access-key", "AK", "--object-store-tls", "--object-store-ca-file", "/etc/ca.pem",
		"--object-store-create-bucket", "--remote-cache-dir", "/cache", "--remote-cache-bytes", "67108864",
		"--remote-upload-interval", "250ms", "--remote-upload-concurrency", "5"}
	cfg, err := parseServeArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "set together") {
		t.Fatalf("access key without a secret key: %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SK")
	if cfg, err = parseServeArgs(args); err != nil {
		t.Fatal(err)
	}
	tc := cfg.Tiered
	if !tc.Enabled() || tc.S3.Endpoint != "s3.example:9000" || tc.S3.Bucket != "logs" || tc.S3.Region != "eu-west-1" ||
		tc.S3.AccessKey != "AK" || tc.S3.SecretKey != "SK" || !tc.S3.Secure || tc.S3.CAFile != "/etc/ca.pem" ||
		!tc.S3.CreateBucket || tc.CacheDir != "/cache" || tc.CacheBytes != 64<<20 ||
		tc.Upload.Interval != 250*time.Millisecond || tc.Upload.Concurrency != 5 {
		t.Fatalf("tiered config %+v", tc)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseServeArgs([]string{"serve"})
	if err != nil || cfg.Tiered.Enabled() {
		t.Fatalf("no endpoint: enabled %v, %v", cfg.Tiered.Enabled(), err)
	}
}

// TestDevS3: `ringlog dev s3` serves S3 on loopback, prints its ready line
// and the serve flags, a broker started with those flags accepts a
// remote-storage topic, and Ctrl-C stops the server. A non-loopback
// --listen is refused.
func TestDevS3(t *testing.T) {
	if out, err := exec.Command(harness.RinglogBin, "dev", "s3", "--listen", "0.0.0.0:0", "--dir", t.TempDir()).CombinedOutput(); err == nil || !strings.Contains(string(out), "not a loopback address") {
		t.Fatalf("dev s3 on 0.0.0.0: %v %s", err, out)
	}

	cmd := exec.Command(harness.RinglogBin, "dev", "s3", "--listen", harness.FreePort(t), "--dir", t.TempDir())
	lines, exited, stderr := startLines(t, cmd, 10*time.Second)
	var ready s3test.Ready
	var flags string
	for timeout := time.After(30 * time.Second); flags == ""; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dev s3 ended: %v\n%s", <-exited, stderr.String())
			}
			if r, ok := s3test.ParseReady(l); ok {
				ready = r
			}
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "ringlog serve "); ok {
				flags = rest
			}
		case <-timeout:
			t.Fatalf("dev s3 not ready after 30s\n%s", stderr.String())
		}
	}
	if ready.Endpoint == "" || ready.Bucket != s3test.DefaultBucket || !strings.Contains(flags, "--object-store-endpoint "+ready.Endpoint) {
		t.Fatalf("ready %+v, flags %q", ready, flags)
	}

	// HEAD of the bucket, then an object round trip through the client
	// the broker uses.
	resp, err := http.Head("http://" + ready.Endpoint + "/" + ready.Bucket)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD bucket: %v %v", resp, err)
	}
	resp.Body.Close()
	ctx := harness.Context(t, 30*time.Second)
	store, err := objstore.NewS3(ctx, objstore.S3Config{Endpoint: ready.Endpoint, Bucket: ready.Bucket, AccessKey: ready.AccessKey, SecretKey: ready.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, "probe", bytes.NewReader([]byte("hello")), 5); err != nil {
		t.Fatal(err)
	}
	if info, err := store.Stat(ctx, "probe"); err != nil || info.Size != 5 {
		t.Fatalf("stat: %+v %v", info, err)
	}

	b := harness.StartBroker(t, t.TempDir(), strings.Fields(flags)...)
	adm := kadm.NewClient(b.Client(t))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true")}, "tiered"); err != nil {
		t.Fatalf("remote-storage topic on a broker pointed at dev s3: %v", err)
	}
	body := httpGet(t, ctx, "http://"+b.Admin+"/v1/remote/segments?topic=tiered")
	if !strings.Contains(body, `"topic": "tiered"`) || !strings.Contains(body, `"segments": []`) {
		t.Fatalf("/v1/remote/segments: %s", body)
	}
	m := harness.Scrape(t, b.Admin) // also checks the exposition text parses
	for _, name := range []string{"ringlog_remote_cache_hits_total", "ringlog_remote_upload_stalled_partitions", `ringlog_remote_fetch_errors_total{reason="storage"}`} {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	b.Stop()

	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dev s3 after SIGINT: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dev s3 did not stop on SIGINT")
	}
}

func httpGet(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestDevClusterObjectStoreArgs: the flags dev cluster --object-store puts
// before the extra ones point a node at the in-process store, and an
// extra flag after them still overrides them.
func TestDevClusterObjectStoreArgs(t *testing.T) {
	unsetServeEnv(t)
	s3, err := startDevS3(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Stop()
	nd := &devNode{id: 1, kafka: "127.0.0.1:19092", admin: "127.0.0.1:19644", ctrl: "127.0.0.1:19192", dataDirPath: "/tmp/dev/node-1/data"}
	extra := append(devS3ServeFlags(s3), "--remote-cache-bytes", "8388608")
	cfg, err := parseServeArgs(nd.serveArgs([]string{"1@127.0.0.1:19192"}, extra))
	if err != nil {
		t.Fatal(err)
	}
	ak, sk := s3.Credentials()
	if tc := cfg.Tiered; tc.S3.Endpoint != s3.Endpoint() || tc.S3.Bucket != s3.Bucket() || tc.S3.AccessKey != ak || tc.S3.SecretKey != sk || tc.CacheBytes != 8<<20 {
		t.Fatalf("tiered config %+v", tc)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseServeArgs(nd.serveArgs([]string{"1@127.0.0.1:19192"}, append(devS3ServeFlags(s3), "--object-store-bucket", "other")))
	if err != nil || cfg.Tiered.S3.Bucket != "other" {
		t.Fatalf("override: bucket %q, %v", cfg.Tiered.S3.Bucket, err)
	}
}

// startLines starts cmd with its stdout read into lines (closed at EOF,
// then the exit status is sent on exited) and stderr kept. At cleanup a
// command still running gets SIGINT, and SIGKILL after grace.
func startLines(t *testing.T, cmd *exec.Cmd, grace time.Duration) (<-chan string, <-chan error, *harness.SyncBuffer) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &harness.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(grace):
				cmd.Process.Kill()
			}
		}
	})
	return lines, exited, stderr
}
