package broker

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/replication"
)

// The replication throttle (KIP-73): catch-up traffic to replicas out of
// the ISR is held to leader.replication.throttled.rate on the leader
// (bytes/s served to throttled followers; netpath's Fetch handler asks
// LeaderThrottle per partition of a replica fetch and withholds the
// records while the rate is exceeded) and to
// follower.replication.throttled.rate on the follower (its fetchers leave
// throttled partitions out of their requests meanwhile; replication's
// FollowerThrottle). Which replicas are throttled:
//
//   - as in Kafka, per the topic configs, whose partition:brokerId
//     entries ("*": all) name the broker the throttle applies on:
//     leader.replication.throttled.replicas the leader, which then
//     throttles every follower of that partition;
//     follower.replication.throttled.replicas the follower, which
//     throttles its own fetches of it (Kafka's reassignment tool lists a
//     moving partition's current replicas in the first, its new ones in
//     the second);
//   - unlike Kafka, where the reassignment tool writes those lists, every
//     replica a reassignment is adding (metadata.Partition.AddingReplicas)
//     on both sides, so a move is throttled by the rates alone;
//
// and in both cases only while the replica is out of the ISR: an in-sync
// follower holds the high watermark and the producers' acks=all, and is
// never throttled (Kafka's shouldLeaderThrottle/shouldFollowerThrottle).
// The rates are dynamic broker configs (this broker's id, else the
// cluster-wide default); the plan of throttled replicas is rebuilt from
// the image on every reconcile and read lock-free on the fetch paths.

// replThrottle is one broker's replication throttle state.
type replThrottle struct {
	leader, follower *replication.Throttle
	plan             atomic.Pointer[throttlePlan]
}

// throttlePlan is what the image says is throttled on this broker.
type throttlePlan struct {
	// leader holds, for partitions this broker leads, the replicas whose
	// fetches count against the leader rate (before the ISR check, done
	// on the leader's live state).
	leader map[tpKey]throttledFollowers
	// follower holds the partitions this broker follows whose fetches
	// count against the follower rate (out of the ISR already checked).
	follower map[tpKey]bool
}

// throttledFollowers are the followers of a led partition the leader
// throttles: all (the leader list names this broker for it) or those a
// reassignment is adding.
type throttledFollowers struct {
	all    bool
	adding []int32
}

func (r throttledFollowers) has(replica int32) bool {
	return r.all || slices.Contains(r.adding, replica)
}

func newReplThrottle() *replThrottle {
	t := &replThrottle{leader: replication.NewThrottle(), follower: replication.NewThrottle()}
	t.plan.Store(&throttlePlan{})
	return t
}

// throttleRate reads rate key k from this broker's dynamic configs (its
// own over the cluster-wide default); Unlimited when unset. Values were
// validated before they were proposed; one that still fails counts as
// unset.
func throttleRate(img *metadata.Image, me int32, k string) int64 {
	v, ok := img.BrokerConfigs(strconv.Itoa(int(me)))[k]
	if !ok {
		v, ok = img.BrokerConfigs("")[k]
	}
	if !ok {
		return replication.Unlimited
	}
	n, err := engine.ParseThrottledRate(k, v)
	if err != nil {
		return replication.Unlimited
	}
	return n
}

// sync applies img: the rates and the plan of throttled replicas.
// Called from reconcile.
func (t *replThrottle) sync(img *metadata.Image, me int32) {
	now := time.Now()
	t.leader.SetRate(throttleRate(img, me, engine.LeaderThrottledRateKey), now)
	t.follower.SetRate(throttleRate(img, me, engine.FollowerThrottledRateKey), now)
	plan := &throttlePlan{}
	for _, tp := range img.Topics() {
		var lead, follow engine.ThrottledReplicas
		if v := tp.Configs[engine.LeaderThrottledReplicasKey]; v != "" {
			lead, _ = engine.ParseThrottledReplicas(v)
		}
		if v := tp.Configs[engine.FollowerThrottledReplicasKey]; v != "" {
			follow, _ = engine.ParseThrottledReplicas(v)
		}
		if lead.Empty() && follow.Empty() && !slices.ContainsFunc(tp.Partitions, metadata.Partition.Reassigning) {
			continue
		}
		for i, p := range tp.Partitions {
			idx := int32(i)
			key := tpKey{tp.Name, idx}
			switch {
			case p.Leader == me:
				if r := (throttledFollowers{lead.Has(idx, me), p.AddingReplicas}); r.all || len(r.adding) > 0 {
					if plan.leader == nil {
						plan.leader = map[tpKey]throttledFollowers{}
					}
					plan.leader[key] = r
				}
			case slices.Contains(p.Replicas, me) && !slices.Contains(p.ISR, me):
				if follow.Has(idx, me) || slices.Contains(p.AddingReplicas, me) {
					if plan.follower == nil {
						plan.follower = map[tpKey]bool{}
					}
					plan.follower[key] = true
				}
			}
		}
	}
	t.plan.Store(plan)
}

// followerThrottled is replication.FollowerThrottle.Throttled.
func (t *replThrottle) followerThrottled(tp replication.TopicPartition) bool {
	return t.plan.Load().follower[tpKey{tp.Topic, tp.Partition}]
}

// LeaderThrottle is the leader side of the throttle for one partition of
// a replica fetch (netpath.Replicas): throttled when replica's fetch of
// topic/partition counts against leader.replication.throttled.rate
// (the leader list names this broker for the partition or the replica is
// being added, and it is out of the leader's maximal ISR, which
// includes a member whose addition is still being committed); wait > 0
// when the rate is exceeded, so its records are withheld and the rate
// allows more after wait.
func (m *replicaManager) LeaderThrottle(topic string, partition, replica int32) (throttled bool, wait time.Duration) {
	t := m.throttle
	if !t.leader.Limited() {
		return false, 0
	}
	r, ok := t.plan.Load().leader[tpKey{topic, partition}]
	if !ok || !r.has(replica) {
		return false, 0
	}
	lp := m.leader(topic, partition)
	if lp == nil {
		return false, 0
	}
	lp.mu.Lock()
	inISR := lp.gen && lp.st.InMaximalISR(replica)
	lp.mu.Unlock()
	if inISR {
		return false, 0
	}
	return true, t.leader.Delay(time.Now())
}

// RecordLeaderThrottle charges the bytes one replica fetch served to
// throttled replicas; withheld says it held some back (netpath.Replicas).
func (m *replicaManager) RecordLeaderThrottle(bytes int64, withheld bool) {
	m.throttle.leader.Record(bytes, time.Now())
	if withheld {
		m.throttle.leader.CountWithheld()
	}
}

var (
	descThrottledBytes = prometheus.NewDesc("ringlog_replication_throttled_bytes_total",
		"Bytes of replication to throttled replicas (out of the ISR, listed in *.replication.throttled.replicas or being added by a reassignment) while a throttled rate is set: served by this broker as leader (side=leader), fetched by it as follower (side=follower).",
		[]string{"side"}, nil)
	descThrottleRate = prometheus.NewDesc("ringlog_replication_throttle_rate_bytes",
		"The replication throttle in force on this broker in bytes/s: leader.replication.throttled.rate (side=leader), follower.replication.throttled.rate (side=follower); 0 when unlimited.",
		[]string{"side"}, nil)
	descThrottledFetches = prometheus.NewDesc("ringlog_replication_throttled_fetches_total",
		"Replica fetches in which the throttle held back a throttled partition's records: answered without them by this broker as leader (side=leader), sent without them by it as follower (side=follower).",
		[]string{"side"}, nil)
	throttleDescs = []*prometheus.Desc{descThrottledBytes, descThrottleRate, descThrottledFetches}
)

func (s *wireServer) collectThrottle(ch chan<- prometheus.Metric) {
	m := s.repl
	if m == nil {
		return
	}
	for _, side := range []struct {
		name string
		t    *replication.Throttle
	}{{"leader", m.throttle.leader}, {"follower", m.throttle.follower}} {
		st := side.t.Stats()
		rate := side.t.Rate()
		if rate == replication.Unlimited {
			rate = 0
		}
		ch <- prometheus.MustNewConstMetric(descThrottledBytes, prometheus.CounterValue, float64(st.Bytes), side.name)
		ch <- prometheus.MustNewConstMetric(descThrottleRate, prometheus.GaugeValue, float64(rate), side.name)
		ch <- prometheus.MustNewConstMetric(descThrottledFetches, prometheus.CounterValue, float64(st.Withheld), side.name)
	}
}
