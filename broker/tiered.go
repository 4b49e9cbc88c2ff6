package broker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringlog/ringlog/controller"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/epochcache"
	"github.com/ringlog/ringlog/tiered/chunkcache"
	"github.com/ringlog/ringlog/tiered/objstore"
	"github.com/ringlog/ringlog/tiered/remote"
	"github.com/ringlog/ringlog/tiered/upload"
)

// Tiered storage wiring (docs/TIERED.md): with an object store configured
// the broker opens the store client, the chunk cache and the remote
// reader in New (no network I/O unless the bucket is to be created),
// builds the upload manager once the controller node exists, starts it in
// Start and hands it every metadata image reconcile sees. Without one
// nothing of this exists and netpath refuses remote.storage.enable.

// TieredConfig configures tiered storage. A zero S3.Endpoint turns it off.
type TieredConfig struct {
	// S3 is the object store (objstore.S3Config documents each field;
	// zero fields take its defaults). AccessKey and SecretKey, when both
	// are empty, come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	// The secret key is never logged.
	S3 objstore.S3Config
	// CacheDir holds the chunk cache of remote reads (<data-dir>/remote-cache).
	CacheDir string
	// CacheBytes bounds the chunk cache on disk (1 GiB; 0 takes it).
	CacheBytes int64
	// Upload tunes the upload manager; BrokerID and Logger are set by the
	// broker.
	Upload upload.Config
	// OpenTimeout bounds the bucket check at start when S3.CreateBucket
	// is set (30s).
	OpenTimeout time.Duration
}

// DefaultTieredConfig returns tiered storage's defaults (off: no endpoint).
func DefaultTieredConfig() TieredConfig {
	s3 := objstore.DefaultS3Config()
	s3.Bucket = "ringlog"
	return TieredConfig{
		S3:          s3,
		CacheBytes:  chunkcache.DefaultConfig("").MaxBytes,
		Upload:      upload.Config{Interval: time.Second, Concurrency: 2},
		OpenTimeout: 30 * time.Second,
	}
}

// Enabled reports whether an object store is configured.
func (c TieredConfig) Enabled() bool { return c.S3.Endpoint != "" }

// Validate checks the config (only when enabled); it contacts nothing.
func (c TieredConfig) Validate() error {
	if !c.Enabled() {
		return nil
	}
	s3 := c.S3
	if s3.PartSize == 0 {
		s3.PartSize = objstore.DefaultS3Config().PartSize
	}
	if err := s3.Validate(); err != nil {
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	if c.S3.CAFile != "" && !c.S3.Secure && !strings.HasPrefix(c.S3.Endpoint, "https://") {
		return errors.New("broker: tiered storage: an object store CA file needs TLS (--object-store-tls)")
	}
	cc := c.cacheConfig()
	if cc.Dir == "" {
		cc.Dir = "remote-cache" // resolved later against the data dir
	}
	if err := cc.Validate(); err != nil {
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	switch {
	case c.CacheBytes < 0:
		return fmt.Errorf("broker: tiered storage: cache bytes %d must not be negative", c.CacheBytes)
	case c.Upload.Interval < 0:
		return fmt.Errorf("broker: tiered storage: upload interval %v must not be negative", c.Upload.Interval)
	case c.Upload.MaxRate < 0:
		return fmt.Errorf("broker: tiered storage: upload max rate %d must not be negative", c.Upload.MaxRate)
	case c.Upload.Concurrency < 0:
		return fmt.Errorf("broker: tiered storage: upload concurrency %d must not be negative", c.Upload.Concurrency)
	case c.Upload.MinBackoff < 0 || c.Upload.MaxBackoff < 0 || c.Upload.OpTimeout < 0 || c.OpenTimeout < 0:
		return errors.New("broker: tiered storage: backoffs and timeouts must not be negative")
	case c.Upload.MaxBackoff > 0 && c.Upload.MinBackoff > c.Upload.MaxBackoff:
		return fmt.Errorf("broker: tiered storage: min backoff %v above max backoff %v", c.Upload.MinBackoff, c.Upload.MaxBackoff)
	}
	return nil
}

// cacheConfig is the chunk cache's config: defaults but for the
// directory and the size bound.
func (c TieredConfig) cacheConfig() chunkcache.Config {
	cc := chunkcache.DefaultConfig(c.CacheDir)
	if c.CacheBytes > 0 {
		cc.MaxBytes = c.CacheBytes
	}
	return cc
}

// LogValue describes the config for logs without the credentials.
func (c TieredConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("endpoint", c.S3.Endpoint),
		slog.String("bucket", c.S3.Bucket),
		slog.String("region", c.S3.Region),
		slog.Bool("tls", c.S3.Secure),
		slog.Bool("access_key_set", c.S3.AccessKey != ""),
		slog.String("cache_dir", c.CacheDir),
		slog.Int64("cache_bytes", c.cacheConfig().MaxBytes),
	)
}

// tieredStack is what the broker runs for tiered storage.
type tieredStack struct {
	cfg    TieredConfig
	log    *slog.Logger
	store  objstore.Store
	cache  *chunkcache.Cache
	reader *remote.Reader
	// fetch is the reader netpath gets: reader with counters
	// (tiered_metrics.go).
	fetch *countingReader
	// mgr is built by attach, once the controller node exists.
	mgr *upload.Manager
	// node is the metadata source, set by attach; reads before it see an
	// empty image.
	node atomic.Pointer[controller.Node]
	// started: Start ran mgr.Start; close stops it.
	started atomic.Bool
}

// openTiered opens the store client and the chunk cache. It does network
// I/O only when cfg.S3.CreateBucket is set.
func openTiered(cfg TieredConfig, log *slog.Logger) (*tieredStack, error) {
	t := &tieredStack{cfg: cfg, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.OpenTimeout)
	store, err := objstore.NewS3(ctx, cfg.S3)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("tiered storage: object store %s: %w", cfg.S3.Endpoint, err)
	}
	t.store = store
	if t.cache, err = chunkcache.Open(cfg.cacheConfig(), store.GetRange); err != nil {
		return nil, fmt.Errorf("tiered storage: chunk cache: %w", err)
	}
	t.reader = remote.NewReader(t.image, t.cache, store)
	t.fetch = &countingReader{r: t.reader}
	log.Info("tiered storage on", "object_store", cfg)
	return t, nil
}

// image is the current metadata image (empty before attach).
func (t *tieredStack) image() *metadata.Image {
	if n := t.node.Load(); n != nil {
		return n.MetadataImage()
	}
	return metadata.EmptyImage()
}

// attach builds the upload manager over the controller node.
func (t *tieredStack) attach(node *controller.Node, eng *engine.Engine, nodeID int32) {
	t.node.Store(node)
	ucfg := t.cfg.Upload
	ucfg.BrokerID = nodeID
	ucfg.Logger = t.log
	t.mgr = upload.New(ucfg, eng, t.store, node, t.cache.Drop)
}

// start starts the uploads; the caller then hands the manager the
// current image (wireServer.setRemoteReconcile).
func (t *tieredStack) start() {
	if t.mgr != nil && t.started.CompareAndSwap(false, true) {
		t.mgr.Start()
	}
}

// restartPoint is replication's RemoteRestart: the image names the
// topic's id, the reader finds the restart point in the store.
func (t *tieredStack) restartPoint(ctx context.Context, topic string, partition int32) (int64, []byte, []epochcache.Entry, error) {
	tp, ok := t.image().Topic(topic)
	if !ok {
		return 0, nil, nil, fmt.Errorf("remote restart point of %s-%d: %w", topic, partition, metadata.ErrUnknownTopic)
	}
	return t.reader.RestartPoint(ctx, tp.ID, partition)
}

// close stops the uploads, then the cache: call it after the Kafka
// server stopped serving fetches and before the engine closes.
func (t *tieredStack) close() {
	if t.mgr != nil {
		if err := t.mgr.Close(); err != nil {
			t.log.Warn("closing the upload manager", "err", err)
		}
	}
	if t.cache != nil {
		t.cache.Close()
	}
}

// setRemoteReconcile makes every reconcile from now on hand its image to
// f, and calls f with the current image once, under the reconcile lock,
// so f sees the images in order.
func (s *wireServer) setRemoteReconcile(f func(*metadata.Image)) {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	s.remoteReconcile = f
	f(s.node.MetadataImage())
}

// The admin endpoint GET /v1/remote/segments?topic=NAME lists a topic's
// remote segments as the committed metadata has them, with this broker's
// local log start beside each partition. Field names are part of the
// interface (the integration tests read them).

type remoteSegmentsDoc struct {
	Topic      string                 `json:"topic"`
	TopicID    string                 `json:"topic_id"`
	Partitions []remotePartitionEntry `json:"partitions"`
}

type remotePartitionEntry struct {
	Partition      int32 `json:"partition"`
	RemoteLogStart int64 `json:"remote_log_start"`
	RemoteEnd      int64 `json:"remote_end"`
	// LocalLogStart is this broker's engine's, -1 when it hosts no
	// replica of the partition.
	LocalLogStart int64                `json:"local_log_start"`
	Segments      []remoteSegmentEntry `json:"segments"`
}

type remoteSegmentEntry struct {
	ID           string `json:"id"`
	BaseOffset   int64  `json:"base_offset"`
	NextOffset   int64  `json:"next_offset"`
	SizeBytes    int64  `json:"size_bytes"`
	LeaderEpoch  int32  `json:"leader_epoch"`
	MaxTimestamp int64  `json:"max_timestamp"`
}

// remoteSegmentsDocument builds the document of topic from img.
func remoteSegmentsDocument(img *metadata.Image, eng *engine.Engine, topic string) (remoteSegmentsDoc, bool) {
	t, ok := img.Topic(topic)
	if !ok {
		return remoteSegmentsDoc{}, false
	}
	doc := remoteSegmentsDoc{Topic: t.Name, TopicID: hex.EncodeToString(t.ID[:]), Partitions: make([]remotePartitionEntry, 0, len(t.Partitions))}
	for i := range t.Partitions {
		p := int32(i)
		e := remotePartitionEntry{
			Partition:      p,
			RemoteLogStart: img.RemoteLogStart(t.ID, p),
			RemoteEnd:      img.RemoteEnd(t.ID, p),
			LocalLogStart:  -1,
			Segments:       []remoteSegmentEntry{},
		}
		if part, err := eng.Partition(t.Name, p); err == nil {
			e.LocalLogStart = part.LocalLogStartOffset()
		}
		for _, s := range img.RemoteSegments(t.ID, p) {
			e.Segments = append(e.Segments, remoteSegmentEntry{
				ID: s.ID.String(), BaseOffset: s.BaseOffset, NextOffset: s.NextOffset,
				SizeBytes: s.SizeBytes, LeaderEpoch: s.LeaderEpoch, MaxTimestamp: s.MaxTimestamp,
			})
		}
		doc.Partitions = append(doc.Partitions, e)
	}
	return doc, true
}

// serveRemoteSegments is the handler of /v1/remote/segments.
func (b *Broker) serveRemoteSegments(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	topic := r.URL.Query().Get("topic")
	if topic == "" {
		http.Error(w, "missing ?topic=NAME", http.StatusBadRequest)
		return
	}
	doc, ok := remoteSegmentsDocument(b.node.MetadataImage(), b.eng, topic)
	if !ok {
		http.Error(w, fmt.Sprintf("unknown topic %q", topic), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(doc)
}
