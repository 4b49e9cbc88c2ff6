package loadgen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/results"
)

func TestSizeDefaults(t *testing.T) {
	in := SizeInput{PeakRate: 5_000_000, AvgRate: 500_000, MessageBytes: 1000, RetentionDays: 7, Copies: 3}
	c := Size(in)
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"peak producer", c.PeakProducerBps, 5e9},
		{"replication", c.ReplicationBps, 10e9},
		{"aggregate", c.AggregateWriteBps, 15e9},
		{"average", c.AvgProducerBps, 0.5e9},
		{"per day", c.AvgPerDayBytes, 43.2e12},
		{"retained", c.RetainedBytes, 907.2e12},
	} {
		if d := tc.got/tc.want - 1; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
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
	if !strings.Contains(out.String(), "bounded by disk") || !strings.Contains(out.String(), "network") {
		t.Fatalf("size output does not name the bounds:\n%s", out.String())
	}
}
