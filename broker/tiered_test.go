package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/tiered/s3test"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminGet fetches path from b's admin listener without keep-alive (no
// client connection outlives the test's goroutine count).
func adminGet(t *testing.T, b *Broker, path string) (int, []byte) {
	t.Helper()
	cl := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get("http://" + b.AdminAddr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func startBroker(t *testing.T, cfg Config) *Broker {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

func adminClient(t *testing.T, b *Broker) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// A broker with an object store opens the tiered stack, accepts a
// remote-storage topic, lists a committed remote segment on the admin
// endpoint with the documented field names, exports the remote metrics,
// and closes without leaving goroutines behind.
func TestTieredBrokerOpenServeClose(t *testing.T) {
	before := runtime.NumGoroutine()
	s3 := s3test.Start(t)
	cfg, _ := lifecycleConfig(t)
	ak, sk := s3.Credentials()
	cfg.Tiered.S3.Endpoint, cfg.Tiered.S3.Bucket = s3.Endpoint(), s3.Bucket()
	cfg.Tiered.S3.AccessKey, cfg.Tiered.S3.SecretKey = ak, sk
	b := startBroker(t, cfg)
	if b.tier == nil || b.tier.mgr == nil || !b.tier.started.Load() {
		t.Fatal("tiered storage not started")
	}
	if got := b.cfg.Tiered.CacheDir; got != filepath.Join(cfg.DataDir, "remote-cache") {
		t.Fatalf("cache dir %q, want <data-dir>/remote-cache", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true")}, "tiered"); err != nil {
		t.Fatalf("creating a remote-storage topic with an object store: %v", err)
	}
	top, ok := b.node.MetadataImage().Topic("tiered")
	if !ok {
		t.Fatal("topic not in the image")
	}
	p0 := top.Partitions[0]
	seg := rlm.Segment{TopicID: top.ID, Partition: 0, BaseOffset: 0, NextOffset: 10,
		MaxTimestamp: time.Now().UnixMilli(), SizeBytes: 1234, LeaderEpoch: p0.LeaderEpoch,
		Epochs: []epochcache.Entry{{Epoch: p0.LeaderEpoch, StartOffset: 0}}}
	rand.Read(seg.ID[:])
	if err := b.node.CommitRemoteSegment(ctx, seg); err != nil {
		t.Fatal(err)
	}

	code, body := adminGet(t, b, "/v1/remote/segments?topic=tiered")
	if code != http.StatusOK {
		t.Fatalf("/v1/remote/segments: %d %s", code, body)
	}
	// Decoded into generic maps: the field names are the contract.
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["topic"] != "tiered" || doc["topic_id"] != hex.EncodeToString(top.ID[:]) {
		t.Fatalf("document head: %s", body)
	}
	parts, _ := doc["partitions"].([]any)
	if len(parts) != 2 {
		t.Fatalf("partitions: %s", body)
	}
	p := parts[0].(map[string]any)
	if p["partition"] != 0.0 || p["remote_log_start"] != 0.0 || p["remote_end"] != 10.0 || p["local_log_start"] != 0.0 {
		t.Fatalf("partition 0: %v", p)
	}
	segs, _ := p["segments"].([]any)
	if len(segs) != 1 {
		t.Fatalf("partition 0 segments: %v", p["segments"])
	}
	want := map[string]any{"id": seg.ID.String(), "base_offset": 0.0, "next_offset": 10.0, "size_bytes": 1234.0,
		"leader_epoch": float64(seg.LeaderEpoch), "max_timestamp": float64(seg.MaxTimestamp)}
	got := segs[0].(map[string]any)
	if len(got) != len(want) {
		t.Fatalf("segment fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("segment %s = %v, want %v (%v)", k, got[k], v, got)
		}
	}
	p1 := parts[1].(map[string]any)
	if p1["remote_log_start"] != -1.0 || p1["remote_end"] != -1.0 || len(p1["segments"].([]any)) != 0 {
		t.Fatalf("partition 1 (nothing uploaded): %v", p1)
	}
	if code, _ := adminGet(t, b, "/v1/remote/segments?topic=nope"); code != http.StatusNotFound {
		t.Fatalf("unknown topic: %d", code)
	}
	if code, _ := adminGet(t, b, "/v1/remote/segments"); code != http.StatusBadRequest {
		t.Fatalf("no topic: %d", code)
	}

	_, metrics := adminGet(t, b, "/metrics")
	for _, name := range []string{"ringlog_remote_bytes_uploaded_total", "ringlog_remote_segments_uploaded_total",
		"ringlog_remote_upload_errors_total", "ringlog_remote_segments_deleted_total", "ringlog_remote_upload_lag_bytes",
		"ringlog_remote_upload_lag_segments", "ringlog_remote_size_bytes", "ringlog_remote_upload_stalled_partitions",
		"ringlog_remote_local_deletion_held_back_bytes", "ringlog_remote_cache_hits_total", "ringlog_remote_cache_misses_total",
		"ringlog_remote_cache_fetched_bytes_total", "ringlog_remote_cache_evictions_total", "ringlog_remote_cache_corrupt_chunks_total",
		"ringlog_remote_cache_bytes", `ringlog_remote_fetch_errors_total{reason="storage"}`, "ringlog_remote_fetch_requests_total"} {
		if !strings.Contains(string(metrics), "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	// The store's server closes any connection the uploads left idle.
	s3.Stop()
	var n int
	if !testwait.Until(10*time.Second, func() bool { n = runtime.NumGoroutine(); return n <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// Without an object store a broker refuses remote.storage.enable on
// create and on both alter APIs, exports no remote metrics, and still
// answers the admin endpoint (nothing remote).
func TestRemoteStorageRefusedWithoutObjectStore(t *testing.T) {
	cfg, _ := lifecycleConfig(t)
	b := startBroker(t, cfg)
	if b.tier != nil {
		t.Fatal("tiered stack opened without an endpoint")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := adminClient(t, b)
	on := map[string]*string{"remote.storage.enable": kadm.StringPtr("true")}
	resp, err := adm.CreateTopic(ctx, 1, 1, on, "tiered")
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, "--object-store-endpoint") {
		t.Fatalf("create with remote.storage.enable: %v %q, want INVALID_CONFIG naming the flag", err, resp.ErrMessage)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: kadm.StringPtr("true")}}, "plain")
	if err != nil || len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatalf("incremental alter to remote.storage.enable: %v %+v", err, ar)
	}
	ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: kadm.StringPtr("true")}}, "plain")
	if err != nil || len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatalf("alter (non-incremental) to remote.storage.enable: %v %+v", err, ar)
	}
	// Other changes still go through.
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("60000")}}, "plain")
	if err != nil || len(ar) != 1 || ar[0].Err != nil {
		t.Fatalf("alter retention.ms: %v %+v", err, ar)
	}

	_, metrics := adminGet(t, b, "/metrics")
	if strings.Contains(string(metrics), "ringlog_remote_") {
		t.Fatal("/metrics has remote tier series without an object store")
	}
	code, body := adminGet(t, b, "/v1/remote/segments?topic=plain")
	var doc remoteSegmentsDoc
	if code != http.StatusOK || json.Unmarshal(body, &doc) != nil || len(doc.Partitions) != 1 ||
		doc.Partitions[0].RemoteEnd != -1 || doc.Partitions[0].LocalLogStart != 0 || len(doc.Partitions[0].Segments) != 0 {
		t.Fatalf("/v1/remote/segments of a plain topic: %d %s", code, body)
	}
}

func TestTieredConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("tiered off by default: %v", err)
	}
	base := func() Config {
		c := DefaultConfig()
		c.Tiered.S3.Endpoint = "127.0.0.1:9000"
		c.Tiered.S3.Bucket = "ringlog"
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("endpoint and bucket: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no bucket", func(c *Config) { c.Tiered.S3.Bucket = "" }, "bucket is empty"},
		{"bad bucket", func(c *Config) { c.Tiered.S3.Bucket = "ab" }, "bucket"},
		{"half credentials", func(c *Config) { c.Tiered.S3.AccessKey = "k" }, "set together"},
		{"ca without tls", func(c *Config) { c.Tiered.S3.CAFile = "ca.pem" }, "needs TLS"},
		{"tiny cache", func(c *Config) { c.Tiered.CacheBytes = 1 << 10 }, "MaxBytes"},
		{"negative cache", func(c *Config) { c.Tiered.CacheBytes = -1 }, "cache bytes"},
		{"negative interval", func(c *Config) { c.Tiered.Upload.Interval = -time.Second }, "upload interval"},
		{"negative concurrency", func(c *Config) { c.Tiered.Upload.Concurrency = -1 }, "upload concurrency"},
	} {
		c := base()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	c := base()
	c.Tiered.S3.Endpoint, c.Tiered.S3.CAFile = "https://127.0.0.1:9000", "ca.pem"
	if err := c.Validate(); err != nil {
		t.Fatalf("https endpoint with a CA file: %v", err)
	}
	if r := base().resolved(); !r.Wire.RemoteStorage || r.Tiered.CacheDir != filepath.Join(r.DataDir, "remote-cache") {
		t.Fatalf("resolved: remote storage %v, cache dir %q", r.Wire.RemoteStorage, r.Tiered.CacheDir)
	}
	if DefaultConfig().resolved().Wire.RemoteStorage {
		t.Fatal("remote storage on without an endpoint")
	}
	// The secret never reaches a log line.
	c = base()
	c.Tiered.S3.AccessKey, c.Tiered.S3.SecretKey = "AKID", "very-secret"
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("x", "object_store", c.Tiered)
	if strings.Contains(sb.String(), "very-secret") || !strings.Contains(sb.String(), "127.0.0.1:9000") {
		t.Fatalf("log line %q", sb.String())
	}
}

// A broker whose object store is down starts (no store call at start),
// takes produce to a remote-storage topic with small segments (uploads
// fail in the background), and closes promptly: nothing waits on the
// store.
func TestTieredStoreDownAtStart(t *testing.T) {
	s3 := s3test.Start(t)
	s3.Stop()
	cfg, _ := lifecycleConfig(t)
	ak, sk := s3.Credentials()
	cfg.Tiered.S3.Endpoint, cfg.Tiered.S3.Bucket = s3.Endpoint(), s3.Bucket()
	cfg.Tiered.S3.AccessKey, cfg.Tiered.S3.SecretKey = ak, sk
	cfg.Tiered.Upload.Interval = 50 * time.Millisecond
	b := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes": kadm.StringPtr("1024"), "local.retention.bytes": kadm.StringPtr("1")}, "tiered"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.DefaultProduceTopic("tiered"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 50 {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(strings.Repeat("x", 200) + fmt.Sprint(i))}).FirstErr()
		pcancel()
		if err != nil {
			t.Fatalf("produce %d with the store down: %v", i, err)
		}
	}
	p, err := b.Engine().Partition("tiered", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.LocalLogStartOffset() != 0 {
		t.Fatalf("local log start %d: segments deleted although nothing was uploaded", p.LocalLogStartOffset())
	}
	cl.Close()
	t0 := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("Close took %v with the store down", d)
	}
}
