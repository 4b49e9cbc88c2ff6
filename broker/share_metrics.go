package broker

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/coordinator/group"
	"github.com/ringlog/ringlog/coordinator/share"
)

// Share group (KIP-932) metrics, per group, computed at scrape time: the
// member count from the group coordinator (so only the group's
// coordinator reports it), the rest from the share-partitions this broker
// leads (coordinator/share), so a sum over brokers counts each
// share-partition once. Groups beyond maxShareGroupSeries (in name
// order) are summed under group="_other", as topics beyond their cap
// are.

var (
	shareGroupLabel     = []string{"group"}
	descShareMembers    = prometheus.NewDesc("ringlog_share_group_members", "Members of a share group this broker coordinates.", shareGroupLabel, nil)
	descShareInFlight   = prometheus.NewDesc("ringlog_share_group_in_flight_records", "Records in the in-flight windows of a share group's share-partitions led here, by state: acquired (locked to a consumer) or available (released or expired, waiting to be delivered again).", []string{"group", "state"}, nil)
	descSharePartitions = prometheus.NewDesc("ringlog_share_group_partitions", "Share-partitions of a share group whose state this broker holds (it leads their topic partitions).", shareGroupLabel, nil)
	descShareDelivered  = prometheus.NewDesc("ringlog_share_group_delivered_records_total", "Records a share group's consumers acquired from partitions led here, redeliveries included.", shareGroupLabel, nil)
	descShareRedelivery = prometheus.NewDesc("ringlog_share_group_redelivered_records_total", "Acquisitions of records already delivered before (delivery count above 1): released, expired, or left behind by a member that went away.", shareGroupLabel, nil)
	descShareLockExpiry = prometheus.NewDesc("ringlog_share_group_lock_timeouts_total", "Acquisition locks that expired before the consumer acknowledged the record.", shareGroupLabel, nil)
	descShareArchived   = prometheus.NewDesc("ringlog_share_group_archived_records_total", "Records archived, never to be delivered again: rejected, at the delivery count limit, or not deliverable (control records, aborted transactions, offsets compacted away).", shareGroupLabel, nil)
	descShareOmitted    = prometheus.NewDesc("ringlog_share_group_series_omitted", "Share groups summed under group=\"_other\" (beyond the first 1000 in name order).", nil, nil)
)

var shareDescs = []*prometheus.Desc{descShareMembers, descShareInFlight, descSharePartitions,
	descShareDelivered, descShareRedelivery, descShareLockExpiry, descShareArchived, descShareOmitted}

const (
	// maxShareGroupSeries bounds the groups with their own series: a
	// client can create share groups at will.
	maxShareGroupSeries = 1000
	otherShareGroups    = "_other"
)

// shareMetrics keeps the per-group counters monotonic. A share-partition's
// Counters live with this broker's copy of its state, and start again at
// zero when the copy is dropped and read back (a leader epoch change, a
// failed write): the counts of copies gone are kept per group, so one
// partition's restart does not look like a reset of the group's total.
type shareMetrics struct {
	s  *wireServer
	mu sync.Mutex
	// last holds each share-partition's counters at the previous scrape.
	last map[share.Key]share.Counters
	// retired sums, per group, the last counts of copies since dropped.
	retired map[string]share.Counters
}

// shareGroupStats is one group's numbers as one scrape reports them.
type shareGroupStats struct {
	members, partitions, acquired, available int
	counters                                 share.Counters
	// coordinated: this broker coordinates the group, so it reports
	// the members (the others leave the series out).
	coordinated bool
}

func addCounters(a, b share.Counters) share.Counters {
	return share.Counters{Delivered: a.Delivered + b.Delivered, Redelivered: a.Redelivered + b.Redelivered,
		LockTimeouts: a.LockTimeouts + b.LockTimeouts, Archived: a.Archived + b.Archived}
}

// restarted reports whether cur is a new copy's counts rather than a
// later reading of old's: some count went down.
func restarted(old, cur share.Counters) bool {
	return cur.Delivered < old.Delivered || cur.Redelivered < old.Redelivered ||
		cur.LockTimeouts < old.LockTimeouts || cur.Archived < old.Archived
}

// groups folds the held share-partitions and the coordinated groups'
// member counts into per-group numbers. A group's retired counts are
// kept while this broker holds any of its share-partitions or
// coordinates it, and forgotten after (its series end).
func (sm *shareMetrics) groups(stats []share.PartitionStats, members map[string]int) map[string]*shareGroupStats {
	out := map[string]*shareGroupStats{}
	get := func(g string) *shareGroupStats {
		if out[g] == nil {
			out[g] = &shareGroupStats{}
		}
		return out[g]
	}
	for g, n := range members {
		gs := get(g)
		gs.members, gs.coordinated = n, true
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	cur := make(map[share.Key]share.Counters, len(stats))
	for _, ps := range stats {
		cur[ps.Key] = ps.Counters
		gs := get(ps.Group)
		gs.partitions++
		gs.acquired += ps.Acquired
		gs.available += ps.Available
		gs.counters = addCounters(gs.counters, ps.Counters)
	}
	if sm.retired == nil {
		sm.retired = map[string]share.Counters{}
	}
	for k, old := range sm.last {
		if c, ok := cur[k]; !ok || restarted(old, c) {
			sm.retired[k.Group] = addCounters(sm.retired[k.Group], old)
		}
	}
	sm.last = cur
	for g, r := range sm.retired {
		if out[g] == nil {
			delete(sm.retired, g)
			continue
		}
		out[g].counters = addCounters(out[g].counters, r)
	}
	return out
}

func (sm *shareMetrics) collect(ch chan<- prometheus.Metric) {
	s := sm.s
	var stats []share.PartitionStats
	if s.shares != nil {
		stats = s.shares.Stats()
	}
	members := map[string]int{}
	if s.groups != nil && s.groups.Manager != nil {
		// A partition still loading is left out (its groups show at the
		// next scrape); the error says only that.
		ls, _ := s.groups.ListFiltered(nil, []string{group.GroupTypeShare})
		ids := make([]string, 0, len(ls))
		for _, l := range ls {
			ids = append(ids, l.Group)
		}
		for _, d := range s.groups.ShareDescribe(ids) {
			if d.Err == nil {
				members[d.Group] = len(d.Members)
			}
		}
	}
	byGroup := sm.groups(stats, members)
	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	slices.Sort(names)
	omitted := 0
	if len(names) > maxShareGroupSeries {
		other := &shareGroupStats{}
		for _, g := range names[maxShareGroupSeries:] {
			gs := byGroup[g]
			other.members += gs.members
			other.coordinated = other.coordinated || gs.coordinated
			other.partitions += gs.partitions
			other.acquired += gs.acquired
			other.available += gs.available
			other.counters = addCounters(other.counters, gs.counters)
			omitted++
		}
		names = append(names[:maxShareGroupSeries], otherShareGroups)
		byGroup[otherShareGroups] = other
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64, g string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), g)
	}
	for _, g := range names {
		gs := byGroup[g]
		if gs.coordinated {
			gauge(descShareMembers, gs.members, g)
		}
		gauge(descShareInFlight, gs.acquired, g, "acquired")
		gauge(descShareInFlight, gs.available, g, "available")
		gauge(descSharePartitions, gs.partitions, g)
		counter(descShareDelivered, gs.counters.Delivered, g)
		counter(descShareRedelivery, gs.counters.Redelivered, g)
		counter(descShareLockExpiry, gs.counters.LockTimeouts, g)
		counter(descShareArchived, gs.counters.Archived, g)
	}
	gauge(descShareOmitted, omitted)
}
