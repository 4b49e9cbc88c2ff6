package netpath

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/coordinator/metadata"
)

// Replication metrics are computed at scrape time from the LeaderStates
// this broker holds (each read under its partition lock) and from the
// metadata image; ISR change counters are bumped where the change is
// applied (replicas.go).

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

var replicationDescs = []*prometheus.Desc{descLedPartitions, descUnderReplicated, descUnderMinISR, descOffline,
	descISRShrinks, descISRExpands, descFollowerLag}

func (s *Server) collectReplication(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ch <- prometheus.MustNewConstMetric(descISRShrinks, prometheus.CounterValue, float64(s.metrics.isrShrinks.Load()))
	ch <- prometheus.MustNewConstMetric(descISRExpands, prometheus.CounterValue, float64(s.metrics.isrExpands.Load()))

	offline := 0
	if n := s.node; n != nil && n.Controller() == s.cfg.NodeID {
		for _, t := range n.MetadataImage().Topics() {
			for _, p := range t.Partitions {
				if p.Leader == metadata.NoLeader {
					offline++
				}
			}
		}
	}
	gauge(descOffline, float64(offline))

	m := s.repl
	if m == nil {
		return
	}
	m.mu.Lock()
	lps := make([]*leaderPart, 0, len(m.leaders))
	for _, lp := range m.leaders {
		lps = append(lps, lp)
	}
	m.mu.Unlock()
	led, under, underMin := 0, 0, 0
	for _, lp := range lps {
		lp.mu.Lock()
		if !lp.gen {
			lp.mu.Unlock()
			continue
		}
		led++
		isr := len(lp.st.ISR())
		if isr < len(lp.st.Replicas()) {
			under++
		}
		if isr < lp.st.MinInsync() {
			underMin++
		}
		followers := lp.st.Followers()
		lp.mu.Unlock()
		part := strconv.Itoa(int(lp.tp.Partition))
		for _, f := range followers {
			gauge(descFollowerLag, float64(f.Lag), lp.tp.Topic, part, strconv.Itoa(int(f.ReplicaID)), strconv.FormatBool(f.InISR))
		}
	}
	gauge(descLedPartitions, float64(led))
	gauge(descUnderReplicated, float64(under))
	gauge(descUnderMinISR, float64(underMin))
}
