package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/ringlog/ringlog/results"
)

// SizeInput is the workload a capacity estimate is made for.
type SizeInput struct {
	PeakRate      float64 `json:"peak_rate"` // msg/s
	AvgRate       float64 `json:"avg_rate"`  // msg/s
	MessageBytes  float64 `json:"message_bytes"`
	RetentionDays float64 `json:"retention_days"`
	Copies        float64 `json:"copies"` // replication factor

	// ObjectStore sizes a remote tier: the leaders upload every
	// sealed segment once, the store keeps it for the whole retention, and
	// broker disks keep only the hot window.
	ObjectStore bool `json:"object_store,omitempty"`
	// LocalRetentionHours is the hot window kept on broker disks
	// (local.retention.ms); nil keeps the whole retention local, as
	// Kafka's default local.retention.ms=-2 does. Only with ObjectStore:
	// without a remote tier, data past the window would be gone.
	LocalRetentionHours *float64 `json:"local_retention_hours,omitempty"`
	// ObjectStoreCopies counts the store's copies of each byte: 1 for
	// S3-style stores, which replicate internally and bill logical bytes;
	// more for the raw bytes of a store replicated by hand.
	ObjectStoreCopies float64 `json:"object_store_copies,omitempty"`
}

// Validate checks the inputs the arithmetic needs.
func (in SizeInput) Validate() error {
	if in.Copies < 1 || in.MessageBytes <= 0 || in.PeakRate < 0 || in.AvgRate < 0 || in.RetentionDays < 0 {
		return errors.New("size: copies >= 1, message-bytes > 0 and non-negative rates and days")
	}
	if in.PeakRate < in.AvgRate {
		return fmt.Errorf("size: --peak-rate %g is below --avg-rate %g: the peak is the highest rate the cluster must take, the average what fills its disks", in.PeakRate, in.AvgRate)
	}
	if !in.ObjectStore {
		if in.LocalRetentionHours != nil {
			return errors.New("size: --local-retention needs --object-store: without a remote tier, data older than the hot window would be deleted")
		}
		if in.ObjectStoreCopies != 0 {
			return errors.New("size: --object-store-copies needs --object-store")
		}
		return nil
	}
	if in.ObjectStoreCopies < 1 {
		return fmt.Errorf("size: --object-store-copies %g: want >= 1", in.ObjectStoreCopies)
	}
	if h := in.LocalRetentionHours; h != nil {
		// Kafka refuses local.retention.ms above retention.ms too: the
		// window is part of the retention, not added to it.
		if *h < 0 || math.IsNaN(*h) {
			return fmt.Errorf("size: --local-retention %gh: want >= 0", *h)
		}
		if *h > in.RetentionDays*24 {
			return fmt.Errorf("size: --local-retention %gh is longer than --retention-days %g (%gh): the hot window is part of the retention",
				*h, in.RetentionDays, in.RetentionDays*24)
		}
	}
	return nil
}

// Capacity is the raw arithmetic, in bytes and bytes per second.
type Capacity struct {
	PeakProducerBps    float64 `json:"peak_producer_bps"`   // peak payload produced
	ReplicationBps     float64 `json:"replication_bps"`     // peak payload copied to followers
	AggregateWriteBps  float64 `json:"aggregate_write_bps"` // all copies written at peak
	AvgProducerBps     float64 `json:"avg_producer_bps"`
	AvgPerDayBytes     float64 `json:"avg_per_day_bytes"`    // average ingest per day, one copy
	RetainedBytes      float64 `json:"retained_bytes"`       // all copies over the retention window
	Copies             float64 `json:"copies"`               // replication factor: the fewest brokers
	BrokersForPeak     int     `json:"brokers_for_peak"`     // 0 without a measurement: the largest of Bounds
	BoundBy            string  `json:"bound_by"`             // the resource of the largest bound
	MeasuredBrokerWBps float64 `json:"measured_broker_wbps"` // per-broker write rate of the measured run
	MeasuredBrokers    int     `json:"measured_brokers"`     // brokers in the measured cluster
	MeasuredRate       float64 `json:"measured_rate"`        // msg/s of the measured run the rate per broker comes from
	MeasuredFrom       string  `json:"measured_from"`        // which figure MeasuredRate is
	TargetP99Ms        float64 `json:"target_p99_ms"`        // the measured run's latency target
	Bounds             []Bound `json:"bounds"`               // brokers each resource needs, largest first
	// Tiered is the remote tier's arithmetic; nil without ObjectStore, so
	// the figures above and their JSON stay as they were.
	Tiered *TieredCapacity `json:"tiered,omitempty"`
}

// Bound is the broker count one resource needs on its own.
type Bound struct {
	Resource string `json:"resource"`
	Brokers  int    `json:"brokers"`
	Detail   string `json:"detail"`
}

// Resources are per-broker limits beyond the measured write rate; zero
// values are not considered.
type Resources struct {
	DiskBytes      float64 // usable disk per broker
	NICBitsPerSec  float64 // network per broker, each direction
	ConsumerGroups float64 // groups reading the whole stream (egress)
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
		Copies:            in.Copies,
		Tiered:            sizeTiered(in),
	}
}

// WithMeasurement estimates brokers for the peak from a find-max or
// fixed-rate result (see Diagnose): the run's per-broker write rate (all
// copies) against the aggregate write rate needed, then the other resources
// given, and names the one that needs the most brokers. measuredBrokers <= 0
// takes the broker count the run recorded from the cluster's metadata (1
// when it has none).
func (c *Capacity) WithMeasurement(r *results.Result, measuredBrokers int, res Resources) error {
	d, err := Diagnose(r, DiagnoseOptions{Brokers: measuredBrokers, NICBitsPerSec: res.NICBitsPerSec})
	if err != nil {
		return err
	}
	c.WithDiagnosis(d, res)
	return nil
}

// WithDiagnosis estimates brokers for the peak from the per-broker figures
// of a diagnosed run.
func (c *Capacity) WithDiagnosis(d *Diagnosis, res Resources) {
	c.MeasuredBrokers = d.Brokers
	c.MeasuredBrokerWBps = d.BrokerWriteBps
	c.MeasuredRate, c.MeasuredFrom, c.TargetP99Ms = d.Rate, d.RateFrom, d.TargetP99Ms
	c.Bounds = []Bound{{
		Resource: "measured write throughput at the latency target",
		Brokers:  int(math.Ceil(c.AggregateWriteBps / c.MeasuredBrokerWBps)),
		Detail:   fmt.Sprintf("%.4g GB/s of writes needed / %.4g GB/s per broker", c.AggregateWriteBps/1e9, c.MeasuredBrokerWBps/1e9),
	}}
	c.Bounds = append(c.Bounds, c.resourceBounds(res)...)
	sort.SliceStable(c.Bounds, func(i, j int) bool { return c.Bounds[i].Brokers > c.Bounds[j].Brokers })
	c.BrokersForPeak, c.BoundBy = c.Bounds[0].Brokers, c.Bounds[0].Resource
	c.outageHours(res)
}

// rate prints bytes per second in GB/s, or for small workloads (under
// 10 MB/s, where GB/s would read 1e-05) in the largest decimal unit that
// keeps the figure at 1 or more.
func rate(bps float64) string {
	if bps == 0 || bps >= 1e7 {
		return fmt.Sprintf("%.4g GB/s", bps/1e9)
	}
	for _, u := range []struct {
		div  float64
		name string
	}{{1e6, "MB/s"}, {1e3, "kB/s"}} {
		if bps >= u.div {
			return fmt.Sprintf("%.4g %s", bps/u.div, u.name)
		}
	}
	return fmt.Sprintf("%.4g B/s", bps)
}

// WriteSize prints the table and its caveats, and ends with the bottom
// line: the brokers needed and what binds them.
func WriteSize(w io.Writer, in SizeInput, c Capacity, r *results.Result) {
	gb := rate
	fmt.Fprintf(w, "Workload: %.0f msg/s peak, %.0f msg/s average, %.0f-byte messages, %.4g days retention, %.0f copies\n",
		in.PeakRate, in.AvgRate, in.MessageBytes, in.RetentionDays, in.Copies)
	fmt.Fprintf(w, "  peak producer payload     %s\n", gb(c.PeakProducerBps))
	fmt.Fprintf(w, "  follower replication      %s  (%.0f extra copies of the peak)\n", gb(c.ReplicationBps), in.Copies-1)
	fmt.Fprintf(w, "  aggregate writes at peak  %s  (every copy)\n", gb(c.AggregateWriteBps))
	fmt.Fprintf(w, "  average ingest            %s = %.4g TB/day (one copy)\n", gb(c.AvgProducerBps), c.AvgPerDayBytes/1e12)
	if c.Tiered == nil {
		fmt.Fprintf(w, "  retained on disk          %.5g TB  (average per day x days x copies)\n", c.RetainedBytes/1e12)
	} else {
		fmt.Fprintf(w, "  retained, all copies      %.5g TB  (average per day x days x copies: all on broker disks without the remote tier)\n", c.RetainedBytes/1e12)
		writeTiered(w, in, c)
	}
	fmt.Fprintln(w, "Units are decimal (1 GB = 10^9 bytes, 1 TB = 10^12 bytes) and count message payload only.")
	fmt.Fprintln(w, "Not included: compression (shrinks all figures), protocol and record-batch framing,")
	fmt.Fprintln(w, "offset and time indexes, segment and filesystem overhead, and headroom for failures and")
	fmt.Fprintln(w, "growth. Consumer reads (each consumer group adds the producer rate in egress) count in")
	fmt.Fprintln(w, "the network bound only (--nic-gbps, --consumer-groups); the figures above are writes.")
	if c.BrokersForPeak > 0 {
		fmt.Fprintf(w, "Measured (%s): %.0f msg/s (%s, %.4g ms p99 target) on %d broker(s) = %s of writes per broker, all copies.\n",
			r.Label, c.MeasuredRate, c.MeasuredFrom, c.TargetP99Ms, c.MeasuredBrokers, gb(c.MeasuredBrokerWBps))
		fmt.Fprintln(w, "Brokers each resource needs:")
		for _, b := range c.Bounds {
			fmt.Fprintf(w, "  %-50s %5d  (%s)\n", b.Resource, b.Brokers, b.Detail)
		}
		if len(c.Bounds) < 4 {
			fmt.Fprintln(w, "Give --disk-per-broker and --nic-gbps to weigh disk and network too.")
		}
		fmt.Fprintln(w, "The measured rate includes whatever bound that run (see \"Limited by\" above); add")
		fmt.Fprintln(w, "headroom so the loss of one broker keeps the rest under the target.")
		fmt.Fprintf(w, "Bottom line: %d brokers for the peak, bound by %s.\n", c.BrokersForPeak, c.BoundBy)
		return
	}
	if len(c.Bounds) > 0 {
		fmt.Fprintln(w, "Brokers each resource needs (no measured run: --from adds the write-throughput bound):")
		for _, b := range c.Bounds {
			fmt.Fprintf(w, "  %-50s %5d  (%s)\n", b.Resource, b.Brokers, b.Detail)
		}
		fmt.Fprintf(w, "Bottom line: at least %d brokers, bound by %s; a measured run (--from) gives the write-throughput bound.\n",
			c.Bounds[0].Brokers, c.Bounds[0].Resource)
		return
	}
	fmt.Fprintf(w, "Bottom line: at least %.0f brokers (one per copy); give --from (a measured run), --disk-per-broker\n", math.Ceil(in.Copies))
	fmt.Fprintln(w, "or --nic-gbps for the brokers the load needs.")
}
