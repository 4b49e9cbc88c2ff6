package loadgen

import (
	"fmt"
	"io"
	"math"

	"github.com/ringlog/ringlog/results"
)

// SizeInput is the workload a capacity estimate is made for.
type SizeInput struct {
	PeakRate      float64 // msg/s
	AvgRate       float64 // msg/s
	MessageBytes  float64
	RetentionDays float64
	Copies        float64 // replication factor
}

// Capacity is the raw arithmetic, in bytes and bytes per second.
type Capacity struct {
	PeakProducerBps    float64 // peak payload produced
	ReplicationBps     float64 // peak payload copied to followers
	AggregateWriteBps  float64 // all copies written at peak
	AvgProducerBps     float64
	AvgPerDayBytes     float64 // average ingest per day, one copy
	RetainedBytes      float64 // all copies over the retention window
	BrokersForPeak     int     // 0 without a measurement
	MeasuredBrokerWBps float64 // per-broker write rate from find-max
}

// Size computes the capacity table.
func Size(in SizeInput) Capacity {
	peak := in.PeakRate * in.MessageBytes
	avg := in.AvgRate * in.MessageBytes
	perDay := avg * 86400
	return Capacity{
		PeakProducerBps:   peak,
		ReplicationBps:    peak * (in.Copies - 1),
		AggregateWriteBps: peak * in.Copies,
		AvgProducerBps:    avg,
		AvgPerDayBytes:    perDay,
		RetainedBytes:     perDay * in.RetentionDays * in.Copies,
	}
}

// WithMeasurement estimates brokers for the peak from a find-max result: the
// measured run's per-broker write rate (all copies) against the aggregate
// write rate needed.
func (c *Capacity) WithMeasurement(r *results.Result, measuredBrokers int) error {
	if r.FindMax == nil || r.FindMax.MaxPassingRate <= 0 {
		return fmt.Errorf("result has no passing find-max rate")
	}
	if measuredBrokers < 1 {
		measuredBrokers = 1
	}
	rf := 1.0
	if v, ok := r.Workload["replication_factor"]; ok {
		fmt.Sscan(v, &rf)
	}
	c.MeasuredBrokerWBps = r.FindMax.MaxPassingRate * float64(r.MessageSize) * rf / float64(measuredBrokers)
	c.BrokersForPeak = int(math.Ceil(c.AggregateWriteBps / c.MeasuredBrokerWBps))
	return nil
}

// WriteSize prints the table and its caveats.
func WriteSize(w io.Writer, in SizeInput, c Capacity, r *results.Result) {
	gb := func(v float64) string { return fmt.Sprintf("%.4g GB/s", v/1e9) }
	fmt.Fprintf(w, "Workload: %.0f msg/s peak, %.0f msg/s average, %.0f-byte messages, %.4g days retention, %.0f copies\n",
		in.PeakRate, in.AvgRate, in.MessageBytes, in.RetentionDays, in.Copies)
	fmt.Fprintf(w, "  peak producer payload     %s\n", gb(c.PeakProducerBps))
	fmt.Fprintf(w, "  follower replication      %s  (%.0f extra copies of the peak)\n", gb(c.ReplicationBps), in.Copies-1)
	fmt.Fprintf(w, "  aggregate writes at peak  %s  (every copy)\n", gb(c.AggregateWriteBps))
	fmt.Fprintf(w, "  average ingest            %s = %.4g TB/day (one copy)\n", gb(c.AvgProducerBps), c.AvgPerDayBytes/1e12)
	fmt.Fprintf(w, "  retained on disk          %.5g TB  (average per day x days x copies)\n", c.RetainedBytes/1e12)
	fmt.Fprintln(w, "Units are decimal (1 GB = 10^9 bytes, 1 TB = 10^12 bytes) and count message payload only.")
	fmt.Fprintln(w, "Not included: compression (shrinks all figures), protocol and record-batch framing,")
	fmt.Fprintln(w, "offset and time indexes, segment and filesystem overhead, headroom for failures and")
	fmt.Fprintln(w, "growth, and consumer read traffic (each consumer group adds the producer rate in egress).")
	if c.BrokersForPeak > 0 {
		fmt.Fprintf(w, "Measured (%s): %.0f msg/s passed the %.3g ms p99 target = %s of writes per broker, all copies.\n",
			r.Label, r.FindMax.MaxPassingRate, r.FindMax.TargetP99Ms, gb(c.MeasuredBrokerWBps))
		fmt.Fprintf(w, "Brokers for the peak: %d, bounded by measured per-broker write throughput at the latency\n", c.BrokersForPeak)
		fmt.Fprintln(w, "target (aggregate writes / per-broker writes). Storage, network and consumer load can")
		fmt.Fprintln(w, "require more; add headroom so the loss of one broker keeps the rest under the target.")
		if r.GeneratorSaturated {
			fmt.Fprintln(w, "WARNING: the measurement's generator was saturated; the broker may do better.")
		}
	}
}
