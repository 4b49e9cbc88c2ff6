package broker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/iouring"
)

// Storage metrics are read from the engine's atomic counters at scrape
// time; the write path pays only for the counters themselves.

var (
	descIOPath = prometheus.NewDesc("ringlog_io_path_info",
		"The storage write path in use (uring or sync) and why it was chosen.", []string{"path", "reason"}, nil)
	descAppends = prometheus.NewDesc("ringlog_appends_total",
		"Successful partition appends (one per produce partition or replicated fetch).", nil, nil)
	descAppendedBytes = prometheus.NewDesc("ringlog_appended_bytes_total",
		"Record batch bytes appended to partition logs (leader and follower copies).", nil, nil)
	descFsyncs = prometheus.NewDesc("ringlog_fsyncs_total",
		"fdatasync calls on segment files (group commit, segment rolls, recovery).", nil, nil)
	descFsyncSeconds = prometheus.NewDesc("ringlog_fsync_duration_seconds",
		"Group-commit fdatasync latency: the call on the sync path; submission of the write (or flush) to the fdatasync's completion on the io_uring path.", nil, nil)
	descFlushRounds = prometheus.NewDesc("ringlog_flush_rounds_total",
		"Group-commit rounds of the sync path's flusher (fsyncs per round: the group commit factor).", nil, nil)
	descJournalWrites = prometheus.NewDesc("ringlog_journal_writes_total",
		"Writes of the broker-wide journal (fsync always with --journal): one write+fdatasync per round, whatever the number of dirty partitions.", nil, nil)
	descJournalBytes = prometheus.NewDesc("ringlog_journal_bytes_total",
		"Bytes written to the journal, record headers included.", nil, nil)
	descJournalRecords = prometheus.NewDesc("ringlog_journal_records_total",
		"Journal records written: one per append on the sync path, one per partition group on the io_uring path; per write this is the dirty partitions (or appends) per round.", nil, nil)
	descJournalCheckpoints = prometheus.NewDesc("ringlog_journal_checkpoints_total",
		"Journal checkpoints: the segments written since the last one fdatasynced, the journal's start moved past them.", nil, nil)
	descJournalCheckpointSeconds = prometheus.NewDesc("ringlog_journal_checkpoint_seconds_total",
		"Time spent in journal checkpoints.", nil, nil)
	descJournalFill = prometheus.NewDesc("ringlog_journal_fill_ratio",
		"Share of the journal between its checkpoint and its last write (a checkpoint starts above 0.125; at 1 appends wait).", nil, nil)
	descJournalReplayed = prometheus.NewDesc("ringlog_journal_replayed_records_total",
		"Journal records replayed into segments when the broker started.", nil, nil)
	descSegmentsDeleted = prometheus.NewDesc("ringlog_segments_deleted_total",
		"Segments deleted by retention.", nil, nil)
	descRingEnters = prometheus.NewDesc("ringlog_ring_enters_total",
		"io_uring_enter calls of the write path's ring (uring path only).", nil, nil)
	descRingSQEs = prometheus.NewDesc("ringlog_ring_submissions_total",
		"SQEs the kernel consumed from the write path's ring; per enter this is the batching factor.", nil, nil)
	descRingCQEs = prometheus.NewDesc("ringlog_ring_completions_total",
		"Completions reaped from the write path's ring.", nil, nil)
	descRingPerEnter = prometheus.NewDesc("ringlog_ring_submissions_per_enter",
		"Histogram of SQEs consumed per io_uring_enter (0: a wait for completions only).", nil, nil)
	descCleanerPasses = prometheus.NewDesc("ringlog_cleaner_passes_total",
		"Log cleaner passes over a compacted partition's cleanable segments.", nil, nil)
	descCleanerSegments = prometheus.NewDesc("ringlog_cleaner_segments_rewritten_total",
		"Sealed segments the log cleaner rewrote without superseded records.", nil, nil)
	descCleanerBytesBefore = prometheus.NewDesc("ringlog_cleaner_bytes_before_total",
		"Size of the segments the log cleaner rewrote, before cleaning.", nil, nil)
	descCleanerBytesAfter = prometheus.NewDesc("ringlog_cleaner_bytes_after_total",
		"Size of the segments the log cleaner rewrote, after cleaning.", nil, nil)
	descCleanerRecords = prometheus.NewDesc("ringlog_cleaner_records_removed_total",
		"Records the log cleaner removed (superseded, or tombstones past delete.retention.ms).", nil, nil)
	descCleanerErrors = prometheus.NewDesc("ringlog_cleaner_errors_total",
		"Log cleaner passes that failed (retried at the next interval).", nil, nil)
)

var storageDescs = []*prometheus.Desc{descIOPath, descAppends, descAppendedBytes, descFsyncs, descFsyncSeconds,
	descFlushRounds, descSegmentsDeleted, descJournalWrites, descJournalBytes, descJournalRecords, descJournalCheckpoints,
	descJournalCheckpointSeconds, descJournalFill, descJournalReplayed, descRingEnters, descRingSQEs, descRingCQEs, descRingPerEnter,
	descCleanerPasses, descCleanerSegments, descCleanerBytesBefore, descCleanerBytesAfter, descCleanerRecords, descCleanerErrors,
	descDiskFree, descDiskTotal, descDiskMinFree, descDiskResumeFree, descDiskDegraded, descDiskRefused,
	descDiskFullRollbacks, descDiskOffline}

// Free space of the data directory (docs/disk-full.md).
var (
	descDiskFree = prometheus.NewDesc("ringlog_disk_free_bytes",
		"Bytes available on the data directory's file system (statfs, less what was appended since the sample).", nil, nil)
	descDiskTotal = prometheus.NewDesc("ringlog_disk_total_bytes",
		"Size of the data directory's file system.", nil, nil)
	descDiskMinFree = prometheus.NewDesc("ringlog_disk_min_free_bytes",
		"Free-space threshold: below it produce is refused (max of --disk-min-free-bytes and --disk-min-free-percent).", nil, nil)
	descDiskResumeFree = prometheus.NewDesc("ringlog_disk_resume_free_bytes",
		"Free space at which a degraded broker accepts produce again.", nil, nil)
	descDiskDegraded = prometheus.NewDesc("ringlog_disk_degraded",
		"1 while free space is below the threshold and produce is refused.", nil, nil)
	descDiskRefused = prometheus.NewDesc("ringlog_disk_refused_appends_total",
		"Appends refused with KAFKA_STORAGE_ERROR because free space was below the threshold.", nil, nil)
	descDiskFullRollbacks = prometheus.NewDesc("ringlog_disk_full_rollbacks_total",
		"Segment writes that failed for lack of space and were undone, the partition kept online (io_uring path: partition rolled back; sync path: torn tail cut).", nil, nil)
	descDiskOffline = prometheus.NewDesc("ringlog_disk_offline_partitions",
		"Partition replicas on this broker taken offline by a disk error until a restart (this broker's view; ringlog_offline_partitions is the controller's count of leaderless partitions).", nil, nil)
)

func (s *wireServer) collectDisk(ch chan<- prometheus.Metric) {
	d := s.engine.DiskStatus()
	gauge := func(desc *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(v))
	}
	gauge(descDiskFree, d.FreeBytes)
	gauge(descDiskTotal, d.TotalBytes)
	gauge(descDiskMinFree, d.MinFreeBytes)
	gauge(descDiskResumeFree, d.ResumeFreeBytes)
	degraded := int64(0)
	if d.Degraded {
		degraded = 1
	}
	gauge(descDiskDegraded, degraded)
	ch <- prometheus.MustNewConstMetric(descDiskRefused, prometheus.CounterValue, float64(d.RefusedAppends))
}

func (s *wireServer) collectStorage(ch chan<- prometheus.Metric) {
	e := s.engine
	if e == nil {
		return
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	ch <- prometheus.MustNewConstMetric(descIOPath, prometheus.GaugeValue, 1, e.IOPath(), e.IOReason())
	s.collectDisk(ch)
	st := e.Stats()
	counter(descAppends, st.Appends)
	counter(descAppendedBytes, st.AppendedBytes)
	counter(descFsyncs, st.Fdatasyncs)
	counter(descFlushRounds, st.FlushRounds)
	counter(descSegmentsDeleted, st.SegmentsDeleted)
	counter(descDiskFullRollbacks, st.DiskFullRollbacks)
	if e.JournalInUse() {
		counter(descJournalWrites, st.JournalWrites)
		counter(descJournalBytes, st.JournalBytes)
		counter(descJournalRecords, st.JournalRecords)
		counter(descJournalCheckpoints, st.JournalCheckpoints)
		ch <- prometheus.MustNewConstMetric(descJournalCheckpointSeconds, prometheus.CounterValue, float64(st.JournalCheckpointNanos)/1e9)
		ch <- prometheus.MustNewConstMetric(descJournalFill, prometheus.GaugeValue, st.JournalFill)
		counter(descJournalReplayed, st.JournalReplayed)
	}
	ch <- prometheus.MustNewConstMetric(descDiskOffline, prometheus.GaugeValue, float64(len(e.OfflinePartitions())))
	cs := e.CleanerStats()
	counter(descCleanerPasses, cs.Passes)
	counter(descCleanerSegments, cs.SegmentsRewritten)
	counter(descCleanerBytesBefore, cs.BytesBefore)
	counter(descCleanerBytesAfter, cs.BytesAfter)
	counter(descCleanerRecords, cs.RecordsRemoved)
	counter(descCleanerErrors, cs.Errors)

	h := e.FsyncLatency()
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(descFsyncSeconds, h.Count(), h.Sum.Seconds(), buckets)

	rs, ok := e.RingStats()
	if !ok {
		return
	}
	counter(descRingEnters, int64(rs.Enters))
	counter(descRingSQEs, int64(rs.SQEs))
	counter(descRingCQEs, int64(rs.CQEs))
	perEnter := make(map[float64]uint64, iouring.EnterBuckets-1)
	cum = 0
	for i, n := range rs.SQEsPerEnter {
		cum += n
		if bound := iouring.EnterBucketBound(i); bound >= 0 {
			perEnter[float64(bound)] = cum
		}
	}
	ch <- prometheus.MustNewConstHistogram(descRingPerEnter, cum, float64(rs.SQEs), perEnter)
}
