package netpath

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHandlerTime(t *testing.T) {
	for _, tc := range []struct{ reader, writer, parked, want time.Duration }{
		{time.Millisecond, 0, 0, time.Millisecond},
		{time.Millisecond, 2 * time.Millisecond, 0, 3 * time.Millisecond},
		// A long poll of 500 ms that read for 1 ms is charged 1.2 ms.
		{200 * time.Microsecond, 501 * time.Millisecond, 500 * time.Millisecond, 1200 * time.Microsecond},
		// Clock steps never make a negative charge.
		{0, time.Millisecond, 2 * time.Millisecond, 0},
	} {
		if got := handlerTime(tc.reader, tc.writer, tc.parked); got != tc.want {
			t.Fatalf("handlerTime(%v, %v, %v) = %v, want %v", tc.reader, tc.writer, tc.parked, got, tc.want)
		}
	}
	if got := percentSeconds(250 * time.Millisecond); got != 25 {
		t.Fatalf("250 ms is %v percent-seconds, want 25", got)
	}
}

// Handler time charged in percent-seconds makes the window's rate the
// percentage of one handler, and Kafka's formula gives the throttle: a
// client using 30 % of a handler against a 10 % quota over a 10 s window
// is held 20 s, capped at the full window.
func TestRequestQuotaThrottle(t *testing.T) {
	w := newRateWindow(QuotaWindow{Samples: 11, Size: time.Second})
	t0 := time.Unix(1000, 0)
	// 300 ms of handler time a second for 11 s: 30 %.
	for i := range 11 {
		w.record(percentSeconds(300*time.Millisecond), t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(10*time.Second + 999*time.Millisecond)
	if r := w.rate(now); math.Abs(r-30) > 0.1 {
		t.Fatalf("rate %v %%, want 30", r)
	}
	if d := w.throttle(50, now); d != 0 {
		t.Fatalf("within a 50 %% quota: throttled %v", d)
	}
	if d := w.throttle(20, now); d < 5400*time.Millisecond || d > 5600*time.Millisecond {
		t.Fatalf("30 %% against 20 %%: throttle %v, want about 5.5 s", d)
	}
	if d := w.throttle(1, now); d != w.full() {
		t.Fatalf("30 %% against 1 %%: throttle %v, want the full window", d)
	}
}

// A greedy client issuing 1 ms requests back to back, each costing 100 µs
// of handler time, uses 10 % of a handler; under a 2 % quota the mute
// holds it to about a fifth of its unthrottled request rate.
func TestRequestQuotaHoldsGreedyClient(t *testing.T) {
	w := newRateWindow(QuotaWindow{Samples: 11, Size: 100 * time.Millisecond})
	start := time.Unix(5000, 0)
	n := 0
	for now := start; now.Before(start.Add(20 * time.Second)); n++ {
		w.record(percentSeconds(100*time.Microsecond), now)
		now = now.Add(time.Millisecond + w.throttle(2, now))
	}
	if rate := float64(n) / 20; rate < 150 || rate > 260 {
		t.Fatalf("%v requests/s, want about 200 (1000 unthrottled)", rate)
	}
}

func TestSetThrottleKeepsTheLarger(t *testing.T) {
	md := kmsg.NewPtrMetadataResponse()
	resp := &response{msg: md}
	setThrottle(resp, 30*time.Millisecond)
	if md.ThrottleMillis != 30 {
		t.Fatalf("throttle %d, want 30", md.ThrottleMillis)
	}
	setThrottle(resp, 10*time.Millisecond)
	if md.ThrottleMillis != 30 {
		t.Fatalf("a smaller request throttle lowered a larger one: %d", md.ThrottleMillis)
	}
	// A fetch body carries throttle_time_ms in its first four bytes,
	// maybe already set by the consumer byte rate.
	body := encodeFetchError(12, 0)
	binary.BigEndian.PutUint32(body, 50)
	fr := &response{parts: []responsePart{{buf: body}}}
	setThrottle(fr, 20*time.Millisecond)
	if got := binary.BigEndian.Uint32(body); got != 50 {
		t.Fatalf("fetch throttle %d, want the byte-rate 50", got)
	}
	setThrottle(fr, 80*time.Millisecond)
	if got := binary.BigEndian.Uint32(body); got != 80 {
		t.Fatalf("fetch throttle %d, want 80", got)
	}
}

func TestRequestQuotaExempt(t *testing.T) {
	replica := kmsg.NewPtrFetchRequest()
	replica.ReplicaID = 2
	consumer := kmsg.NewPtrFetchRequest()
	consumer.ReplicaID = -1
	follower := kmsg.NewPtrOffsetForLeaderEpochRequest()
	follower.ReplicaID = 1
	for _, tc := range []struct {
		req    kmsg.Request
		exempt bool
	}{
		{kmsg.NewPtrApiVersionsRequest(), true},
		{kmsg.NewPtrSASLHandshakeRequest(), true},
		{kmsg.NewPtrSASLAuthenticateRequest(), true},
		{kmsg.NewPtrWriteTxnMarkersRequest(), true},
		{replica, true},
		{follower, true},
		{consumer, false},
		{kmsg.NewPtrMetadataRequest(), false},
		{kmsg.NewPtrListOffsetsRequest(), false},
		{kmsg.NewPtrProduceRequest(), false},
	} {
		if got := requestQuotaExempt(tc.req.Key(), tc.req); got != tc.exempt {
			t.Fatalf("%s: exempt %v, want %v", kmsg.NameForKey(tc.req.Key()), got, tc.exempt)
		}
	}
	if !requestQuotaExempt(apiVersionsKey, nil) {
		t.Fatal("an ApiVersions above our range (no decoded request) is charged")
	}
}

// Request quota entities get their own series, bounded like the byte
// rates', with handler time in seconds.
func TestRequestQuotaMetrics(t *testing.T) {
	q := &quotaManager{window: DefaultQuotaWindow()}
	now := time.Now()
	for i := range 100 {
		s := q.sensor(quotaTypeRequest, metadata.QuotaEntity{ClientID: metadata.Specific(fmt.Sprintf("c%03d", i))}, now)
		s.bytes.Add(uint64(time.Second))
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(quotaCollector{q})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seconds := map[string]float64{}
	series := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "ringlog_quota_request_time_seconds_total":
			for _, m := range mf.GetMetric() {
				seconds[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		case "ringlog_quota_request_percentage":
			series = len(mf.GetMetric())
		case "ringlog_quota_bytes_total", "ringlog_quota_byte_rate":
			t.Fatalf("%s has request quota series", mf.GetName())
		}
	}
	if len(seconds) != quotaMetricLimit+1 || series != quotaMetricLimit+1 || seconds[quotaOtherEntity] != 100-quotaMetricLimit || seconds["client-id=c000"] != 1 {
		t.Fatalf("%d time series, %d percentage series, other=%v", len(seconds), series, seconds[quotaOtherEntity])
	}
}

// A long poll that finds nothing is parked for its wait: the request
// quota is charged the reads, not the 300 ms.
func TestFetchLongPollIsParked(t *testing.T) {
	srv, _ := singleNodeServer(t, "idle")
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MinBytes, req.MaxBytes, req.MaxWaitMillis = 11, -1, 1, 1<<20, 300
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "idle"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var parked time.Duration
	t0 := time.Now()
	srv.fetch(req, t0.Add(300*time.Millisecond), make(chan struct{}), nil, &parked).releaseAll()
	took := time.Since(t0)
	if parked < 250*time.Millisecond || took-parked > 100*time.Millisecond {
		t.Fatalf("took %v, parked %v: want the wait parked and little else", took, parked)
	}
}
