package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/producerstate"
	"github.com/ringlog/ringlog/netpath"
	"github.com/ringlog/ringlog/tiered/remote"
	"github.com/ringlog/ringlog/tiered/upload"
)

// Tiered storage metrics (docs/OBSERVABILITY.md), registered only when an
// object store is configured. They are read at scrape time from the
// upload manager's Stats, the chunk cache's Stats, the engine and the
// counters of countingReader.

var (
	descRemoteBytesUploaded = prometheus.NewDesc("ringlog_remote_bytes_uploaded_total",
		"Log bytes of the segments this broker uploaded and committed to the remote tier.", nil, nil)
	descRemoteSegmentsUploaded = prometheus.NewDesc("ringlog_remote_segments_uploaded_total",
		"Segments this broker uploaded and committed to the remote tier.", nil, nil)
	descRemoteUploadErrors = prometheus.NewDesc("ringlog_remote_upload_errors_total",
		"Failed upload attempts (object store or metadata commit); each is retried with backoff.", nil, nil)
	descRemoteSegmentsDeleted = prometheus.NewDesc("ringlog_remote_segments_deleted_total",
		"Remote segments this broker deleted (remote retention, topic purge).", nil, nil)
	descRemoteLagBytes = prometheus.NewDesc("ringlog_remote_upload_lag_bytes",
		"Bytes of sealed segments of the partitions this broker leads that are not uploaded yet.", nil, nil)
	descRemoteLagSegments = prometheus.NewDesc("ringlog_remote_upload_lag_segments",
		"Sealed segments of the partitions this broker leads that are not uploaded yet.", nil, nil)
	descRemoteSize = prometheus.NewDesc("ringlog_remote_size_bytes",
		"Log bytes in the remote tier of the partitions this broker leads (from the committed metadata).", nil, nil)
	descRemoteStalled = prometheus.NewDesc("ringlog_remote_upload_stalled_partitions",
		"Led partitions whose last upload attempt failed and that have not uploaded since; non-zero means the object store or the controller is failing.", nil, nil)
	descRemoteHeldBack = prometheus.NewDesc("ringlog_remote_local_deletion_held_back_bytes",
		"Bytes of local segments that local retention would delete but keeps because they are not uploaded yet.", nil, nil)

	descRemoteCacheHits = prometheus.NewDesc("ringlog_remote_cache_hits_total",
		"Chunk cache reads served from a chunk already on disk.", nil, nil)
	descRemoteCacheMisses = prometheus.NewDesc("ringlog_remote_cache_misses_total",
		"Chunk cache reads that waited for a fetch from the object store (or a verification).", nil, nil)
	descRemoteCacheFetched = prometheus.NewDesc("ringlog_remote_cache_fetched_bytes_total",
		"Bytes the chunk cache fetched from the object store (read-ahead included).", nil, nil)
	descRemoteCacheFetchErrors = prometheus.NewDesc("ringlog_remote_cache_fetch_errors_total",
		"Chunk fetches that failed while a reader waited for them.", nil, nil)
	descRemoteCacheReadAhead = prometheus.NewDesc("ringlog_remote_cache_read_ahead_total",
		"Read-ahead chunk fetches started for sequential readers.", nil, nil)
	descRemoteCacheEvictions = prometheus.NewDesc("ringlog_remote_cache_evictions_total",
		"Chunks evicted (least recently used) to stay within --remote-cache-bytes.", nil, nil)
	descRemoteCacheCorrupt = prometheus.NewDesc("ringlog_remote_cache_corrupt_chunks_total",
		"Chunks of the wrong length from the store or failing their CRC on disk (dropped and fetched again).", nil, nil)
	descRemoteCacheBytes = prometheus.NewDesc("ringlog_remote_cache_bytes",
		"Bytes of chunk files in the cache directory.", nil, nil)
	descRemoteCacheChunks = prometheus.NewDesc("ringlog_remote_cache_chunks",
		"Chunk files in the cache directory.", nil, nil)

	descRemoteFetches = prometheus.NewDesc("ringlog_remote_fetch_requests_total",
		"Consumer partition fetches served from the remote tier (below the local log start).", nil, nil)
	descRemoteFetchBytes = prometheus.NewDesc("ringlog_remote_fetch_bytes_total",
		"Record bytes returned by remote-tier fetches.", nil, nil)
	descRemoteFetchErrors = prometheus.NewDesc("ringlog_remote_fetch_errors_total",
		"Remote-tier fetches and timestamp lookups that failed, by reason: offset_gone (deleted by remote retention: OFFSET_OUT_OF_RANGE), storage (store unreachable, object missing or corrupt: KAFKA_STORAGE_ERROR), other.", []string{"reason"}, nil)
	descRemoteFetchSeconds = prometheus.NewDesc("ringlog_remote_fetch_seconds_total",
		"Time spent in remote-tier fetches (with the requests counter: the mean latency).", nil, nil)
	descRemoteTimestampLookups = prometheus.NewDesc("ringlog_remote_timestamp_lookups_total",
		"ListOffsets timestamp lookups answered from the remote tier.", nil, nil)
)

var tieredDescs = []*prometheus.Desc{descRemoteBytesUploaded, descRemoteSegmentsUploaded, descRemoteUploadErrors,
	descRemoteSegmentsDeleted, descRemoteLagBytes, descRemoteLagSegments, descRemoteSize, descRemoteStalled, descRemoteHeldBack,
	descRemoteCacheHits, descRemoteCacheMisses, descRemoteCacheFetched, descRemoteCacheFetchErrors, descRemoteCacheReadAhead,
	descRemoteCacheEvictions, descRemoteCacheCorrupt, descRemoteCacheBytes, descRemoteCacheChunks,
	descRemoteFetches, descRemoteFetchBytes, descRemoteFetchErrors, descRemoteFetchSeconds, descRemoteTimestampLookups}

// collector returns the tiered storage series.
func (t *tieredStack) collector(eng *engine.Engine) prometheus.Collector {
	return seriesCollector{tieredDescs, func(ch chan<- prometheus.Metric) { t.collect(ch, eng) }}
}

func (t *tieredStack) collect(ch chan<- prometheus.Metric, eng *engine.Engine) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	var us upload.Stats
	if t.mgr != nil {
		us = t.mgr.Stats()
	}
	counter(descRemoteBytesUploaded, float64(us.BytesUploaded))
	counter(descRemoteSegmentsUploaded, float64(us.SegmentsUploaded))
	counter(descRemoteUploadErrors, float64(us.UploadErrors))
	counter(descRemoteSegmentsDeleted, float64(us.SegmentsDeleted))
	gauge(descRemoteLagBytes, float64(us.LagBytes))
	gauge(descRemoteLagSegments, float64(us.LagSegments))
	gauge(descRemoteSize, float64(us.RemoteBytes))
	gauge(descRemoteStalled, float64(us.Stalled))
	gauge(descRemoteHeldBack, float64(eng.UploadHeldBackBytes()))

	cs := t.cache.Stats()
	counter(descRemoteCacheHits, float64(cs.Hits))
	counter(descRemoteCacheMisses, float64(cs.Misses))
	counter(descRemoteCacheFetched, float64(cs.FetchedBytes))
	counter(descRemoteCacheFetchErrors, float64(cs.FetchErrors))
	counter(descRemoteCacheReadAhead, float64(cs.ReadAheadFetches))
	counter(descRemoteCacheEvictions, float64(cs.Evictions))
	counter(descRemoteCacheCorrupt, float64(cs.CorruptChunks))
	gauge(descRemoteCacheBytes, float64(cs.CachedBytes))
	gauge(descRemoteCacheChunks, float64(cs.CachedChunks))

	f := t.fetch
	counter(descRemoteFetches, float64(f.reads.Load()))
	counter(descRemoteFetchBytes, float64(f.bytes.Load()))
	counter(descRemoteFetchErrors, float64(f.errGone.Load()), "offset_gone")
	counter(descRemoteFetchErrors, float64(f.errStorage.Load()), "storage")
	counter(descRemoteFetchErrors, float64(f.errOther.Load()), "other")
	counter(descRemoteFetchSeconds, float64(f.nanos.Load())/1e9)
	counter(descRemoteTimestampLookups, float64(f.lookups.Load()))
}

// countingReader is the remote reader netpath calls, with counters: the
// broker counts remote reads without netpath knowing about metrics of
// the remote tier. Results and errors pass through unchanged.
type countingReader struct {
	r *remote.Reader

	reads, bytes, nanos, lookups  atomic.Uint64
	errGone, errStorage, errOther atomic.Uint64
}

var _ netpath.RemoteTier = (*countingReader)(nil)

func (c *countingReader) Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int32, minOneBatch, readCommitted bool) (engine.ReadResult, []producerstate.AbortedTxn, error) {
	t0 := time.Now()
	res, aborted, err := c.r.Read(ctx, topicID, partition, offset, maxBytes, minOneBatch, readCommitted)
	c.nanos.Add(uint64(time.Since(t0)))
	c.reads.Add(1)
	if err != nil {
		c.countErr(err)
	} else if res.Data != nil {
		c.bytes.Add(uint64(res.Data.Len()))
	}
	return res, aborted, err
}

func (c *countingReader) OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64) (int64, int64, bool, error) {
	off, ts2, found, err := c.r.OffsetForTimestamp(ctx, topicID, partition, ts)
	c.lookups.Add(1)
	if err != nil {
		c.countErr(err)
	}
	return off, ts2, found, err
}

func (c *countingReader) countErr(err error) {
	switch {
	case errors.Is(err, remote.ErrOffsetGone):
		c.errGone.Add(1)
	case errors.Is(err, remote.ErrStorage):
		c.errStorage.Add(1)
	default:
		c.errOther.Add(1)
	}
}
