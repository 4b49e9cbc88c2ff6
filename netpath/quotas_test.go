package netpath

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ringlog/ringlog/controller/metadata"
)

func TestRateWindow(t *testing.T) {
	w := newRateWindow(DefaultQuotaWindow())
	t0 := time.Unix(1000, 0)
	w.record(5000, t0)
	// A new sensor is measured over at least samples-1 windows.
	if got := w.rate(t0); got != 500 {
		t.Fatalf("rate of a new sensor %v, want 500", got)
	}
	for i := 1; i <= 20; i++ {
		w.record(1000, t0.Add(time.Duration(i)*time.Second))
	}
	// 11 one-second samples of 1000 over 10.5 s.
	now := t0.Add(20*time.Second + 500*time.Millisecond)
	if got := w.rate(now); math.Abs(got-11000/10.5) > 1 {
		t.Fatalf("steady rate %v, want %v", got, 11000/10.5)
	}
	// Everything is forgotten once it is older than the whole window.
	if got := w.rate(t0.Add(40 * time.Second)); got != 0 {
		t.Fatalf("rate after idling %v", got)
	}
}

func TestThrottleFor(t *testing.T) {
	const limit = 11 * time.Second
	for _, tc := range []struct {
		rate, bound  float64
		window, want time.Duration
	}{
		{100, 100, 10 * time.Second, 0},
		{150, 100, 10 * time.Second, 5 * time.Second},
		{110, 100, 10 * time.Second, time.Second},
		{1e12, 1, 10 * time.Second, limit}, // capped, no overflow
	} {
		if got := throttleFor(tc.rate, tc.bound, tc.window, limit); got != tc.want {
			t.Fatalf("throttleFor(%v, %v, %v) = %v, want %v", tc.rate, tc.bound, tc.window, got, tc.want)
		}
	}
}

// greedy simulates a client that sends 256 KiB requests back to back,
// each 1 ms apart unless the connection is muted, and returns the times
// its requests were accepted.
func greedy(w QuotaWindow, bound float64, d time.Duration) (time.Time, []time.Time) {
	rw := newRateWindow(w)
	start := time.Unix(5000, 0)
	var times []time.Time
	for now := start; now.Before(start.Add(d)); {
		rw.record(256<<10, now)
		times = append(times, now)
		now = now.Add(time.Millisecond + rw.throttle(bound, now))
	}
	return start, times
}

func rateBetween(times []time.Time, a, b time.Time) float64 {
	n := 0
	for _, x := range times {
		if !x.Before(a) && x.Before(b) {
			n++
		}
	}
	return float64(n) * (256 << 10) / b.Sub(a).Seconds()
}

// A client that sends as fast as the mute lets it is held to the bound.
// With Kafka's window (11 x 1 s) it is an average over the window: the
// client bursts about 10 s worth of quota, then is held back, so the
// bound holds over whole 11 s periods. Short samples make it smooth.
func TestQuotaHoldsGreedyClient(t *testing.T) {
	const bound = 5e6
	start, times := greedy(DefaultQuotaWindow(), bound, 56*time.Second)
	if r := rateBetween(times, start, start.Add(55*time.Second)); math.Abs(r-bound)/bound > 0.05 {
		t.Fatalf("default window: %.0f B/s over 55 s, want %.0f within 5%%", r, bound)
	}
	start, times = greedy(QuotaWindow{Samples: 11, Size: 50 * time.Millisecond}, bound, 40*time.Second)
	for off := 2 * time.Second; off < 30*time.Second; off += 37 * time.Millisecond {
		a := start.Add(off)
		if r := rateBetween(times, a, a.Add(8*time.Second)); math.Abs(r-bound)/bound > 0.05 {
			t.Fatalf("50 ms samples: %.0f B/s over 8 s from %v, want %.0f within 5%%", r, off, bound)
		}
	}
}

// The quota series are bounded however many client ids a default quota
// covers: the first quotaMetricLimit entities by name, the rest summed.
func TestQuotaMetricsBounded(t *testing.T) {
	q := &quotaManager{window: DefaultQuotaWindow()}
	now := time.Now()
	for i := range 100 {
		s := q.sensor(quotaTypeProduce, metadata.QuotaEntity{ClientID: metadata.Specific(fmt.Sprintf("c%03d", i))}, now)
		s.bytes.Add(10)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(quotaCollector{q})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	entities := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "ringlog_quota_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "entity" {
					entities[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(entities) != quotaMetricLimit+1 || entities[quotaOtherEntity] != 10*(100-quotaMetricLimit) {
		t.Fatalf("%d entities, other=%v", len(entities), entities[quotaOtherEntity])
	}
}

type quotaCollector struct{ q *quotaManager }

func (c quotaCollector) Describe(ch chan<- *prometheus.Desc) { c.q.describe(ch) }
func (c quotaCollector) Collect(ch chan<- prometheus.Metric) { c.q.collect(ch) }
