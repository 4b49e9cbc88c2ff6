package broker

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller/metadata"
)

// Replication metrics are computed at scrape time from the LeaderStates
// this broker holds (each read under its partition lock) and from the
// metadata image; ISR change counters are bumped where the change is
// applied (replicas.go). Per-partition series (offsets of every hosted
// replica; ISR gauges of the partitions led here) are capped at
// maxPartitionSeries partitions, in topic order; the rest are counted in
// ringlog_partition_series_omitted.

var (
	descLedPartitions = prometheus.NewDesc("ringlog_replicated_partitions_led",
		"Replicated partitions (RF > 1) this broker leads.", nil, nil)
	descUnderReplicated = prometheus.NewDesc("ringlog_under_replicated_partitions",
		"Partitions this broker leads whose ISR is smaller than their replica set.", nil, nil)
	descUnderMinISR = prometheus.NewDesc("ringlog_under_min_isr_partitions",
		"Partitions this broker leads whose ISR is below min.insync.replicas (acks=all produce is refused).", nil, nil)
	descOffline = prometheus.NewDesc("ringlog_offline_partitions",
		"Partitions without a leader; reported by the active controller only (0 elsewhere), so a sum over brokers counts each once.", nil, nil)
	descISRShrinks = prometheus.NewDesc("ringlog_isr_shrinks_total",
		"Committed ISR changes that removed a member, of partitions this broker leads.", nil, nil)
	descISRExpands = prometheus.NewDesc("ringlog_isr_expands_total",
		"Committed ISR changes that added a member, of partitions this broker leads.", nil, nil)
	descFollowerLag = prometheus.NewDesc("ringlog_follower_lag_offsets",
		"High watermark lag per follower: the leader's log end offset minus the durable offset the follower last reported; an in-sync follower holds the high watermark back by this much.",
		[]string{"topic", "partition", "follower", "in_isr"}, nil)
)

var (
	partLabels            = []string{"topic", "partition"}
	descPartLogEndOffset  = prometheus.NewDesc("ringlog_partition_log_end_offset", "Next offset to be written, per hosted replica (leader or follower).", partLabels, nil)
	descPartHighWatermark = prometheus.NewDesc("ringlog_partition_high_watermark", "High watermark (end of the committed, consumer-visible records), per hosted replica.", partLabels, nil)
	descPartLogStart      = prometheus.NewDesc("ringlog_partition_log_start_offset", "First offset still held, per hosted replica.", partLabels, nil)
	descPartISRSize       = prometheus.NewDesc("ringlog_partition_isr_size", "Committed ISR size of a replicated partition this broker leads.", partLabels, nil)
	descPartUnderRepl     = prometheus.NewDesc("ringlog_partition_under_replicated", "1 when a replicated partition this broker leads has an ISR smaller than its replica set.", partLabels, nil)
	descPartUnderMinISR   = prometheus.NewDesc("ringlog_partition_under_min_isr", "1 when a replicated partition this broker leads has an ISR below min.insync.replicas (acks=all produce is refused).", partLabels, nil)
	descPartOmitted       = prometheus.NewDesc("ringlog_partition_series_omitted",
		"Hosted partitions left out of the per-partition series (beyond the first 2000, in topic order).", nil, nil)
	descReplicaFetches = prometheus.NewDesc("ringlog_replica_fetches_total",
		"Replica fetch requests this broker sent as a follower.", nil, nil)
	descReplicaFetchInterrupts = prometheus.NewDesc("ringlog_replica_fetch_interrupts_total",
		"Replica fetches this broker cancelled while they long-polled, to send at once one that carries a partition it started following.", nil, nil)
	descRemoteRestarts = prometheus.NewDesc("ringlog_replica_tiered_restarts_total",
		"Follower partitions restarted from the remote tier after the leader answered OFFSET_MOVED_TO_TIERED_STORAGE.", nil, nil)
	descRemoteRestartErrors = prometheus.NewDesc("ringlog_replica_tiered_restart_errors_total",
		"Remote-tier restarts of follower partitions that failed and were retried after a backoff.", nil, nil)
	descRemoteRestarting = prometheus.NewDesc("ringlog_replica_tiered_restarting_partitions",
		"Follower partitions parked while their restart point is read from the remote tier.", nil, nil)
	descReassigning = prometheus.NewDesc("ringlog_reassignment_partitions",
		"Partitions this broker leads that are being reassigned (AlterPartitionReassignments in progress).", nil, nil)
	descReassignLag = prometheus.NewDesc("ringlog_reassignment_adding_lag_messages",
		"Sum over the partitions this broker leads that are being reassigned of the log end offset minus each adding replica's fetch offset (the whole log end for one that has not fetched yet): what the new replicas still have to copy.", nil, nil)
	descProduceOldestWait = prometheus.NewDesc("ringlog_produce_oldest_wait_seconds",
		"Age (since its request arrived) of the oldest acks=all produce waiting in the replication purgatory for the high watermark; 0 when none waits. Every wait ends by its timeout_ms, so a value above the clients' timeout means a stuck acknowledgement.", nil, nil)
)

// maxPartitionSeries bounds the partitions with per-partition series, as
// netpath's maxTopicSeries bounds per-topic ones.
const maxPartitionSeries = 2000

var replicationDescs = []*prometheus.Desc{descLedPartitions, descUnderReplicated, descUnderMinISR, descOffline,
	descISRShrinks, descISRExpands, descFollowerLag, descPartLogEndOffset, descPartHighWatermark, descPartLogStart,
	descPartISRSize, descPartUnderRepl, descPartUnderMinISR, descPartOmitted, descProduceOldestWait,
	descReplicaFetches, descReplicaFetchInterrupts, descReassigning, descReassignLag,
	descRemoteRestarts, descRemoteRestartErrors, descRemoteRestarting}

// isrCounters counts committed ISR changes of partitions this broker leads.
type isrCounters struct {
	shrinks, expands atomic.Uint64
}

// count counts a committed ISR change of a partition this broker
// leads: any member removed is a shrink, any added an expand.
func (m *isrCounters) count(before, after []int32) {
	if containsAll(after, before) {
		if !containsAll(before, after) {
			m.expands.Add(1)
		}
		return
	}
	m.shrinks.Add(1)
	if !containsAll(before, after) {
		m.expands.Add(1)
	}
}

// containsAll reports whether every id of sub is in set.
func containsAll(set, sub []int32) bool {
	for _, id := range sub {
		found := false
		for _, x := range set {
			if x == id {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (s *wireServer) collectReplication(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ch <- prometheus.MustNewConstMetric(descISRShrinks, prometheus.CounterValue, float64(s.isr.shrinks.Load()))
	ch <- prometheus.MustNewConstMetric(descISRExpands, prometheus.CounterValue, float64(s.isr.expands.Load()))

	offline := 0
	if n := s.node; n != nil && n.Controller() == s.nodeID {
		for _, t := range n.MetadataImage().Topics() {
			for _, p := range t.Partitions {
				if p.Leader == metadata.NoLeader {
					offline++
				}
			}
		}
	}
	gauge(descOffline, float64(offline))

	shown := s.collectPartitions(ch)
	m := s.repl
	if m == nil {
		return
	}
	gauge(descProduceOldestWait, m.purg.OldestWait(time.Now()).Seconds())
	fst := m.fetchers.Stats()
	ch <- prometheus.MustNewConstMetric(descReplicaFetches, prometheus.CounterValue, float64(fst.Requests))
	ch <- prometheus.MustNewConstMetric(descReplicaFetchInterrupts, prometheus.CounterValue, float64(fst.Interrupted))
	ch <- prometheus.MustNewConstMetric(descRemoteRestarts, prometheus.CounterValue, float64(fst.RemoteRestarts))
	ch <- prometheus.MustNewConstMetric(descRemoteRestartErrors, prometheus.CounterValue, float64(fst.RemoteRestartErrors))
	gauge(descRemoteRestarting, float64(fst.RemoteRestarting))
	m.mu.Lock()
	lps := make([]*leaderPart, 0, len(m.leaders))
	for _, lp := range m.leaders {
		lps = append(lps, lp)
	}
	m.mu.Unlock()
	var img *metadata.Image
	if s.node != nil {
		img = s.node.MetadataImage()
	}
	led, under, underMin := 0, 0, 0
	reassigning, addingLag := 0, int64(0)
	for _, lp := range lps {
		lp.mu.Lock()
		if !lp.gen {
			lp.mu.Unlock()
			continue
		}
		led++
		isr := len(lp.st.ISR())
		isUnder, isUnderMin := isr < len(lp.st.Replicas()), isr < lp.st.MinInsync()
		if isUnder {
			under++
		}
		if isUnderMin {
			underMin++
		}
		followers := lp.st.Followers()
		lp.mu.Unlock()
		part := strconv.Itoa(int(lp.tp.Partition))
		if shown[tpKey{lp.tp.Topic, lp.tp.Partition}] {
			gauge(descPartISRSize, float64(isr), lp.tp.Topic, part)
			gauge(descPartUnderRepl, flag(isUnder), lp.tp.Topic, part)
			gauge(descPartUnderMinISR, flag(isUnderMin), lp.tp.Topic, part)
		}
		for _, f := range followers {
			gauge(descFollowerLag, float64(f.Lag), lp.tp.Topic, part, strconv.Itoa(int(f.ReplicaID)), strconv.FormatBool(f.InISR))
		}
		if img == nil {
			continue
		}
		if p, ok := img.Partition(lp.tp.Topic, lp.tp.Partition); ok && p.Reassigning() && p.Leader == s.nodeID {
			reassigning++
			for _, f := range followers {
				if slices.Contains(p.AddingReplicas, f.ReplicaID) {
					addingLag += f.Lag
				}
			}
		}
	}
	gauge(descReassigning, float64(reassigning))
	gauge(descReassignLag, float64(addingLag))
	gauge(descLedPartitions, float64(led))
	gauge(descUnderReplicated, float64(under))
	gauge(descUnderMinISR, float64(underMin))
}

// collectPartitions sends the offsets of every hosted partition (up to
// maxPartitionSeries) and returns which partitions got series.
func (s *wireServer) collectPartitions(ch chan<- prometheus.Metric) map[tpKey]bool {
	shown := map[tpKey]bool{}
	if s.engine == nil {
		return shown
	}
	omitted := 0
	for _, ti := range s.engine.Topics() {
		for idx := range ti.Partitions {
			part, err := s.engine.Partition(ti.Name, idx)
			if err != nil {
				continue // deleted meanwhile
			}
			if len(shown) >= maxPartitionSeries {
				omitted++
				continue
			}
			shown[tpKey{ti.Name, idx}] = true
			info := part.Info()
			p := strconv.Itoa(int(idx))
			ch <- prometheus.MustNewConstMetric(descPartLogEndOffset, prometheus.GaugeValue, float64(info.LogEndOffset), ti.Name, p)
			ch <- prometheus.MustNewConstMetric(descPartHighWatermark, prometheus.GaugeValue, float64(info.HighWatermark), ti.Name, p)
			ch <- prometheus.MustNewConstMetric(descPartLogStart, prometheus.GaugeValue, float64(info.LogStartOffset), ti.Name, p)
		}
	}
	ch <- prometheus.MustNewConstMetric(descPartOmitted, prometheus.GaugeValue, float64(omitted))
	return shown
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
