package netpath

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/internal/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serverMetrics are the request-path instruments behind /metrics. The hot
// path only does atomic adds and loads: latency observers are resolved
// once per (API, version) and cached in atomic pointers, per-topic
// counters live in a copy-on-write map that readers load without a lock,
// and everything else is read at scrape time. The zero value is ready.
type serverMetrics struct {
	once    sync.Once
	latency *prometheus.HistogramVec
	// observers caches latency.WithLabelValues per API key and version,
	// so only (API, version) pairs that were used are exported.
	observers [maxAPIKey + 1][maxAPIVersion + 1]atomic.Pointer[prometheus.Observer]

	rejected [numRejectReasons]atomic.Uint64
	// produceErrors counts produce partitions answered with an error, by
	// Kafka error code + 1 (UNKNOWN_SERVER_ERROR is -1); codes beyond the
	// array share the last slot.
	produceErrors [maxErrorCode + 2]atomic.Uint64
	rebalances    atomic.Uint64
	// consumerAssignments counts ConsumerGroupHeartbeat answers that
	// carried an assignment: the consumer protocol's unit of rebalancing
	// work, per member rather than per group generation.
	consumerAssignments atomic.Uint64
	// resolving counts requests per API whose response is being waited
	// for on the writer goroutine: long-poll fetches, produces waiting for
	// durability or replication, joins waiting for a rebalance. Padded:
	// produce and fetch writers must not share a cache line.
	resolving [maxAPIKey + 1]paddedInt64

	topicMu sync.Mutex // serializes topic map copies
	topics  atomic.Pointer[map[string]*topicCounters]
}

const (
	maxAPIVersion = 31
	maxErrorCode  = 127
	// maxTopicSeries bounds per-topic series; topics beyond it are summed
	// under otherTopics so a client creating topics cannot blow up a
	// Prometheus server.
	maxTopicSeries = 2000
	otherTopics    = "_other"
)

// Reasons a request frame is refused (its connection is closed).
const (
	rejectFrameSize = iota
	rejectUnknownAPI
	rejectUnsupportedVersion
	rejectMalformed
	numRejectReasons
)

var rejectReasonNames = [numRejectReasons]string{"frame_size", "unknown_api", "unsupported_version", "malformed"}

// requestLatencyBuckets span a page-cache append (~100 µs) to a long-poll
// fetch's max wait and a stalled acks=all produce.
var requestLatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func (m *serverMetrics) init() {
	m.once.Do(func() {
		m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ringlog_request_duration_seconds",
			Help:    "Time from a request frame being read to its response being written (acks=0 produce: to its dispatch), by API and version.",
			Buckets: requestLatencyBuckets,
		}, []string{"api", "version"})
	})
}

// observeLatency records one request's latency.
func (m *serverMetrics) observeLatency(key, version int16, d time.Duration) {
	if key < 0 || key > maxAPIKey || version < 0 || version > maxAPIVersion {
		return
	}
	slot := &m.observers[key][version]
	o := slot.Load()
	if o == nil {
		m.init()
		obs := m.latency.WithLabelValues(kmsg.NameForKey(key), strconv.Itoa(int(version)))
		slot.CompareAndSwap(nil, &obs)
		o = slot.Load()
	}
	(*o).Observe(d.Seconds())
}

// reject counts a refused frame.
func (m *serverMetrics) reject(reason int) { m.rejected[reason].Add(1) }

// rejectReason classifies a frame decodeRequest refused.
func rejectReason(hdr requestHeader, frame []byte) int {
	if len(frame) < 10 {
		return rejectMalformed
	}
	h := handlers[hdr.key]
	switch {
	case h == nil:
		return rejectUnknownAPI
	case hdr.version < h.min || hdr.version > h.max:
		return rejectUnsupportedVersion
	}
	return rejectMalformed
}

// paddedInt64 fills a cache line of its own.
type paddedInt64 struct {
	atomic.Int64
	_ [56]byte
}

// topicCounters are one topic's produce and fetch counters, the two
// groups on separate cache lines (different goroutines write them).
type topicCounters struct {
	messagesIn       atomic.Uint64
	bytesIn          atomic.Uint64
	produceErrors    atomic.Uint64 // partitions answered with an error
	_                [64]byte
	fetchPartitions  atomic.Uint64 // partitions read by fetches (consumers and followers)
	consumerBytesOut atomic.Uint64
	followerBytesOut atomic.Uint64
}

// topic returns name's counters, creating them only for topics this
// broker hosts (a produce to a made-up name must not add series).
func (m *serverMetrics) topic(s *Server, name string) *topicCounters {
	if mp := m.topics.Load(); mp != nil {
		if tc := (*mp)[name]; tc != nil {
			return tc
		}
	}
	if s.engine == nil {
		return nil
	}
	if _, ok := s.engine.Topic(name); !ok {
		return nil
	}
	m.topicMu.Lock()
	defer m.topicMu.Unlock()
	var cur map[string]*topicCounters
	if mp := m.topics.Load(); mp != nil {
		cur = *mp
	}
	if tc := cur[name]; tc != nil {
		return tc
	}
	key := name
	if len(cur) >= maxTopicSeries {
		key = otherTopics
		if tc := cur[key]; tc != nil {
			return tc
		}
	}
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]*topicCounters{}
	}
	tc := &topicCounters{}
	next[key] = tc
	m.topics.Store(&next)
	return tc
}

// forgetTopics drops the counters of topics gone from this broker, so a
// deleted topic's series end.
func (m *serverMetrics) forgetTopics(hosted func(string) bool) map[string]*topicCounters {
	m.topicMu.Lock()
	defer m.topicMu.Unlock()
	mp := m.topics.Load()
	if mp == nil {
		return nil
	}
	var next map[string]*topicCounters
	for name := range *mp {
		if name != otherTopics && !hosted(name) {
			if next == nil {
				next = maps.Clone(*mp)
			}
			delete(next, name)
		}
	}
	if next == nil {
		return *mp
	}
	m.topics.Store(&next)
	return next
}

// produced accounts a produce request once its response is known (resp
// nil: acks=0, counted as appended). Request and response topics and
// partitions are in the same order (00_produce.go builds one from the
// other); anything that does not line up is skipped, not guessed.
func (m *serverMetrics) produced(s *Server, req *kmsg.ProduceRequest, sets [][]records.Set, resp *kmsg.ProduceResponse) {
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		var rs *kmsg.ProduceResponseTopic
		if resp != nil {
			if ti >= len(resp.Topics) || resp.Topics[ti].Topic != rt.Topic || len(resp.Topics[ti].Partitions) != len(rt.Partitions) {
				continue
			}
			rs = &resp.Topics[ti]
		}
		var tc *topicCounters
		for pi := range rt.Partitions {
			if rs != nil && rs.Partitions[pi].ErrorCode != 0 {
				m.produceErrors[errorSlot(rs.Partitions[pi].ErrorCode)].Add(1)
				if tc == nil {
					tc = m.topic(s, rt.Topic)
				}
				if tc != nil {
					tc.produceErrors.Add(1)
				}
				continue
			}
			if tc == nil {
				if tc = m.topic(s, rt.Topic); tc == nil {
					break
				}
			}
			tc.bytesIn.Add(uint64(len(rt.Partitions[pi].Records)))
			if ti < len(sets) && pi < len(sets[ti]) {
				tc.messagesIn.Add(recordCount(sets[ti][pi]))
			}
		}
	}
}

// errorSlot is the produceErrors index of a Kafka error code.
func errorSlot(code int16) int {
	if code < -1 || code > maxErrorCode {
		return maxErrorCode + 1
	}
	return int(code) + 1
}

// recordCount sums the record counts of the batches the produce handler
// framed (a malformed tail was refused and is not counted).
func recordCount(set records.Set) uint64 {
	var n uint64
	for i := range set.Batches {
		n += uint64(uint32(set.Batches[i].RecordCount))
	}
	return n
}

// fetched accounts the partitions of a fetch response about to be sent.
func (m *serverMetrics) fetched(s *Server, follower bool, topics []fetchTopic) {
	for i := range topics {
		t := &topics[i]
		tc := m.topic(s, t.name)
		if tc == nil {
			continue
		}
		var bytes uint64
		for _, p := range t.partitions {
			if p.data != nil {
				bytes += uint64(p.data.Len())
			}
		}
		tc.fetchPartitions.Add(uint64(len(t.partitions)))
		if follower {
			tc.followerBytesOut.Add(bytes)
		} else {
			tc.consumerBytesOut.Add(bytes)
		}
	}
}

// responded inspects a response after it was written, for the counters
// that only the outcome can tell.
func (m *serverMetrics) responded(s *Server, p *pendingReply, resp *response) {
	switch p.hdr.key {
	case 0:
		req, ok := p.req.(*kmsg.ProduceRequest)
		if !ok {
			return
		}
		var pr *kmsg.ProduceResponse
		if resp != nil {
			if pr, ok = resp.msg.(*kmsg.ProduceResponse); !ok {
				return
			}
		}
		m.produced(s, req, p.reply.produced, pr)
	case 11:
		// One rebalance completes per generation; its leader's JoinGroup
		// answer marks it.
		if resp == nil {
			return
		}
		if jr, ok := resp.msg.(*kmsg.JoinGroupResponse); ok && jr.ErrorCode == 0 && jr.LeaderID != "" && jr.LeaderID == jr.MemberID {
			m.rebalances.Add(1)
		}
	case 68:
		if resp == nil {
			return
		}
		if hr, ok := resp.msg.(*kmsg.ConsumerGroupHeartbeatResponse); ok && hr.ErrorCode == 0 && hr.Assignment != nil {
			m.consumerAssignments.Add(1)
		}
	}
}

var (
	descRejectedRequests = prometheus.NewDesc("ringlog_rejected_requests_total",
		"Request frames refused, closing their connection, by reason (frame_size, unknown_api, unsupported_version, malformed, tls_handshake, unauthenticated).",
		[]string{"reason"}, nil)
	descNotLeader = prometheus.NewDesc("ringlog_not_leader_total",
		"Partitions answered NOT_LEADER_OR_FOLLOWER (produce, fetch, list offsets), including while this broker's metadata may be stale.", nil, nil)
	descProduceErrors = prometheus.NewDesc("ringlog_produce_errors_total",
		"Produce partitions answered with an error, by Kafka error name.", []string{"error"}, nil)
	descRebalances = prometheus.NewDesc("ringlog_group_rebalances_total",
		"Consumer group generations completed by this coordinator (counted at the leader's JoinGroup response).", nil, nil)
	descConsumerAssignments = prometheus.NewDesc("ringlog_consumer_group_assignments_total",
		"ConsumerGroupHeartbeat (KIP-848) answers that carried a new assignment to a member.", nil, nil)
	descPurgatory = prometheus.NewDesc("ringlog_purgatory_size",
		"Requests parked until an event: produce (waiting for durability or replication), fetch (long polls waiting for data), join_group (waiting for a rebalance), replication (acks=all partition waiters on the high watermark), delete_records (DeleteRecords partitions waiting for the replicas' log starts).",
		[]string{"purgatory"}, nil)
	descTopicMessagesIn = prometheus.NewDesc("ringlog_topic_messages_in_total",
		"Records appended by produce requests (acks=0: received), by topic.", []string{"topic"}, nil)
	descTopicBytesIn = prometheus.NewDesc("ringlog_topic_bytes_in_total",
		"Record batch bytes appended by produce requests (acks=0: received), by topic.", []string{"topic"}, nil)
	descTopicProduceErrors = prometheus.NewDesc("ringlog_topic_produce_errors_total",
		"Produce partitions answered with an error, by topic.", []string{"topic"}, nil)
	descTopicFetchPartitions = prometheus.NewDesc("ringlog_topic_fetch_partitions_total",
		"Partitions read by fetch responses (consumers and followers), by topic.", []string{"topic"}, nil)
	descTopicBytesOut = prometheus.NewDesc("ringlog_topic_bytes_out_total",
		"Record bytes returned by fetch responses, by topic and fetcher (consumer or follower).", []string{"topic", "fetcher"}, nil)
)

func (m *serverMetrics) describe(ch chan<- *prometheus.Desc) {
	m.init()
	m.latency.Describe(ch)
	for _, d := range []*prometheus.Desc{descRejectedRequests, descNotLeader, descProduceErrors, descRebalances, descConsumerAssignments, descPurgatory,
		descTopicMessagesIn, descTopicBytesIn, descTopicProduceErrors, descTopicFetchPartitions, descTopicBytesOut} {
		ch <- d
	}
}

func (m *serverMetrics) collect(s *Server, ch chan<- prometheus.Metric) {
	m.init()
	m.latency.Collect(ch)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i, name := range rejectReasonNames {
		counter(descRejectedRequests, m.rejected[i].Load(), name)
	}
	counter(descRejectedRequests, s.stats.tlsHandshakeErrors.Load(), "tls_handshake")
	counter(descRejectedRequests, s.stats.unauthenticated.Load(), "unauthenticated")
	counter(descNotLeader, s.stats.notLeader.Load())
	for slot := range m.produceErrors {
		if n := m.produceErrors[slot].Load(); n > 0 {
			name := "OTHER"
			if e, ok := kerr.ErrorForCode(int16(slot - 1)).(*kerr.Error); ok && slot < len(m.produceErrors)-1 {
				name = e.Message
			}
			counter(descProduceErrors, n, name)
		}
	}
	counter(descRebalances, m.rebalances.Load())
	counter(descConsumerAssignments, m.consumerAssignments.Load())
	gauge(descPurgatory, float64(m.resolving[0].Load()), "produce")
	gauge(descPurgatory, float64(m.resolving[1].Load()), "fetch")
	gauge(descPurgatory, float64(m.resolving[11].Load()), "join_group")
	s.mu.Lock()
	repl := s.repl
	s.mu.Unlock()
	if repl != nil {
		gauge(descPurgatory, float64(repl.Waiting()), "replication")
		gauge(descPurgatory, float64(repl.WaitingLow()), "delete_records")
	}
	hosted := func(name string) bool {
		if s.engine == nil {
			return false
		}
		_, ok := s.engine.Topic(name)
		return ok
	}
	for name, tc := range m.forgetTopics(hosted) {
		counter(descTopicMessagesIn, tc.messagesIn.Load(), name)
		counter(descTopicBytesIn, tc.bytesIn.Load(), name)
		counter(descTopicProduceErrors, tc.produceErrors.Load(), name)
		counter(descTopicFetchPartitions, tc.fetchPartitions.Load(), name)
		counter(descTopicBytesOut, tc.consumerBytesOut.Load(), name, "consumer")
		counter(descTopicBytesOut, tc.followerBytesOut.Load(), name, "follower")
	}
}
