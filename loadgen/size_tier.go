package loadgen

import (
	"fmt"
	"io"
	"math"
	"sort"
)

// TieredCapacity is the arithmetic of a remote tier. The model:
// the leader uploads each segment once when it rolls, so the object store
// holds the whole retention, the newest hot window included; broker disks
// keep RF copies of the hot window only; followers upload nothing. All
// figures use the average rate except the peak ones, as the all-local
// retained bytes do.
type TieredCapacity struct {
	// HotWindowHours is the local retention used: the one given, capped at
	// the retention, or the whole retention when none was given.
	HotWindowHours float64 `json:"hot_window_hours"`
	// BrokerDiskBytes is the hot window x the replication factor: what
	// broker disks retain instead of Capacity.RetainedBytes.
	BrokerDiskBytes float64 `json:"broker_disk_bytes"`
	// BrokerDiskSavedBytes is RetainedBytes - BrokerDiskBytes.
	BrokerDiskSavedBytes float64 `json:"broker_disk_saved_bytes"`
	// HotWindowAtPeakBytes is the hot window filled at the peak rate (a
	// peak that lasts as long as the window), all copies.
	HotWindowAtPeakBytes float64 `json:"hot_window_at_peak_bytes"`
	// ObjectStoreBytes is the whole retention x the store's copies.
	ObjectStoreBytes float64 `json:"object_store_bytes"`
	// RemoteOnlyBytes is the part of ObjectStoreBytes older than the hot
	// window: held by the store alone.
	RemoteOnlyBytes float64 `json:"remote_only_bytes"`
	StoreCopies     float64 `json:"object_store_copies"`
	// AvgUploadBps and PeakUploadBps are what the leaders send to the
	// store: one copy of the ingest, at the peak while uploads keep pace.
	AvgUploadBps  float64 `json:"avg_upload_bps"`
	PeakUploadBps float64 `json:"peak_upload_bps"`
	// OutageGrowthBytesPerHour is how fast broker disks grow while the
	// store is unreachable: local deletion waits for uploads, produce does
	// not.
	OutageGrowthBytesPerHour float64 `json:"outage_growth_bytes_per_hour"`
	// OutageHours is how long the brokers for the peak can absorb that
	// growth before their disks are full (0 when the broker count or the
	// disk per broker is unknown).
	OutageHours float64 `json:"outage_hours,omitempty"`
	// ColdReadBpsPerGroup is the store GET rate of one consumer group
	// reading data older than the hot window at the average ingest rate.
	ColdReadBpsPerGroup float64 `json:"cold_read_bps_per_group"`
}

// sizeTiered is nil without ObjectStore. A window longer than the
// retention (which Validate refuses) counts as the retention: nothing is
// kept past it.
func sizeTiered(in SizeInput) *TieredCapacity {
	if !in.ObjectStore {
		return nil
	}
	peak := in.PeakRate * in.MessageBytes
	avg := in.AvgRate * in.MessageBytes
	hotDays := in.RetentionDays
	if h := in.LocalRetentionHours; h != nil {
		hotDays = math.Min(math.Max(*h, 0)/24, in.RetentionDays)
	}
	copies := max(in.ObjectStoreCopies, 1)
	hotBytes := avg * 86400 * hotDays * in.Copies
	return &TieredCapacity{
		HotWindowHours:           hotDays * 24,
		BrokerDiskBytes:          hotBytes,
		BrokerDiskSavedBytes:     avg*86400*in.RetentionDays*in.Copies - hotBytes,
		HotWindowAtPeakBytes:     peak * 86400 * hotDays * in.Copies,
		ObjectStoreBytes:         avg * 86400 * in.RetentionDays * copies,
		RemoteOnlyBytes:          avg * 86400 * (in.RetentionDays - hotDays) * copies,
		StoreCopies:              copies,
		AvgUploadBps:             avg,
		PeakUploadBps:            peak,
		OutageGrowthBytesPerHour: avg * in.Copies * 3600,
		ColdReadBpsPerGroup:      avg,
	}
}

// WithResources weighs disk and network on their own, without a measured
// run: Bounds is filled, BrokersForPeak stays 0 (the write-throughput
// bound needs a measurement, see WithDiagnosis).
func (c *Capacity) WithResources(res Resources) {
	c.Bounds = c.resourceBounds(res)
	sort.SliceStable(c.Bounds, func(i, j int) bool { return c.Bounds[i].Brokers > c.Bounds[j].Brokers })
}

// resourceBounds are the disk and network bounds for the resources given.
// With a remote tier, disk holds the hot window only and the leaders'
// uploads add to each broker's egress.
func (c *Capacity) resourceBounds(res Resources) []Bound {
	// Every copy of a partition lives on its own broker.
	bounds := []Bound{{
		Resource: "replication factor",
		Brokers:  int(math.Ceil(c.Copies)),
		Detail:   fmt.Sprintf("%.0f copies of each partition, each on its own broker", c.Copies),
	}}
	if res.DiskBytes > 0 {
		b := Bound{
			Resource: "disk",
			Brokers:  int(math.Ceil(c.RetainedBytes / res.DiskBytes)),
			Detail:   fmt.Sprintf("%.5g TB retained / %.4g TB usable per broker", c.RetainedBytes/1e12, res.DiskBytes/1e12),
		}
		if t := c.Tiered; t != nil {
			b.Brokers = int(math.Ceil(t.BrokerDiskBytes / res.DiskBytes))
			b.Detail = fmt.Sprintf("%.5g TB hot window (%.4g h, all copies) / %.4g TB usable per broker; %.5g TB in the object store",
				t.BrokerDiskBytes/1e12, t.HotWindowHours, res.DiskBytes/1e12, t.ObjectStoreBytes/1e12)
		}
		bounds = append(bounds, b)
	}
	if res.NICBitsPerSec > 0 {
		// Spread evenly: a broker receives its share of the produce and
		// replication traffic, and sends its share of the replication and
		// of every consumer group's reads (and of the uploads).
		in := c.AggregateWriteBps
		out := c.ReplicationBps + c.PeakProducerBps*res.ConsumerGroups
		groups := fmt.Sprintf("%.3g consumer groups", res.ConsumerGroups)
		if t := c.Tiered; t != nil {
			out += t.PeakUploadBps
			groups += fmt.Sprintf(", %.4g GB/s of uploads", t.PeakUploadBps/1e9)
		}
		bounds = append(bounds, Bound{
			Resource: "network",
			Brokers:  int(math.Ceil(max(in, out) * 8 / res.NICBitsPerSec)),
			Detail: fmt.Sprintf("cluster in %.4g GB/s, out %.4g GB/s (%s) / %.4g Gbit/s per broker",
				in/1e9, out/1e9, groups, res.NICBitsPerSec/1e9),
		})
	}
	return bounds
}

// outageHours fills Tiered.OutageHours once the broker count is known:
// the disk the brokers have beyond the hot window, over the growth rate.
func (c *Capacity) outageHours(res Resources) {
	t := c.Tiered
	if t == nil || res.DiskBytes <= 0 || c.BrokersForPeak <= 0 || t.OutageGrowthBytesPerHour <= 0 {
		return
	}
	t.OutageHours = max(float64(c.BrokersForPeak)*res.DiskBytes-t.BrokerDiskBytes, 0) / t.OutageGrowthBytesPerHour
}

// writeTiered prints the remote tier's lines (nothing without one).
func writeTiered(w io.Writer, in SizeInput, c Capacity) {
	t := c.Tiered
	if t == nil {
		return
	}
	gb := func(v float64) string { return fmt.Sprintf("%.4g GB/s", v/1e9) }
	window := fmt.Sprintf("hot window %.4g h", t.HotWindowHours)
	if in.LocalRetentionHours == nil {
		window = "no --local-retention: the hot window is the whole retention"
	}
	fmt.Fprintf(w, "Remote tier (--object-store, %s): leaders upload each segment once when it rolls,\n", window)
	fmt.Fprintln(w, "so the store holds the whole retention and broker disks only the hot window:")
	fmt.Fprintf(w, "  broker disks (hot window) %.5g TB  (%.4g h of average ingest x %.0f copies; %.5g TB less than all-local)\n",
		t.BrokerDiskBytes/1e12, t.HotWindowHours, in.Copies, t.BrokerDiskSavedBytes/1e12)
	copies := "1 copy"
	if t.StoreCopies != 1 {
		copies = fmt.Sprintf("%g copies", t.StoreCopies)
	}
	fmt.Fprintf(w, "  object store              %.5g TB  (%.4g days x %s; %.5g TB of it older than the hot window, only there)\n",
		t.ObjectStoreBytes/1e12, in.RetentionDays, copies, t.RemoteOnlyBytes/1e12)
	fmt.Fprintf(w, "  uploads from leaders      %s average, %s at peak  (one copy of the ingest; followers do not upload)\n",
		gb(t.AvgUploadBps), gb(t.PeakUploadBps))
	fmt.Fprintf(w, "  store unreachable         broker disks grow %.4g TB per hour (local deletion waits for uploads; produce goes on)",
		t.OutageGrowthBytesPerHour/1e12)
	if t.OutageHours > 0 {
		fmt.Fprintf(w, ": the %d brokers' disks last about %.4g h", c.BrokersForPeak, t.OutageHours)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  cold reads                %s of store GETs per consumer group reading older data at the average rate\n", gb(t.ColdReadBpsPerGroup))
	if t.StoreCopies == 1 {
		fmt.Fprintln(w, "Object store bytes are logical: S3-style stores replicate or erasure-code internally and bill")
		fmt.Fprintln(w, "logical bytes (--object-store-copies N counts raw bytes of a store replicated by hand).")
	}
	if t.HotWindowHours > 0 && t.HotWindowHours < in.RetentionDays*24 {
		// A window as long as the retention is sized at the average as the
		// all-local figure is; a shorter one can be filled by one peak.
		fmt.Fprintf(w, "The hot window uses the average rate; a peak lasting %.4g h would need %.5g TB on broker disks.\n",
			t.HotWindowHours, t.HotWindowAtPeakBytes/1e12)
	}
	fmt.Fprintln(w, "Broker disks also hold each partition's active segment and segments not yet uploaded.")
	fmt.Fprintln(w, "--consumer-groups are taken to tail the stream from the hot window; a group reading older")
	fmt.Fprintln(w, "data fetches it from the store through the broker's cache (in to the broker and out again,")
	fmt.Fprintln(w, "at the store's first-byte latency on each cache miss), which the broker count leaves out.")
}
