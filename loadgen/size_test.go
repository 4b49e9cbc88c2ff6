package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/results"
)

func TestSizeDefaults(t *testing.T) {
	in := SizeInput{PeakRate: 5_000_000, AvgRate: 500_000, MessageBytes: 1000, RetentionDays: 7, Copies: 3}
	c := Size(in)
	checkFigures(t, []figure{
		{"peak producer", c.PeakProducerBps, 5e9},
		{"replication", c.ReplicationBps, 10e9},
		{"aggregate", c.AggregateWriteBps, 15e9},
		{"average", c.AvgProducerBps, 0.5e9},
		{"per day", c.AvgPerDayBytes, 43.2e12},
		{"retained", c.RetainedBytes, 907.2e12},
	})
	var out bytes.Buffer
	WriteSize(&out, in, c, nil)
	for _, want := range []string{"5 GB/s", "10 GB/s", "15 GB/s", "0.5 GB/s = 43.2 TB/day", "907.2 TB", "compression", "indexes", "consumer"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	r := &results.Result{Label: "fm", MessageSize: 1000, Workload: map[string]string{"replication_factor": "3"},
		FindMax: &results.FindMax{MaxPassingRate: 400_000, TargetP99Ms: 10}}
	// 400k msg/s x 1000 B x 3 copies over 3 brokers = 0.4 GB/s per broker; 15/0.4 = 37.5 -> 38.
	if err := c.WithMeasurement(r, 3, Resources{}); err != nil {
		t.Fatal(err)
	}
	if c.BrokersForPeak != 38 || !strings.Contains(c.BoundBy, "write throughput") {
		t.Fatalf("brokers %d bounded by %q, want 38 by write throughput", c.BrokersForPeak, c.BoundBy)
	}
	// The broker count comes from the run's metadata when not given.
	r.Workload["cluster_brokers"] = "3"
	c = Size(in)
	if err := c.WithMeasurement(r, 0, Resources{}); err != nil || c.BrokersForPeak != 38 || c.MeasuredBrokers != 3 {
		t.Fatalf("from cluster_brokers: %d brokers, measured on %d (%v)", c.BrokersForPeak, c.MeasuredBrokers, err)
	}
	// Disk: 907.2 TB / 10 TB = 91 brokers, more than throughput needs.
	// Network at 25 Gbit/s: in 15 GB/s, out 10+5x2 = 20 GB/s -> 160 Gbit/s / 25 = 6.4 -> 7.
	c = Size(in)
	if err := c.WithMeasurement(r, 3, Resources{DiskBytes: 10e12, NICBitsPerSec: 25e9, ConsumerGroups: 2}); err != nil {
		t.Fatal(err)
	}
	if c.BrokersForPeak != 91 || c.BoundBy != "disk" {
		t.Fatalf("brokers %d bounded by %q, want 91 by disk", c.BrokersForPeak, c.BoundBy)
	}
	want := map[string]int{"disk": 91, "network": 7}
	for _, b := range c.Bounds {
		if n, ok := want[b.Resource]; ok && b.Brokers != n {
			t.Errorf("%s bound %d brokers, want %d", b.Resource, b.Brokers, n)
		}
	}
	out.Reset()
	WriteSize(&out, in, c, r)
	if !strings.Contains(out.String(), "Bottom line: 91 brokers for the peak, bound by disk.") || !strings.Contains(out.String(), "network") {
		t.Fatalf("size output does not name the bounds:\n%s", out.String())
	}
}

// seedInput is the design's workload (5 M msg/s peak, 500 k average,
// 1,000 B, 7 days, RF 3).
func seedInput() SizeInput {
	return SizeInput{PeakRate: 5_000_000, AvgRate: 500_000, MessageBytes: 1000, RetentionDays: 7, Copies: 3}
}

func hours(h float64) *float64 { return &h }

// figure is one computed value against the expected one.
type figure struct {
	what      string
	got, want float64
}

func checkFigures(t *testing.T, fs []figure) {
	t.Helper()
	for _, f := range fs {
		if !near(f.got, f.want) {
			t.Errorf("%s = %v, want %v", f.what, f.got, f.want)
		}
	}
}

// near: equal to 1e-12 relative (decimal figures are not exact in binary).
func near(got, want float64) bool {
	if want == 0 {
		return got == 0
	}
	d := got/want - 1
	return d < 1e-12 && d > -1e-12
}

// findMax is a measured run whose brokers each wrote perBrokerBps (all
// copies) at the target: RF 3 over 3 brokers.
func findMax(perBrokerBps float64) *results.Result {
	return &results.Result{Label: "fm", MessageSize: 1000, Workload: map[string]string{"replication_factor": "3", "cluster_brokers": "3"},
		FindMax: &results.FindMax{MaxPassingRate: perBrokerBps / 1000, TargetP99Ms: 10}}
}

// TestSizeNoObjectStoreUnchanged: without --object-store the figures, the
// text and the JSON are exactly those of the all-local sizing.
func TestSizeNoObjectStoreUnchanged(t *testing.T) {
	in := seedInput()
	c := Size(in)
	want := Capacity{PeakProducerBps: 5e9, ReplicationBps: 10e9, AggregateWriteBps: 15e9, AvgProducerBps: 0.5e9,
		AvgPerDayBytes: 43.2e12, RetainedBytes: 907.2e12}
	if c.Tiered != nil || !near(c.RetainedBytes, want.RetainedBytes) || !near(c.AvgPerDayBytes, want.AvgPerDayBytes) ||
		c.PeakProducerBps != want.PeakProducerBps || c.ReplicationBps != want.ReplicationBps || c.AggregateWriteBps != want.AggregateWriteBps {
		t.Fatalf("capacity %+v, want %+v", c, want)
	}
	var out bytes.Buffer
	WriteSize(&out, in, c, nil)
	const text = `Workload: 5000000 msg/s peak, 500000 msg/s average, 1000-byte messages, 7 days retention, 3 copies
  peak producer payload     5 GB/s
  follower replication      10 GB/s  (2 extra copies of the peak)
  aggregate writes at peak  15 GB/s  (every copy)
  average ingest            0.5 GB/s = 43.2 TB/day (one copy)
  retained on disk          907.2 TB  (average per day x days x copies)
Units are decimal (1 GB = 10^9 bytes, 1 TB = 10^12 bytes) and count message payload only.
Not included: compression (shrinks all figures), protocol and record-batch framing,
offset and time indexes, segment and filesystem overhead, and headroom for failures and
growth. Consumer reads (each consumer group adds the producer rate in egress) count in
the network bound only (--nic-gbps, --consumer-groups); the figures above are writes.
Bottom line: at least 3 brokers (one per copy); give --from (a measured run), --disk-per-broker
or --nic-gbps for the brokers the load needs.
`
	if out.String() != text {
		t.Errorf("all-local text changed:\n%s\nwant:\n%s", out.String(), text)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); s != `{"peak_rate":5000000,"avg_rate":500000,"message_bytes":1000,"retention_days":7,"copies":3}` {
		t.Errorf("all-local workload JSON changed: %s", s)
	}
	if b, _ = json.Marshal(c); strings.Contains(string(b), "tiered") {
		t.Errorf("all-local capacity JSON has a tiered part: %s", b)
	}
	// The bounds with a measurement are today's: disk 46 of 20 TB.
	if err := c.WithMeasurement(findMax(0.5e9), 0, Resources{DiskBytes: 20e12, NICBitsPerSec: 25e9, ConsumerGroups: 1}); err != nil {
		t.Fatal(err)
	}
	if c.BrokersForPeak != 46 || c.BoundBy != "disk" || c.Bounds[0].Detail != "907.2 TB retained / 20 TB usable per broker" {
		t.Fatalf("all-local: %d brokers bounded by %q (%+v), want 46 by disk", c.BrokersForPeak, c.BoundBy, c.Bounds)
	}
	if b := c.Bounds[2]; b.Resource != "network" || b.Brokers != 5 ||
		b.Detail != "cluster in 15 GB/s, out 15 GB/s (1 consumer groups) / 25 Gbit/s per broker" {
		t.Errorf("all-local network bound %+v", b)
	}
}

// TestSizeTieredArithmetic: the hot window on broker disks, the whole
// retention in the store, across windows and store copies.
func TestSizeTieredArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		window                 *float64 // hours; nil: not given
		storeCopies            float64
		hotH, disk, store, old float64 // hours; TB
	}{
		{"seed 6h", hours(6), 1, 6, 32.4, 302.4, 291.6},
		{"zero window", hours(0), 1, 0, 0, 302.4, 302.4},
		{"no window: all local, store adds a copy", nil, 1, 168, 907.2, 302.4, 0},
		{"window = retention", hours(168), 1, 168, 907.2, 302.4, 0},
		{"window > retention counts as the retention", hours(1000), 1, 168, 907.2, 302.4, 0},
		{"one day, store keeps 3 raw copies", hours(24), 3, 24, 129.6, 907.2, 777.6},
		{"erasure-coded store at 1.5x", hours(6), 1.5, 6, 32.4, 453.6, 437.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := seedInput()
			in.ObjectStore, in.LocalRetentionHours, in.ObjectStoreCopies = true, tc.window, tc.storeCopies
			c := Size(in)
			tr := c.Tiered
			if tr == nil {
				t.Fatal("no tiered figures with ObjectStore")
			}
			checkFigures(t, []figure{
				{"hot window hours", tr.HotWindowHours, tc.hotH},
				{"broker disk", tr.BrokerDiskBytes, tc.disk * 1e12},
				{"saved", tr.BrokerDiskSavedBytes, 907.2e12 - tc.disk*1e12},
				{"hot window at peak", tr.HotWindowAtPeakBytes, tc.disk * 10 * 1e12},
				{"object store", tr.ObjectStoreBytes, tc.store * 1e12},
				{"remote only", tr.RemoteOnlyBytes, tc.old * 1e12},
				{"avg upload", tr.AvgUploadBps, 0.5e9},
				{"peak upload", tr.PeakUploadBps, 5e9},
				{"outage growth per hour", tr.OutageGrowthBytesPerHour, 5.4e12},
				{"cold read per group", tr.ColdReadBpsPerGroup, 0.5e9},
				// The tier changes where bytes live, not how many are written.
				{"aggregate writes", c.AggregateWriteBps, 15e9},
				{"all-local retained", c.RetainedBytes, 907.2e12},
			})
			var out bytes.Buffer
			WriteSize(&out, in, c, nil)
			window := fmt.Sprintf("hot window %g h", tc.hotH)
			if tc.window == nil {
				window = "no --local-retention: the hot window is the whole retention"
			}
			copies := "x 1 copy;"
			if tc.storeCopies != 1 {
				copies = fmt.Sprintf("x %g copies;", tc.storeCopies)
			}
			for _, want := range []string{window, copies, fmt.Sprintf("broker disks (hot window) %.5g TB", tc.disk), fmt.Sprintf("object store              %.5g TB", tc.store)} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			// The peak caveat only for a window between zero and the
			// retention: one peak can fill it.
			if peak := strings.Contains(out.String(), "a peak lasting"); peak != (tc.hotH > 0 && tc.hotH < 168) {
				t.Errorf("peak caveat printed %v for window %v:\n%s", peak, tc.window, out.String())
			}
		})
	}
}

// TestSizeTieredSeed is the design's workload with 20 TB brokers on 25
// Gbit/s: all-local, disk sets the count (46); with a 6 h hot window disk
// needs 2 and the measured write throughput sets it (30).
func TestSizeTieredSeed(t *testing.T) {
	res := Resources{DiskBytes: 20e12, NICBitsPerSec: 25e9, ConsumerGroups: 1}
	in := seedInput()
	in.ObjectStore, in.LocalRetentionHours, in.ObjectStoreCopies = true, hours(6), 1
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}

	// Without a measurement: the resource bounds alone.
	c := Size(in)
	c.WithResources(res)
	if c.BrokersForPeak != 0 || len(c.Bounds) != 3 {
		t.Fatalf("resources only: brokers %d, bounds %+v", c.BrokersForPeak, c.Bounds)
	}
	// Network: out is replication 10 + 1 group 5 + uploads 5 = 20 GB/s
	// = 160 Gbit/s / 25 = 6.4 -> 7; disk 32.4 / 20 = 1.62 -> 2; 3 copies
	// need 3 brokers whatever the load.
	want := map[string]int{"network": 7, "disk": 2, "replication factor": 3}
	for _, b := range c.Bounds {
		if n, ok := want[b.Resource]; !ok || b.Brokers != n {
			t.Errorf("%s bound %d brokers, want %d (%s)", b.Resource, b.Brokers, n, b.Detail)
		}
	}
	if c.Tiered.OutageHours != 0 {
		t.Errorf("outage hours %v without a broker count", c.Tiered.OutageHours)
	}

	// A run whose brokers each wrote 0.5 GB/s at the target: 15 / 0.5 = 30.
	c = Size(in)
	if err := c.WithMeasurement(findMax(0.5e9), 0, res); err != nil {
		t.Fatal(err)
	}
	if c.BrokersForPeak != 30 || !strings.Contains(c.BoundBy, "write throughput") {
		t.Fatalf("tiered: %d brokers bounded by %q, want 30 by write throughput", c.BrokersForPeak, c.BoundBy)
	}
	// 30 x 20 TB - 32.4 TB of hot window, filling at 5.4 TB/h.
	if h := c.Tiered.OutageHours; math.Abs(h-(600-32.4)/5.4) > 1e-9 {
		t.Errorf("outage hours %v, want %v", h, (600-32.4)/5.4)
	}

	var out bytes.Buffer
	WriteSize(&out, in, c, findMax(0.5e9))
	for _, want := range []string{
		"retained, all copies      907.2 TB",
		"hot window 6 h",
		"broker disks (hot window) 32.4 TB  (6 h of average ingest x 3 copies; 874.8 TB less than all-local)",
		"object store              302.4 TB  (7 days x 1 copy; 291.6 TB of it older than the hot window, only there)",
		"0.5 GB/s average, 5 GB/s at peak",
		"grow 5.4 TB per hour",
		"the 30 brokers' disks last about 105.1 h",
		"0.5 GB/s of store GETs per consumer group",
		"replicate or erasure-code internally",
		"a peak lasting 6 h would need 324 TB",
		"Bottom line: 30 brokers for the peak, bound by measured write throughput",
		"32.4 TB hot window (6 h, all copies) / 20 TB usable per broker; 302.4 TB in the object store",
		"out 20 GB/s (1 consumer groups, 5 GB/s of uploads)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tiered output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "retained on disk") {
		t.Errorf("tiered output still calls the whole retention on disk:\n%s", out.String())
	}
}

// TestSizeValidateTier: the tier flags' rules.
func TestSizeValidateTier(t *testing.T) {
	for _, tc := range []struct {
		name        string
		store       bool
		storeCopies float64
		window      *float64 // hours
		wantErr     string
	}{
		{"all local", false, 0, nil, ""},
		{"store, no window", true, 1, nil, ""},
		{"store, 6h", true, 1, hours(6), ""},
		{"store, zero window", true, 1, hours(0), ""},
		{"store, window = retention", true, 1, hours(168), ""},
		{"store, 3 raw copies", true, 3, hours(6), ""},
		{"window without store", false, 0, hours(6), "needs --object-store"},
		{"zero window without store", false, 0, hours(0), "needs --object-store"},
		{"store copies without store", false, 2, nil, "--object-store-copies needs --object-store"},
		{"store copies 0", true, 0, nil, "want >= 1"},
		{"store copies 0.5", true, 0.5, nil, "want >= 1"},
		{"negative window", true, 1, hours(-1), "want >= 0"},
		{"NaN window", true, 1, hours(math.NaN()), "want >= 0"},
		{"window > retention", true, 1, hours(169), "--local-retention 169h is longer than --retention-days 7 (168h)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := seedInput()
			in.ObjectStore, in.ObjectStoreCopies, in.LocalRetentionHours = tc.store, tc.storeCopies, tc.window
			err := in.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	// The workload's own rules still apply with a tier.
	in := seedInput()
	in.ObjectStore, in.ObjectStoreCopies, in.Copies = true, 1, 0
	if err := in.Validate(); err == nil || !strings.Contains(err.Error(), "copies >= 1") {
		t.Fatalf("copies 0 with a tier: %v", err)
	}
}

// TestSizeTieredJSON: the tier's inputs and figures appear in the JSON
// under the names the text uses.
func TestSizeTieredJSON(t *testing.T) {
	in := seedInput()
	in.ObjectStore, in.LocalRetentionHours, in.ObjectStoreCopies = true, hours(6), 1
	c := Size(in)
	if err := c.WithMeasurement(findMax(0.5e9), 0, Resources{DiskBytes: 20e12}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		Workload SizeInput `json:"workload"`
		Capacity Capacity  `json:"capacity"`
	}{in, c})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Workload map[string]any `json:"workload"`
		Capacity struct {
			RetainedBytes float64            `json:"retained_bytes"`
			Tiered        map[string]float64 `json:"tiered"`
		} `json:"capacity"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Workload["object_store"] != true || got.Workload["local_retention_hours"] != 6.0 || got.Workload["object_store_copies"] != 1.0 {
		t.Errorf("workload JSON %v lacks the tier flags", got.Workload)
	}
	for k, v := range map[string]float64{
		"hot_window_hours": 6, "broker_disk_bytes": 32.4e12, "object_store_bytes": 302.4e12, "remote_only_bytes": 291.6e12,
		"broker_disk_saved_bytes": 874.8e12, "hot_window_at_peak_bytes": 324e12, "object_store_copies": 1,
		"avg_upload_bps": 0.5e9, "peak_upload_bps": 5e9, "outage_growth_bytes_per_hour": 5.4e12,
		"outage_hours": (600 - 32.4) / 5.4, "cold_read_bps_per_group": 0.5e9,
	} {
		if g, ok := got.Capacity.Tiered[k]; !ok || math.Abs(g-v) > 1e-6*v {
			t.Errorf("tiered.%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got.Capacity.Tiered) != 12 {
		t.Errorf("tiered JSON has %d fields, want 12: %v", len(got.Capacity.Tiered), got.Capacity.Tiered)
	}
	if !near(got.Capacity.RetainedBytes, 907.2e12) {
		t.Errorf("retained_bytes %v: it stays the all-local figure", got.Capacity.RetainedBytes)
	}
}
