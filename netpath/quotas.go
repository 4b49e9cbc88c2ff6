package netpath

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quota enforcement (KIP-13, KIP-124 byte rates, KIP-219 muting).
//
// The quota of a connection is resolved per request from the metadata
// image by Kafka's precedence (metadata.Image.ResolveQuota), so a change
// applies on the next request. Each resolved entity (defaults replaced by
// the connection's user and client id, so every client under a default
// quota has its own budget) has one sensor: a rate over Config.QuotaWindow
// (Kafka: 11 samples of 1 s). Produce requests are charged their size on the
// reader, before the next request is read; consumer fetch responses their
// size once built. When the rate passes the bound the request is still
// served, its response carries throttle_time_ms (Kafka's formula: the
// excess over the bound as a share of the bound, times the measured
// window) and the connection is muted (no request is read) for that long,
// so a client that ignores the hint is held to the rate all the same.
// Versions before KIP-219 (produce < 6, fetch < 8) also get the response
// delayed by the throttle time, as Kafka does. request_percentage quotas
// share the sensors and the window (request_quota.go).

const (
	// Sensors idle this long are dropped (Kafka expires them after an
	// hour too); the sweep runs when the map grows past sweepAt.
	quotaSensorIdle  = time.Hour
	quotaSweepAt     = 1024
	quotaMetricLimit = 64 // labelled entities per quota type on /metrics
	quotaOtherEntity = "other"
	quotaTypeProduce = 0
	quotaTypeFetch   = 1
	quotaTypeRequest = 2
	quotaTypeCount   = 3
)

var quotaKeys = [quotaTypeCount]string{metadata.QuotaProducerByteRate, metadata.QuotaConsumerByteRate, metadata.QuotaRequestPercentage}
var quotaTypeNames = [quotaTypeCount]string{"produce", "fetch", "request"}

// QuotaWindow is how client quota rates are measured: Samples windows of
// Size each (Kafka's quota.window.num and quota.window.size.seconds). A
// greedy client may send about (Samples-1) x Size worth of its quota in
// one burst after it was held back (the rate is an average over the whole
// window), so shorter windows give smoother enforcement.
type QuotaWindow struct {
	Samples int
	Size    time.Duration
}

// DefaultQuotaWindow is Kafka's default: 11 samples of 1 s.
func DefaultQuotaWindow() QuotaWindow { return QuotaWindow{Samples: 11, Size: time.Second} }

// Validate checks the window.
func (w QuotaWindow) Validate() error {
	if w.Samples < 2 || w.Samples > 100 || w.Size < 10*time.Millisecond || w.Size > time.Hour {
		return fmt.Errorf("netpath: quota window of %d samples of %v: want 2-100 samples of 10ms-1h", w.Samples, w.Size)
	}
	return nil
}

type rateSample struct {
	start time.Time
	value float64
}

// rateWindow is Kafka's sampled Rate: values go into the current sample
// until it is one window old; samples older than all of them together
// are forgotten; the rate is their sum over the elapsed time, counted as
// at least samples-1 full windows so a new sensor does not see a burst
// as an enormous rate.
type rateWindow struct {
	cfg     QuotaWindow
	samples []rateSample
	current int
}

func newRateWindow(cfg QuotaWindow) rateWindow {
	return rateWindow{cfg: cfg, samples: make([]rateSample, cfg.Samples)}
}

// full is the time every sample together covers.
func (w *rateWindow) full() time.Duration { return time.Duration(w.cfg.Samples) * w.cfg.Size }

func (w *rateWindow) purge(now time.Time) {
	for i := range w.samples {
		if s := &w.samples[i]; !s.start.IsZero() && now.Sub(s.start) >= w.full() {
			*s = rateSample{}
		}
	}
}

func (w *rateWindow) record(v float64, now time.Time) {
	s := &w.samples[w.current]
	if s.start.IsZero() {
		*s = rateSample{start: now}
	} else if now.Sub(s.start) >= w.cfg.Size {
		w.current = (w.current + 1) % len(w.samples)
		s = &w.samples[w.current]
		*s = rateSample{start: now}
	}
	s.value += v
}

// windowSize is the time the rate is measured over.
func (w *rateWindow) windowSize(now time.Time) time.Duration {
	w.purge(now)
	oldest := now
	for _, s := range w.samples {
		if !s.start.IsZero() && s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	if full := int(elapsed / w.cfg.Size); full < w.cfg.Samples-1 {
		elapsed += time.Duration(w.cfg.Samples-1-full) * w.cfg.Size
	}
	return elapsed
}

// rate is in units per second.
func (w *rateWindow) rate(now time.Time) float64 {
	size := w.windowSize(now)
	total := 0.0
	for _, s := range w.samples {
		total += s.value
	}
	return total / size.Seconds()
}

// throttle is Kafka's throttle time for the current rate over bound: how
// long the window must stretch for the rate to fall back to the bound,
// capped at the whole window.
func (w *rateWindow) throttle(bound float64, now time.Time) time.Duration {
	size := w.windowSize(now)
	return throttleFor(w.rate(now), bound, size, w.full())
}

func throttleFor(rate, bound float64, window, limit time.Duration) time.Duration {
	if rate <= bound || bound <= 0 {
		return 0
	}
	d := (rate - bound) / bound * float64(window)
	if d >= float64(limit) {
		return limit
	}
	return time.Duration(d).Round(time.Millisecond)
}

type quotaSensor struct {
	mu       sync.Mutex
	window   rateWindow
	lastUse  time.Time
	throttle atomic.Int64 // nanoseconds of throttle handed out
	// bytes is what was charged: bytes for the byte rates, nanoseconds
	// of handler time for the request quota.
	bytes atomic.Uint64
}

type quotaManager struct {
	window  QuotaWindow
	mu      sync.Mutex
	sensors [quotaTypeCount]map[metadata.QuotaEntity]*quotaSensor
	// lastSweep bounds the sweeps to one a minute, so many live client
	// ids under a default quota do not make each new one cost a sweep.
	lastSweep time.Time
	// throttled counts requests answered with a throttle, per type.
	throttled [quotaTypeCount]atomic.Uint64
}

func (q *quotaManager) sensor(typ int, e metadata.QuotaEntity, now time.Time) *quotaSensor {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.sensors[typ]
	if m == nil {
		m = map[metadata.QuotaEntity]*quotaSensor{}
		q.sensors[typ] = m
	}
	s := m[e]
	if s == nil {
		if len(m) >= quotaSweepAt && now.Sub(q.lastSweep) > time.Minute {
			q.lastSweep = now
			for k, old := range m {
				old.mu.Lock()
				idle := now.Sub(old.lastUse) > quotaSensorIdle
				old.mu.Unlock()
				if idle {
					delete(m, k)
				}
			}
		}
		s = &quotaSensor{window: newRateWindow(q.window)}
		m[e] = s
	}
	return s
}

// recordQuota charges n bytes of typ to the connection's quota and
// returns how long it is throttled (0: within the quota or no quota
// applies). A user is the SASL user name, ANONYMOUS without SASL.
func (s *Server) recordQuota(typ int, c *conn, clientID *string, n int, now time.Time) time.Duration {
	return s.chargeQuota(typ, c, clientID, float64(n), uint64(n), now)
}

// chargeQuota records v in the rate of typ (count goes to the total on
// /metrics) and returns the throttle.
func (s *Server) chargeQuota(typ int, c *conn, clientID *string, v float64, count uint64, now time.Time) time.Duration {
	img := s.node.MetadataImage()
	if img == nil || !img.HasClientQuotas() {
		return 0
	}
	user := strings.TrimPrefix(c.principal(), "User:")
	cid := ""
	if clientID != nil {
		cid = *clientID
	}
	e, bound, ok := img.ResolveQuota(quotaKeys[typ], user, cid)
	if !ok {
		return 0
	}
	sn := s.quotas.sensor(typ, e, now)
	sn.bytes.Add(count)
	sn.mu.Lock()
	sn.lastUse = now
	sn.window.record(v, now)
	d := sn.window.throttle(bound, now)
	sn.mu.Unlock()
	if d > 0 {
		sn.throttle.Add(int64(d))
		s.quotas.throttled[typ].Add(1)
	}
	return d
}

// mute stops the reader from reading another request for d (KIP-219).
func (c *conn) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		old := c.mutedUntil.Load()
		if old >= until || c.mutedUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// waitUnmuted blocks the reader while the connection is muted; false when
// the connection closed meanwhile.
func (c *conn) waitUnmuted() bool {
	until := c.mutedUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// sleepThrottle delays a pre-KIP-219 response by d; false when the
// connection is going away.
func sleepThrottle(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

func throttleMillis(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), math.MaxInt32))
}

var (
	descQuotaThrottle = prometheus.NewDesc("ringlog_quota_throttle_seconds_total",
		"Throttle time handed to clients by client quotas, per quota type and entity (the first 64 entities by name; the rest as entity=\"other\").",
		[]string{"type", "entity"}, nil)
	descQuotaRate = prometheus.NewDesc("ringlog_quota_byte_rate",
		"Bytes per second a quota entity is measured at (the quota window), per quota type and entity (same entity bound).",
		[]string{"type", "entity"}, nil)
	descQuotaBytes = prometheus.NewDesc("ringlog_quota_bytes_total",
		"Bytes charged to client quotas, per quota type and entity (same entity bound).",
		[]string{"type", "entity"}, nil)
	descQuotaThrottled = prometheus.NewDesc("ringlog_quota_throttled_requests_total",
		"Requests answered with a quota throttle, per quota type.", []string{"type"}, nil)
	descQuotaRequestPercent = prometheus.NewDesc("ringlog_quota_request_percentage",
		"Request handler time a quota entity is measured at (the quota window), in percent of one handler (same entity bound).",
		[]string{"entity"}, nil)
	descQuotaRequestTime = prometheus.NewDesc("ringlog_quota_request_time_seconds_total",
		"Request handler time charged to request quotas, per entity (same entity bound).",
		[]string{"entity"}, nil)
)

func (q *quotaManager) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQuotaThrottle, descQuotaRate, descQuotaBytes, descQuotaThrottled, descQuotaRequestPercent, descQuotaRequestTime} {
		ch <- d
	}
}

func (q *quotaManager) collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for typ := range quotaTypeCount {
		tn := quotaTypeNames[typ]
		ch <- prometheus.MustNewConstMetric(descQuotaThrottled, prometheus.CounterValue, float64(q.throttled[typ].Load()), tn)
		type row struct {
			name                  string
			throttle, rate, bytes float64
		}
		q.mu.Lock()
		rows := make([]row, 0, len(q.sensors[typ]))
		for e, s := range q.sensors[typ] {
			s.mu.Lock()
			rate := s.window.rate(now)
			s.mu.Unlock()
			rows = append(rows, row{e.String(), time.Duration(s.throttle.Load()).Seconds(), rate, float64(s.bytes.Load())})
		}
		q.mu.Unlock()
		// Entities under a default quota are one per client: bound the
		// label set, summing the rest into one series.
		sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
		if len(rows) > quotaMetricLimit {
			other := row{name: quotaOtherEntity}
			for _, r := range rows[quotaMetricLimit:] {
				other.throttle += r.throttle
				other.rate += r.rate
				other.bytes += r.bytes
			}
			rows = append(rows[:quotaMetricLimit], other)
		}
		for _, r := range rows {
			ch <- prometheus.MustNewConstMetric(descQuotaThrottle, prometheus.CounterValue, r.throttle, tn, r.name)
			if typ == quotaTypeRequest {
				ch <- prometheus.MustNewConstMetric(descQuotaRequestPercent, prometheus.GaugeValue, r.rate, r.name)
				ch <- prometheus.MustNewConstMetric(descQuotaRequestTime, prometheus.CounterValue, r.bytes/1e9, r.name)
				continue
			}
			ch <- prometheus.MustNewConstMetric(descQuotaRate, prometheus.GaugeValue, r.rate, tn, r.name)
			ch <- prometheus.MustNewConstMetric(descQuotaBytes, prometheus.CounterValue, r.bytes, tn, r.name)
		}
	}
}

const (
	produceKey = 0
	fetchKey   = 1
)

// throttleProduce sets throttle_time_ms on a produce reply; before v6
// (KIP-219) the response itself is held back for d as well.
func throttleProduce(rep reply, version int16, d time.Duration) reply {
	if rep.noResponse || rep.resolve == nil {
		return rep
	}
	resolve := rep.resolve
	rep.resolve = func(done <-chan struct{}) *response {
		resp := resolve(done)
		if resp == nil {
			return nil
		}
		if pr, ok := resp.msg.(*kmsg.ProduceResponse); ok {
			pr.ThrottleMillis = throttleMillis(d)
		}
		if version < 6 && !sleepThrottle(d, done) {
			resp.releaseAll()
			return nil
		}
		return resp
	}
	return rep
}

// throttleFetch charges a consumer fetch response to its quota, writes
// the throttle into it and mutes the connection; before v8 the response
// is held back too. False when the connection went away while it waited.
// Unlike Kafka, which answers a throttled fetch with no records, the
// records already read are sent: the mute alone holds the average rate.
func (c *conn) throttleFetch(p pendingReply, resp *response) bool {
	req, ok := p.req.(*kmsg.FetchRequest)
	if !ok || req.ReplicaID >= 0 || len(resp.parts) == 0 || len(resp.parts[0].buf) < 4 || resp.parts[0].file != nil {
		return true
	}
	n := 0
	for _, part := range resp.parts {
		if part.file != nil {
			n += int(part.file.Len())
		} else {
			n += len(part.buf)
		}
	}
	d := c.s.recordQuota(quotaTypeFetch, c, p.hdr.clientID, n, time.Now())
	if d <= 0 {
		return true
	}
	// throttle_time_ms is the first field of every fetch response we
	// serve (v4+).
	binary.BigEndian.PutUint32(resp.parts[0].buf[0:4], uint32(throttleMillis(d)))
	c.mute(d)
	if req.Version < 8 {
		return sleepThrottle(d, c.done)
	}
	return true
}
