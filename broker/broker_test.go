package broker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/testwait"
	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lifecycleCleanMarker is the file the engine writes last on a clean Close
// (engine/doc.go); its rename is how these tests see the engine close.
const lifecycleCleanMarker = ".ringlog-clean-shutdown"

// lifecycleConfig is a single-node broker on loopback ports the kernel picks,
// with its data in a temp dir and its engine behind an ErrorFS that
// counts the clean-shutdown marker's renames (one per engine Close).
func lifecycleConfig(t *testing.T) (Config, *vfs.ErrorFS) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if m := os.Getenv("RINGLOG_TEST_IO"); m != "" {
		cfg.Engine.IOMode = m
	}
	fs := vfs.Wrap(vfs.Default)
	// A delay of 1ns only counts: the rename still happens.
	fs.Inject(vfs.Fault{Op: vfs.OpRename, PathContains: lifecycleCleanMarker, Delay: time.Nanosecond})
	cfg.Engine.FS = fs
	return cfg, fs
}

func TestBrokerLifecycle(t *testing.T) {
	cfg, fs := lifecycleConfig(t)
	var handlerCalls int
	cfg.AdminHandlers = func(mux *http.ServeMux, b *Broker) {
		handlerCalls++
		if b.Engine() == nil {
			t.Error("AdminHandlers called before the engine is open")
		}
		mux.HandleFunc("/extra", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "extra") })
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if handlerCalls != 1 {
		t.Fatalf("AdminHandlers called %d times, want 1", handlerCalls)
	}
	if h := lifecycleHealth(t, b); h["status"] != "starting" {
		t.Fatalf("/healthz status %v before Start, want starting", h["status"])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !b.Ready() || b.ClusterID() == "" {
		t.Fatalf("after Start: ready %v, cluster id %q", b.Ready(), b.ClusterID())
	}
	h := lifecycleHealth(t, b)
	if h["status"] != "ok" || h["cluster_id"] != b.ClusterID() || h["node_id"] != float64(1) || h["fsync"] != "always" {
		t.Fatalf("/healthz after Start: %v", h)
	}
	resp, err := http.Get("http://" + b.AdminAddr().String() + "/extra")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "extra" {
		t.Fatalf("/extra answered %q: the AdminHandlers endpoint is not served", body)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.AllowAutoTopicCreation(),
		kgo.DefaultProduceTopic("life"), kgo.ConsumeTopics("life"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fetches := cl.PollRecords(ctx, 1)
	if err := fetches.Err(); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if recs := fetches.Records(); len(recs) != 1 || string(recs[0].Value) != "one" {
		t.Fatalf("consumed %v, want the one record produced", recs)
	}
	cl.Close()

	if n := fs.Fired(); n != 0 {
		t.Fatalf("clean-shutdown marker written %d times before Close", n)
	}
	b.Drain(context.Background())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := fs.Fired(); n != 1 {
		t.Fatalf("engine closed %d times (clean-shutdown marker renames), want exactly 1", n)
	}
	if b.Ready() {
		t.Fatal("still ready after Close")
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, lifecycleCleanMarker)); err != nil {
		t.Fatalf("no clean-shutdown marker after Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", b.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("Kafka listener still accepts after Close")
	}
}

// TestNewFailsLate: when a late step of New fails, everything opened
// before it (engine, Kafka server and listener, controller node) is
// closed again: the engine cleanly, exactly once, and no file descriptor
// stays open.
func TestNewFailsLate(t *testing.T) {
	for _, step := range []string{"kafka listener", "admin listener"} {
		t.Run(step, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			cfg, fs := lifecycleConfig(t)
			if step == "kafka listener" {
				cfg.Listen = busy.Addr().String()
			} else {
				cfg.AdminListen = busy.Addr().String()
			}
			before := lifecycleOpenFDs(t)
			b, err := New(cfg)
			if err == nil {
				b.Close()
				t.Fatalf("New with the %s address in use succeeded", step)
			}
			if !strings.Contains(err.Error(), step) {
				t.Fatalf("error %q does not name the %s", err, step)
			}
			if n := fs.Fired(); n != 1 {
				t.Fatalf("engine closed %d times after New failed, want exactly 1", n)
			}
			// Everything is closed synchronously; the poll only absorbs
			// descriptors the runtime opens for itself.
			var after int
			if !testwait.Until(5*time.Second, func() bool { after = lifecycleOpenFDs(t); return after == before }) {
				t.Fatalf("%d file descriptors open before New, %d after it failed", before, after)
			}
		})
	}
}

// TestAdoptLegacyTopics: a data dir written by a ringlog that predates the
// controller (topics in the engine, no raft state) keeps its topics, with
// their ids, on the first start with a single-node quorum.
func TestAdoptLegacyTopics(t *testing.T) {
	cfg, _ := lifecycleConfig(t)
	ecfg := cfg.resolved().Engine
	eng, err := engine.Open(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := eng.CreateTopic("legacy", 3, map[string]string{"retention.ms": "60000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	top, ok := b.node.MetadataImage().Topic("legacy")
	if !ok {
		t.Fatal("the pre-controller topic is not in the metadata image")
	}
	if top.ID != metadata.UUID(legacy.ID) || len(top.Partitions) != 3 || top.Configs["retention.ms"] != "60000" {
		t.Fatalf("adopted topic %+v, want id %v, 3 partitions and retention.ms 60000", top, legacy.ID)
	}
	if ts := b.Engine().Topics(); len(ts) != 1 || ts[0].Name != "legacy" {
		t.Fatalf("engine topics after the first reconcile: %+v", ts)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no data dir", func(c *Config) { c.DataDir = "" }, "data dir"},
		{"cert without tls listener", func(c *Config) { c.TLS.CertFile = "c.pem" }, "without a TLS listener"},
		{"tls listener without key", func(c *Config) { c.TLS = TLSConfig{Listen: "127.0.0.1:0", CertFile: "c.pem"} }, "certificate and its key"},
		{"not a voter, no controller listen", func(c *Config) {
			c.Controller.Voters = []controller.Voter{{ID: 2, Addr: "127.0.0.1:1"}}
		}, "not among the controller voters"},
		{"controller listen without voters", func(c *Config) { c.Controller.ControllerListen = "127.0.0.1:1" }, "needs controller voters"},
		{"negative drain", func(c *Config) { c.DrainTimeout = -1 }, "must not be negative"},
		{"engine sub-config", func(c *Config) { c.Engine.RetentionCheckInterval = 0 }, "RetentionCheckInterval"},
		{"replication sub-config", func(c *Config) { c.Replication.FetchMaxWait = c.Replication.ReplicaLagTimeMax }, "FetchMaxWait"},
		{"groups sub-config", func(c *Config) { c.Groups.OffsetsTopicPartitions = 0 }, "OffsetsTopicPartitions"},
		{"wire sub-config", func(c *Config) { c.Wire.AdvertisedAddr = "no-port" }, "advertised addr"},
		{"fetch copy threshold over the copy buffer", func(c *Config) { c.Wire.FetchCopyBelow = 2 << 20 }, "fetch copy below"},
		{"negative fetch copy threshold", func(c *Config) { c.Wire.FetchCopyBelow = -1 }, "fetch copy below"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A voter's controller listen address defaults to its voter entry.
	c := DefaultConfig()
	c.Controller.Voters = []controller.Voter{{ID: 1, Addr: "127.0.0.1:1"}}
	if err := c.Validate(); err != nil {
		t.Fatalf("voter without explicit controller listen: %v", err)
	}
	if got := c.resolved().Controller.ControllerListen; got != "127.0.0.1:1" {
		t.Fatalf("controller listen %q, want the voter's address", got)
	}
}

func lifecycleHealth(t *testing.T, b *Broker) map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

func lifecycleOpenFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}
